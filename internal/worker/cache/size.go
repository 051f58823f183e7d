package cache

// This file is the object size lookup: a TTL cache of sizes in front of
// the blob store, with one lookup per object in flight (see doc.go).

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/talonhq/talon/internal/blob"
	"github.com/talonhq/talon/internal/worker/stats"
)

type sizeEntry struct {
	info    blob.Info
	expires time.Time
}

// Size returns the size of object (Stat's).
func (c *Cache) Size(ctx context.Context, object string) (int64, error) {
	info, err := c.Stat(ctx, object)
	return info.Size, err
}

// Stat returns the size, version and checksum of object, from the size
// cache when a lookup younger than SizeTTL answered. Concurrent lookups of
// one object share one call to the blob store (singleflight), which is
// bounded by LoadTimeout and Close, not by ctx: a caller whose ctx ends
// stops waiting.
func (c *Cache) Stat(ctx context.Context, object string) (blob.Info, error) {
	return c.stat(ctx, object, false)
}

// CachedStat returns object's answer from the size cache, when it holds
// one younger than SizeTTL: Stat would then not ask the blob store.
func (c *Cache) CachedStat(object string) (blob.Info, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	se, ok := c.sizes[object]
	if !ok || c.closed || !c.now().Before(se.expires) {
		return blob.Info{}, false
	}
	return se.info, true
}

// Revalidate is Stat that asks the blob store even when the size cache
// holds an answer (a reader that must see the current version).
func (c *Cache) Revalidate(ctx context.Context, object string) (blob.Info, error) {
	return c.stat(ctx, object, true)
}

func (c *Cache) stat(ctx context.Context, object string, fresh bool) (blob.Info, error) {
	if err := blob.ValidateKey(object); err != nil {
		return blob.Info{}, err
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return blob.Info{}, ErrClosed
	}
	if se, ok := c.sizes[object]; ok && !fresh && c.now().Before(se.expires) {
		c.mu.Unlock()
		return se.info, nil
	}
	c.mu.Unlock()
	key := object
	if fresh {
		key = "\x00fresh/" + object // never joins, or is joined by, a call that may answer from the cache
	}
	ch := c.sizeCalls.DoChan(key, func() (any, error) {
		if !fresh {
			// A call that ended between this caller's cache check and
			// its DoChan has cached the answer: use it, do not ask again.
			c.mu.Lock()
			se, ok := c.sizes[object]
			c.mu.Unlock()
			if ok && c.now().Before(se.expires) {
				return se.info, nil
			}
		}
		return c.lookupSize(object)
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			if errors.Is(r.Err, blob.ErrBackend) {
				// The store is failing: the last answer it gave (even
				// past its TTL, or asked to be revalidated) keeps blocks
				// already cached readable; a reader that pinned another
				// version still gets version_changed, never these bytes.
				c.mu.Lock()
				se, ok := c.sizes[object]
				c.mu.Unlock()
				if ok {
					return se.info, nil
				}
			}
			return blob.Info{}, r.Err
		}
		return r.Val.(blob.Info), nil
	case <-ctx.Done():
		return blob.Info{}, ctx.Err()
	}
}

// lookupSize asks the blob store for the size of object and caches the
// answer. It runs once per object at a time, in the singleflight group's
// goroutine; Close waits for it (the wg.Add is made under mu while the
// cache is open, so it happens before Close's Wait).
func (c *Cache) lookupSize(object string) (blob.Info, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return blob.Info{}, ErrClosed
	}
	c.wg.Add(1)
	c.mu.Unlock()
	defer c.wg.Done()
	ctx, cancel := context.WithTimeout(c.loadCtx, c.cfg.LoadTimeout)
	defer cancel()
	start := time.Now()
	info, err := blob.Stat(ctx, c.cfg.Source, object)
	c.cfg.Stats.BackendFetch(stats.BackendSize, time.Since(start), backendFailure(c.loadCtx, err))
	switch {
	case err != nil && c.loadCtx.Err() != nil:
		return blob.Info{}, fmt.Errorf("%w: %w", ErrClosed, err)
	case err != nil && ctx.Err() != nil:
		return blob.Info{}, fmt.Errorf("%w: size of object %q timed out after %v: %w", blob.ErrBackend, object, c.cfg.LoadTimeout, err)
	case err != nil:
		return blob.Info{}, err
	}
	c.mu.Lock()
	if c.cfg.SizeTTL > 0 {
		now := c.now()
		if len(c.sizes) >= maxSizeEntries {
			c.trimSizesLocked(now)
		}
		c.sizes[object] = sizeEntry{info: info, expires: now.Add(c.cfg.SizeTTL)}
	}
	c.mu.Unlock()
	return info, nil
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
