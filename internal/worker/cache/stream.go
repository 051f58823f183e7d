package cache

// This file is read-through on a miss: a reader of a block being loaded
// reads the load's temporary file as the bytes arrive from the store,
// instead of waiting for the whole block (see "Streaming" in doc.go).

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/talonhq/talon/internal/blob"
)

// stream is one attempt of a load to fill its block's temporary file, as
// the streaming readers of the block see it. Guarded by loads.mu.
type stream struct {
	path    string // the temporary file
	dataOff int64  // where the data starts in it
	written int64  // data bytes in the file so far
	done    bool   // the attempt ended: complete when err is nil
	err     error
	wake    chan struct{} // closed and replaced at every change
}

// changedLocked wakes the readers waiting on st.
func (st *stream) changedLocked() {
	close(st.wake)
	st.wake = make(chan struct{})
}

// progress counts the bytes a load's copy has written to the temporary
// file; it is the last writer of the copy's MultiWriter, so it sees only
// bytes the file took. It takes loads.mu only: a chunk never waits for
// the index.
type progress struct {
	ls *loads
	st *stream
}

func (p progress) Write(b []byte) (int, error) {
	p.ls.mu.Lock()
	p.st.written += int64(len(b))
	p.st.changedLocked()
	p.ls.mu.Unlock()
	return len(b), nil
}

// beginStream publishes a load attempt's temporary file to streaming
// readers.
func (ls *loads) beginStream(l *load, path string, dataOff int64) *stream {
	st := &stream{path: path, dataOff: dataOff, wake: make(chan struct{})}
	ls.mu.Lock()
	l.stream = st
	l.changedLocked()
	ls.mu.Unlock()
	return st
}

// endStream records how an attempt ended. It runs before a failed
// attempt's temporary file is deleted, so a reader that finds err nil
// under mu may still open the file by its path.
func (ls *loads) endStream(st *stream, err error) {
	ls.mu.Lock()
	st.done, st.err = true, err
	st.changedLocked()
	ls.mu.Unlock()
}

// OpenBlock is ReadBlockOf for a reader that streams: on a miss it
// returns as soon as the load has the block's first bytes, and the
// Block's reads wait for the rest as it arrives from the store (one fetch
// however many readers wait). A load that fails after that fails the
// Block's reads with its error, so a reader never takes a short block for
// a whole one; a failure before it is OpenBlock's error, as for
// ReadBlockOf. Nothing partial is ever cached.
func (c *Cache) OpenBlock(ctx context.Context, object string, info blob.Info, index int64) (*Block, error) {
	id, err := c.blockOf(object, info, index)
	if err != nil {
		return nil, err
	}
	for {
		b, locked, err := c.hitOrLock(id, info)
		if !locked {
			return b, err
		}
		l := c.loads.m[id]
		if l == nil || (l.info.Size == info.Size && l.info.Version == info.Version) {
			return c.streamMissLocked(ctx, id, info)
		}
		// A load of another version of the object runs (the object
		// changed): let it end, then look again.
		c.loads.mu.Unlock()
		select {
		case <-l.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// streamMissLocked joins (or starts) the load of block id at info and
// returns a streaming Block once it has bytes, or the loaded block when
// it ends first. Called with loads.mu held; releases it.
func (c *Cache) streamMissLocked(ctx context.Context, id blockID, info blob.Info) (*Block, error) {
	l, err := c.loads.startLocked(id, info)
	if err != nil {
		c.loads.mu.Unlock()
		return nil, err
	}
	l.waiters++ // a descriptor at commit, unless it streams
	if b, err := c.loads.streamLocked(ctx, l, info, blockLen(c.cfg.BlockSize, info.Size, id.index)); b != nil || err != nil {
		return b, err
	}
	return c.finishMissLocked(ctx, id, info, l)
}

// streamLocked waits until load l's attempt has bytes, then opens the
// attempt's temporary file for one reader, a streaming Block of n bytes,
// and releases mu. When the load ends or ctx does first, it returns
// (nil, nil) with mu still held. It opens the file under mu while the
// load has not ended (so the file has not been renamed) and the attempt
// has not failed (so it has not been deleted).
func (ls *loads) streamLocked(ctx context.Context, l *load, info blob.Info, n int64) (*Block, error) {
	for !l.ended && ctx.Err() == nil {
		if st := l.stream; st != nil && st.err == nil && (st.written > 0 || st.done) {
			l.waiters--
			f, err := os.Open(st.path)
			ls.mu.Unlock()
			if err != nil {
				return nil, fmt.Errorf("%w: open block file being loaded: %w", ErrIO, err)
			}
			return &Block{f: f, dataOff: st.dataOff, size: n, objSize: info.Size, version: info.Version, ls: ls, st: st}, nil
		}
		wake, progressed := l.wake, (<-chan struct{})(nil)
		if l.stream != nil {
			progressed = l.stream.wake
		}
		ls.mu.Unlock()
		select {
		case <-wake:
		case <-progressed:
		case <-l.done:
		case <-ctx.Done():
		}
		ls.mu.Lock()
	}
	return nil, nil
}

// available waits until the block holds more than from data bytes, or
// its load attempt has ended, and returns how many it holds and the
// attempt's error. A load always ends (LoadTimeout, Close), so the wait
// does too.
func (b *Block) available(from int64) (int64, error) {
	b.ls.mu.Lock()
	defer b.ls.mu.Unlock()
	for b.st.written <= from && !b.st.done {
		wake := b.st.wake
		b.ls.mu.Unlock()
		<-wake
		b.ls.mu.Lock()
	}
	return b.st.written, b.st.err
}

// waitFor returns nil once bytes [0, end) of a streaming block are in its
// file, or the load's error when it ended first.
func (b *Block) waitFor(end int64) error {
	for {
		got, err := b.available(end - 1)
		switch {
		case got >= end:
			return nil
		case err != nil:
			return fmt.Errorf("block load failed after %d of its %d bytes: %w", got, b.size, err)
		case b.st.done:
			return fmt.Errorf("%w: block load ended after %d of its %d bytes", blob.ErrBackend, got, b.size)
		}
	}
}

// writeStreaming is WriteRange of a block still loading: it sends what
// the file holds, then waits for more.
func (b *Block) writeStreaming(w io.Writer, off, n int64) (int64, error) {
	var sent int64
	for sent < n {
		got, err := b.available(off + sent)
		if got <= off+sent {
			if err == nil {
				err = fmt.Errorf("%w: block load ended after %d of its %d bytes", blob.ErrBackend, got, b.size)
			}
			return sent, fmt.Errorf("block load failed after %d of its %d bytes: %w", got, b.size, err)
		}
		k, err := b.copyAt(w, off+sent, min(got, off+n)-(off+sent))
		sent += k
		if err != nil {
			return sent, err
		}
	}
	return sent, nil
}
