package cache

// This file is the object size lookup: a TTL cache of sizes in front of
// the blob store, with one lookup per object in flight (see doc.go).

import (
	"context"
	"fmt"
	"time"

	"github.com/talonhq/talon/internal/blob"
	"github.com/talonhq/talon/internal/worker/stats"
)

type sizeEntry struct {
	size    int64
	expires time.Time
}

// sizeCall is an object size lookup in flight; done is closed when size
// and err are set.
type sizeCall struct {
	done chan struct{}
	size int64
	err  error
}

// Size returns the size of object, from the size cache when a lookup
// younger than SizeTTL answered. Concurrent lookups of one object share
// one call to the blob store, which is bounded by LoadTimeout and Close,
// not by ctx: a caller whose ctx ends stops waiting.
func (c *Cache) Size(ctx context.Context, object string) (int64, error) {
	if err := blob.ValidateKey(object); err != nil {
		return 0, err
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return 0, ErrClosed
	}
	if se, ok := c.sizes[object]; ok && c.now().Before(se.expires) {
		c.mu.Unlock()
		return se.size, nil
	}
	call := c.sizeCalls[object]
	if call == nil {
		call = &sizeCall{done: make(chan struct{})}
		c.sizeCalls[object] = call
		c.wg.Add(1)
		go c.lookupSize(object, call)
	}
	c.mu.Unlock()
	select {
	case <-call.done:
		return call.size, call.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func (c *Cache) lookupSize(object string, call *sizeCall) {
	defer c.wg.Done()
	ctx, cancel := context.WithTimeout(c.loadCtx, c.cfg.LoadTimeout)
	defer cancel()
	start := time.Now()
	size, err := c.cfg.Source.Size(ctx, object)
	c.cfg.Stats.BackendFetch(stats.BackendSize, time.Since(start), backendFailure(c.loadCtx, err))
	switch {
	case err != nil && c.loadCtx.Err() != nil:
		err = fmt.Errorf("%w: %w", ErrClosed, err)
	case err != nil && ctx.Err() != nil:
		err = fmt.Errorf("%w: size of object %q timed out after %v: %w", blob.ErrBackend, object, c.cfg.LoadTimeout, err)
	}
	c.mu.Lock()
	delete(c.sizeCalls, object)
	if err == nil && c.cfg.SizeTTL > 0 {
		now := c.now()
		if len(c.sizes) >= maxSizeEntries {
			c.trimSizesLocked(now)
		}
		c.sizes[object] = sizeEntry{size: size, expires: now.Add(c.cfg.SizeTTL)}
	}
	c.mu.Unlock()
	call.size, call.err = size, err
	close(call.done)
}

// trimSizesLocked makes room in the size cache: expired entries first,
// then arbitrary ones.
func (c *Cache) trimSizesLocked(now time.Time) {
	for k, se := range c.sizes {
		if !now.Before(se.expires) {
			delete(c.sizes, k)
		}
	}
	for k := range c.sizes {
		if len(c.sizes) < maxSizeEntries {
			break
		}
		delete(c.sizes, k)
	}
}

func (c *Cache) forgetSize(object string) {
	c.mu.Lock()
	delete(c.sizes, object)
	c.mu.Unlock()
}
