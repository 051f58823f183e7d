package blob

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"hash/crc32"
	"hash/crc64"
)

// Checksum algorithms a store may keep for a whole object. SHA256, SHA1
// and MD5 are cryptographic: bytes that match them were not forged by
// whoever served them (a worker cannot find a second preimage). The CRCs
// are not: anyone can change bytes and add a few that restore the CRC, so
// they detect accidents (corruption in transit or on disk) and vouch for
// nothing against a worker that lies (see Checksum.Cryptographic).
const (
	SHA256    = "sha256"    // S3 full-object SHA-256
	SHA1      = "sha1"      // S3 full-object SHA-1
	MD5       = "md5"       // an S3 ETag that is the MD5 of a single-part upload, GCS MD5, Azure Content-MD5
	CRC64NVME = "crc64nvme" // S3 full-object CRC-64/NVME
	CRC32C    = "crc32c"    // S3 full-object CRC-32C, GCS
	CRC32     = "crc32"     // S3 full-object CRC-32
)

// crc64NVME is the CRC-64/NVME table (polynomial 0xad93d23594c93659,
// reflected; the hash/crc64 package takes reflected polynomials).
var crc64NVME = crc64.MakeTable(0x9a6c9329ac4bc9b5)

var crc32C = crc32.MakeTable(crc32.Castagnoli)

// Checksum is a store's own checksum of a whole object: what a reader
// checks the bytes it assembled against. The zero value means the store
// keeps none.
type Checksum struct {
	// Algorithm is one of SHA256, SHA1, MD5, CRC64NVME, CRC32C, CRC32,
	// or "".
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

// Cryptographic reports whether c is evidence against tampering (SHA256,
// SHA1, MD5), not only against corruption (the CRCs, or none).
func (c Checksum) Cryptographic() bool {
	switch c.Algorithm {
	case SHA256, SHA1, MD5:
		return true
	}
	return false
}

// NewHash returns a hash that computes c's algorithm, or nil for the zero
// Checksum.
func (c Checksum) NewHash() hash.Hash {
	switch c.Algorithm {
	case SHA256:
		return sha256.New()
	case SHA1:
		return sha1.New() //nolint:gosec // the store's own checksum, checked as it is
	case CRC64NVME:
		return crc64.New(crc64NVME)
	case CRC32C:
		return crc32.New(crc32C)
	case CRC32:
		return crc32.NewIEEE()
	case MD5:
		return md5.New()
	}
	return nil
}

// checksumLen is the digest length of each algorithm.
var checksumLen = map[string]int{SHA256: sha256.Size, SHA1: sha1.Size, MD5: md5.Size, CRC64NVME: 8, CRC32C: 4, CRC32: 4}
