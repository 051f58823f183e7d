package cache

// This file is a block load's goroutine, from the blob store to the
// commit of the block file (see doc.go), and the copy from the store.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"

	"github.com/talonhq/talon/internal/blob"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// load loads block id of the object at info's version and ends l.
func (c *Cache) load(id blockID, info blob.Info, l *load) {
	defer c.life.exit()
	c.cfg.Stats.LoadStarted()
	defer c.cfg.Stats.LoadDone()
	ctx, cancel := context.WithTimeout(c.loadCtx, c.cfg.LoadTimeout)
	defer cancel()
	ctx, span := c.tracer.Start(ctx, "cache.load", trace.WithAttributes(attribute.String("talon.blob.object", id.object),
		attribute.Int64("talon.cache.block", id.index), attribute.String("talon.blob.version", info.Version)))
	defer span.End()
	e, tmpPath, err := c.fetch(ctx, id, info, l)
	if errors.Is(err, syscall.ENOSPC) {
		// The disk is fuller than the configured capacity assumed (other
		// files share it): make room by evicting, then try once more.
		need := 4 * (headerLen(id.object, info.Version) + c.cfg.BlockSize)
		if freed := c.idx.evictBytes(need); freed > 0 {
			c.log.Warn("cache disk full: evicted blocks to make room", "freed_bytes", freed, "object", id.object, "block", id.index)
			e, tmpPath, err = c.fetch(ctx, id, info, l)
		}
	}
	switch {
	case err != nil && c.loadCtx.Err() != nil:
		err = fmt.Errorf("%w: %w", ErrClosed, err)
	case err != nil && ctx.Err() != nil:
		err = fmt.Errorf("%w: load of block %d of object %q timed out after %v: %w", blob.ErrBackend, id.index, id.object, c.cfg.LoadTimeout, err)
	}
	if err = c.loads.end(id, l, e, tmpPath, err); err != nil {
		span.SetStatus(codes.Error, err.Error())
		c.log.WarnContext(ctx, "block load failed", "object", id.object, "block", id.index, "error", err)
	}
}

// copyFromSource copies the n bytes of block id of the object at version
// from the blob store to w. Write errors are ErrIO; read errors come from
// the store (blob.ErrVersionChanged when the object is at another version).
func (c *Cache) copyFromSource(ctx context.Context, id blockID, version string, n int64, w io.Writer) (int64, error) {
	rc, err := blob.ReadVersion(ctx, c.cfg.Source, id.object, version, id.index*c.cfg.BlockSize, n)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	buf, _ := c.loadBufs.Get().(*[]byte)
	if buf == nil || len(*buf) != c.loadBuf {
		b := make([]byte, c.loadBuf)
		buf = &b
	}
	defer c.loadBufs.Put(buf)
	got, err := copyFull(&ioErrWriter{w}, rc, n, *buf)
	c.cfg.Stats.BackendBytes(got)
	if errors.Is(err, io.EOF) {
		err = nil // short: the caller reports it
	}
	return got, err
}

// loadBufferSize is the most a load writes to a block file at once.
// Block files are served with sendfile(2) from the page cache, and the
// size of the writes that filled it decides the size of its folios: the
// 32 KiB writes of io.Copy cost a hit of a 4 MiB block 15-20% more CPU
// in the kernel (page cache lookups, more pipe buffers and socket frags)
// than writes of 1 MiB or more (measured on ext4, Linux 6.18).
const loadBufferSize = 1 << 20

// copyFull copies up to n bytes from src to dst through buf, writing only
// whole buffers (but the last): a source that returns a few KiB per read
// (a socket) still gives the block file large writes. Like io.CopyN it
// returns io.EOF when src ends before n bytes.
func copyFull(dst io.Writer, src io.Reader, n int64, buf []byte) (int64, error) {
	var written int64
	for written < n {
		k, rerr := io.ReadFull(src, buf[:min(int64(len(buf)), n-written)])
		if k > 0 {
			wk, werr := dst.Write(buf[:k])
			written += int64(wk)
			if werr != nil {
				return written, werr
			}
			if wk != k {
				return written, io.ErrShortWrite
			}
		}
		switch {
		case errors.Is(rerr, io.ErrUnexpectedEOF):
			return written, io.EOF
		case rerr != nil:
			return written, rerr
		}
	}
	return written, nil
}

// ioErrWriter marks write errors as the cache's own.
type ioErrWriter struct{ w io.Writer }

func (w *ioErrWriter) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	if err != nil {
		err = fmt.Errorf("%w: write temporary block file: %w", ErrIO, err)
	}
	return n, err
}

// backendFailure reports whether err from the blob store counts as a
// backend error: not a missing object, an invalid key or a caller that
// gave up.
func backendFailure(ctx context.Context, err error) bool {
	switch {
	case err == nil, errors.Is(err, blob.ErrNotFound), errors.Is(err, blob.ErrInvalidKey), errors.Is(err, blob.ErrInvalidRange), errors.Is(err, blob.ErrVersionChanged):
		return false
	case ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		return false
	}
	return true
}
