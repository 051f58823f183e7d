package cache

// This file is the object size lookup: a memo of sizes (and versions)
// with a TTL in front of the blob store, with one lookup per object in
// flight (see doc.go).

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/talonhq/talon/internal/blob"
	"github.com/talonhq/talon/internal/worker/stats"
)

type sizeEntry struct {
	info    blob.Info
	expires time.Time
}

// sizeMemo is the object size memo. Its lock is a leaf: no other lock is
// taken while mu is held, and lookups run outside it.
type sizeMemo struct {
	ttl  time.Duration // how long an answer is used; not positive: never cached
	now  func() time.Time
	life *life
	// lookup asks the blob store for an object's info (Cache.lookupSize);
	// it runs in the singleflight group's goroutine.
	lookup func(object string) (blob.Info, error)
	calls  singleflight.Group // lookups in flight, by object

	mu sync.Mutex // guards m
	m  map[string]sizeEntry
}

func newSizeMemo(ttl time.Duration, now func() time.Time, lf *life, lookup func(string) (blob.Info, error)) *sizeMemo {
	return &sizeMemo{ttl: ttl, now: now, life: lf, lookup: lookup, m: make(map[string]sizeEntry)}
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
	return c.sizes.stat(ctx, object, false)
}

// CachedStat returns object's answer from the size cache, when it holds
// one younger than SizeTTL: Stat would then not ask the blob store.
func (c *Cache) CachedStat(object string) (blob.Info, bool) {
	if c.life.isClosed() {
		return blob.Info{}, false
	}
	return c.sizes.get(object, true)
}

// Revalidate is Stat that asks the blob store even when the size cache
// holds an answer (a reader that must see the current version).
func (c *Cache) Revalidate(ctx context.Context, object string) (blob.Info, error) {
	return c.sizes.stat(ctx, object, true)
}

// get returns the memo's answer for object; a live one only, when live is
// set, else also one past its TTL.
func (m *sizeMemo) get(object string, live bool) (blob.Info, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	se, ok := m.m[object]
	if !ok || (live && !m.now().Before(se.expires)) {
		return blob.Info{}, false
	}
	return se.info, true
}

func (m *sizeMemo) stat(ctx context.Context, object string, fresh bool) (blob.Info, error) {
	if err := blob.ValidateKey(object); err != nil {
		return blob.Info{}, err
	}
	if m.life.isClosed() {
		return blob.Info{}, ErrClosed
	}
	if !fresh {
		if info, ok := m.get(object, true); ok {
			return info, nil
		}
	}
	key := object
	if fresh {
		key = "\x00fresh/" + object // never joins, or is joined by, a call that may answer from the cache
	}
	ch := m.calls.DoChan(key, func() (any, error) {
		if !fresh {
			// A call that ended between this caller's cache check and
			// its DoChan has cached the answer: use it, do not ask again.
			if info, ok := m.get(object, true); ok {
				return info, nil
			}
		}
		return m.lookup(object)
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			if errors.Is(r.Err, blob.ErrBackend) {
				// The store is failing: the last answer it gave (even
				// past its TTL, or asked to be revalidated) keeps blocks
				// already cached readable; a reader that pinned another
				// version still gets version_changed, never these bytes.
				if info, ok := m.get(object, false); ok {
					return info, nil
				}
			}
			return blob.Info{}, r.Err
		}
		return r.Val.(blob.Info), nil
	case <-ctx.Done():
		return blob.Info{}, ctx.Err()
	}
}

// put remembers object's info for the TTL.
func (m *sizeMemo) put(object string, info blob.Info) {
	if m.ttl <= 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	if len(m.m) >= maxSizeEntries {
		m.trimLocked(now)
	}
	m.m[object] = sizeEntry{info: info, expires: now.Add(m.ttl)}
}

// trimLocked makes room in the memo: expired entries first, then
// arbitrary ones.
func (m *sizeMemo) trimLocked(now time.Time) {
	for k, se := range m.m {
		if !now.Before(se.expires) {
			delete(m.m, k)
		}
	}
	for k := range m.m {
		if len(m.m) < maxSizeEntries {
			break
		}
		delete(m.m, k)
	}
}

func (m *sizeMemo) forget(object string) {
	m.mu.Lock()
	delete(m.m, object)
	m.mu.Unlock()
}

// lookupSize asks the blob store for the size of object and caches the
// answer. It runs once per object at a time, in the singleflight group's
// goroutine; Close waits for it (life.enter).
func (c *Cache) lookupSize(object string) (blob.Info, error) {
	if !c.life.enter() {
		return blob.Info{}, ErrClosed
	}
	defer c.life.exit()
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
	c.sizes.put(object, info)
	return info, nil
}
