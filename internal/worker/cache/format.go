package cache

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/zeebo/xxh3"

	"github.com/talonhq/talon/internal/blob"
)

// On-disk format of a block file, little endian:
//
//	off   size  field
//	0       8     magic "TALONBLK"
//	8       2     format version (2)
//	10      2     key length k
//	12      8     block size of the cache that wrote it
//	20      8     block index
//	28      8     object size when the block was loaded
//	36      8     data length
//	44      8     xxh3-64 of the data
//	52      2     object version length v
//	54      k     object key
//	54+k    v     object version (blob.Info.Version) the block was loaded from
//	54+k+v  8     xxh3-64 of bytes [0, 54+k+v)
//	62+k+v  ...   data
//
// Files of format version 1 (no object version) are deleted at Open like
// any invalid block file: their content cannot be tied to a version.
const (
	magic         = "TALONBLK"
	formatVersion = 2
	fixedHeader   = 54
	// MaxHeaderBytes is the largest block file header (the longest key
	// and version).
	MaxHeaderBytes = fixedHeader + blob.MaxKeyBytes + blob.MaxVersionBytes + 8

	blocksDir = "blocks"
	lockFile  = "LOCK"
	tmpPrefix = "tmp-"
	blockExt  = ".blk"
)

// header is the decoded header of a block file.
type header struct {
	key       string
	version   string
	blockSize int64
	index     int64
	objSize   int64
	dataLen   int64
	sum       uint64
}

func headerLen(key, version string) int64 {
	return fixedHeader + int64(len(key)) + int64(len(version)) + 8
}

func (h *header) encode() []byte {
	b := make([]byte, headerLen(h.key, h.version))
	copy(b, magic)
	binary.LittleEndian.PutUint16(b[8:], formatVersion)
	binary.LittleEndian.PutUint16(b[10:], uint16(len(h.key)))
	binary.LittleEndian.PutUint64(b[12:], uint64(h.blockSize))
	binary.LittleEndian.PutUint64(b[20:], uint64(h.index))
	binary.LittleEndian.PutUint64(b[28:], uint64(h.objSize))
	binary.LittleEndian.PutUint64(b[36:], uint64(h.dataLen))
	binary.LittleEndian.PutUint64(b[44:], h.sum)
	binary.LittleEndian.PutUint16(b[52:], uint16(len(h.version)))
	copy(b[fixedHeader:], h.key)
	copy(b[fixedHeader+len(h.key):], h.version)
	end := fixedHeader + len(h.key) + len(h.version)
	binary.LittleEndian.PutUint64(b[end:], xxh3.Hash(b[:end]))
	return b
}

var errBadHeader = errors.New("bad block header")

// decodeHeader decodes the header at the start of b, which holds at least
// the whole header when the file is long enough.
func decodeHeader(b []byte) (*header, error) {
	if len(b) < fixedHeader+8 || string(b[:8]) != magic {
		return nil, fmt.Errorf("%w: no magic", errBadHeader)
	}
	if v := binary.LittleEndian.Uint16(b[8:]); v != formatVersion {
		return nil, fmt.Errorf("%w: format version %d, want %d", errBadHeader, v, formatVersion)
	}
	k := int(binary.LittleEndian.Uint16(b[10:]))
	v := int(binary.LittleEndian.Uint16(b[52:]))
	end := fixedHeader + k + v
	if k > blob.MaxKeyBytes || v > blob.MaxVersionBytes || len(b) < end+8 {
		return nil, fmt.Errorf("%w: key length %d, version length %d", errBadHeader, k, v)
	}
	if binary.LittleEndian.Uint64(b[end:]) != xxh3.Hash(b[:end]) {
		return nil, fmt.Errorf("%w: header checksum mismatch", errBadHeader)
	}
	h := &header{
		blockSize: int64(binary.LittleEndian.Uint64(b[12:])),
		index:     int64(binary.LittleEndian.Uint64(b[20:])),
		objSize:   int64(binary.LittleEndian.Uint64(b[28:])),
		dataLen:   int64(binary.LittleEndian.Uint64(b[36:])),
		sum:       binary.LittleEndian.Uint64(b[44:]),
		key:       string(b[fixedHeader : fixedHeader+k]),
		version:   string(b[fixedHeader+k : end]),
	}
	if err := blob.ValidateKey(h.key); err != nil {
		return nil, fmt.Errorf("%w: %w", errBadHeader, err)
	}
	if h.blockSize <= 0 || h.index < 0 || h.objSize < 0 || h.dataLen <= 0 {
		return nil, fmt.Errorf("%w: negative or zero field", errBadHeader)
	}
	return h, nil
}

// blockLen is the data length of block index of an object of objSize
// bytes, or 0 when the block is past the end.
func blockLen(blockSize, objSize, index int64) int64 {
	off := index * blockSize
	if index < 0 || off >= objSize || off/blockSize != index {
		return 0
	}
	return min(blockSize, objSize-off)
}

// blockName is the file name of (key, index) and its shard directory.
func blockName(key string, index int64) (shard, name string) {
	h := xxh3.HashString128(key).Bytes()
	hx := hex.EncodeToString(h[:])
	return hx[:2], hx + "-" + strconv.FormatInt(index, 10) + blockExt
}

// parseBlockName reports whether name has the form blockName produces.
func parseBlockName(shard, name string) bool {
	base, ok := strings.CutSuffix(name, blockExt)
	if !ok {
		return false
	}
	hx, idx, ok := strings.Cut(base, "-")
	if !ok || len(hx) != 32 || !strings.HasPrefix(hx, shard) {
		return false
	}
	if _, err := hex.DecodeString(hx); err != nil || strings.ToLower(hx) != hx {
		return false
	}
	n, err := strconv.ParseInt(idx, 10, 64)
	return err == nil && n >= 0 && strconv.FormatInt(n, 10) == idx
}

func isShardName(s string) bool {
	if len(s) != 2 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}

// readBlockHeader opens path and validates its header against the
// configured block size, its name and its length. It returns the header
// and the file size.
func readBlockHeader(path string, blockSize int64) (*header, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	buf := make([]byte, min(fi.Size(), MaxHeaderBytes))
	if _, err := io.ReadFull(f, buf); err != nil {
		return nil, 0, err
	}
	h, err := decodeHeader(buf)
	if err != nil {
		return nil, 0, err
	}
	if h.blockSize != blockSize {
		return nil, 0, fmt.Errorf("%w: block size %d, the cache uses %d", errBadHeader, h.blockSize, blockSize)
	}
	shard, name := blockName(h.key, h.index)
	if filepath.Base(path) != name || filepath.Base(filepath.Dir(path)) != shard {
		return nil, 0, fmt.Errorf("%w: file name does not match key and index", errBadHeader)
	}
	if want := blockLen(blockSize, h.objSize, h.index); h.dataLen != want {
		return nil, 0, fmt.Errorf("%w: data length %d, want %d for block %d of a %d-byte object", errBadHeader, h.dataLen, want, h.index, h.objSize)
	}
	if want := headerLen(h.key, h.version) + h.dataLen; fi.Size() != want {
		return nil, 0, fmt.Errorf("%w: file is %d bytes, want %d (truncated or padded)", errBadHeader, fi.Size(), want)
	}
	return h, fi.Size(), nil
}
