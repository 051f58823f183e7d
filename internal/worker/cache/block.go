package cache

// This file is the Block a read returns: a descriptor of a block file (or
// the block's bytes in memory), read with ReadAt or sent with WriteRange.

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sync"
)

// Block is an open, complete block: its data is bytes
// [Index*BlockSize, Index*BlockSize+Size()) of the object. The caller must
// Close it, once, after its last read. ReadAt and WriteRange are safe for
// concurrent use.
type Block struct {
	f       *os.File
	mem     []byte // the data, for a block read through (f is nil then)
	dataOff int64
	size    int64
	objSize int64
	version string
	// seek serializes WriteRange: sendfile(2) reads from the file offset,
	// which is the descriptor's, shared by every goroutine using b.
	seek sync.Mutex
	// st is the load attempt a streaming Block (OpenBlock) reads while it
	// fills f, the attempt's temporary file; nil for a complete block.
	// Its fields are guarded by ls.mu.
	ls *loads
	st *stream
}

// Size returns the number of data bytes in the block.
func (b *Block) Size() int64 { return b.size }

// ObjectSize returns the object's size when the block was loaded.
func (b *Block) ObjectSize() int64 { return b.objSize }

// Version returns the object version the block was loaded from.
func (b *Block) Version() string { return b.version }

// ReadAt reads block data at off (relative to the block), like io.ReaderAt.
func (b *Block) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("%w: negative offset %d", ErrOutOfRange, off)
	}
	if b.f == nil {
		return bytes.NewReader(b.mem).ReadAt(p, off)
	}
	if b.st != nil {
		if err := b.waitFor(min(off+int64(len(p)), b.size)); err != nil {
			return 0, err
		}
	}
	return io.NewSectionReader(b.f, b.dataOff, b.size).ReadAt(p, off)
}

// WriteRange writes block bytes [off, off+n) to w. It copies from the file
// itself (an io.LimitedReader over the *os.File, positioned with Seek), so
// when w is a TCP connection or an http.ResponseWriter over one the kernel
// sends the data with sendfile. (An io.SectionReader would need no Seek,
// but net.TCPConn.ReadFrom sends only an *os.File, alone or in an
// io.LimitedReader, with sendfile.) Concurrent calls on one Block take
// turns; separate ReadBlock calls return separate descriptors and do not.
func (b *Block) WriteRange(w io.Writer, off, n int64) (int64, error) {
	if off < 0 || n < 0 || off+n > b.size {
		return 0, fmt.Errorf("%w: range %d+%d of a %d-byte block", ErrOutOfRange, off, n, b.size)
	}
	if b.f == nil {
		k, err := w.Write(b.mem[off : off+n])
		return int64(k), err
	}
	if b.st != nil {
		return b.writeStreaming(w, off, n)
	}
	return b.copyAt(w, off, n)
}

// copyAt copies data bytes [off, off+n) of the block file to w (with
// sendfile when w is a plain connection).
func (b *Block) copyAt(w io.Writer, off, n int64) (int64, error) {
	b.seek.Lock()
	defer b.seek.Unlock()
	if _, err := b.f.Seek(b.dataOff+off, io.SeekStart); err != nil {
		return 0, fmt.Errorf("%w: seek block file: %w", ErrIO, err)
	}
	return io.CopyN(w, b.f, n)
}

// Close closes the block's file.
func (b *Block) Close() error {
	if b.f == nil {
		return nil
	}
	return b.f.Close()
}

func newBlock(f *os.File, e *entry) *Block {
	// These fields never change after the entry is published.
	return &Block{f: f, dataOff: e.dataOff, size: e.dataLen, objSize: e.objSize, version: e.version}
}
