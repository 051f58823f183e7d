package blob

import (
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"hash/crc32"
	"hash/crc64"
)

// Checksum algorithms a store may keep for a whole object.
const (
	SHA256    = "sha256"    // S3 full-object SHA-256
	CRC64NVME = "crc64nvme" // S3 full-object CRC-64/NVME
	CRC32C    = "crc32c"    // S3 full-object CRC-32C, GCS
	MD5       = "md5"       // an S3 ETag that is the MD5 of a single-part upload, Azure Content-MD5
)

// crc64NVME is the CRC-64/NVME table (polynomial 0xad93d23594c93659,
// reflected; the hash/crc64 package takes reflected polynomials).
var crc64NVME = crc64.MakeTable(0x9a6c9329ac4bc9b5)

var crc32C = crc32.MakeTable(crc32.Castagnoli)

// Checksum is a store's own checksum of a whole object: what a reader
// checks the bytes it assembled against. The zero value means the store
// keeps none.
type Checksum struct {
	// Algorithm is one of SHA256, CRC64NVME, CRC32C, MD5, or "".
	Algorithm string
	// Value is the digest in the byte order its hash.Hash Sum produces
	// (big endian for the CRCs, as S3 and GCS send them).
	Value []byte
}

// IsZero reports whether the store gave no checksum.
func (c Checksum) IsZero() bool { return c.Algorithm == "" }

// String is "algorithm:hex", or "none".
func (c Checksum) String() string {
	if c.IsZero() {
		return "none"
	}
	return c.Algorithm + ":" + hex.EncodeToString(c.Value)
}

// NewHash returns a hash that computes c's algorithm, or nil for the zero
// Checksum.
func (c Checksum) NewHash() hash.Hash {
	switch c.Algorithm {
	case SHA256:
		return sha256.New()
	case CRC64NVME:
		return crc64.New(crc64NVME)
	case CRC32C:
		return crc32.New(crc32C)
	case MD5:
		return md5.New()
	}
	return nil
}

// checksumLen is the digest length of each algorithm.
var checksumLen = map[string]int{SHA256: sha256.Size, CRC64NVME: 8, CRC32C: 4, MD5: md5.Size}
