package cache

import "github.com/talonhq/talon/internal/blob"

// DefaultMaxPrefetches is the default Config.MaxPrefetches: read-ahead
// loads in flight at once, per worker.
const DefaultMaxPrefetches = 8

// Cold reports whether a read of block index of the object at info's
// version would load it from the store: it is neither resident at that
// version nor loading. It counts nothing.
func (c *Cache) Cold(object string, info blob.Info, index int64) bool {
	id := blockID{object, index}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.loads[id] != nil {
		return false
	}
	e := c.entries[id]
	return e == nil || e.objSize != info.Size || e.version != info.Version
}

// PrefetchSlots returns how many more Prefetch loads may start now:
// Config.MaxPrefetches less those in flight (0 when Prefetch is off).
func (c *Cache) PrefetchSlots() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0
	}
	return max(0, c.cfg.MaxPrefetches-c.prefetches)
}

// Prefetch starts loading block index of the object at info's version in
// the background (read-ahead), unless it is resident or loading already,
// the cache is closed, Config.MaxPrefetches such loads are in flight, or
// charge refuses. charge (nil: none) is called, under the cache's mutex,
// only when the load would start, so that what it charges (the warm-up
// budget) is spent on loads that start and on no other; it must be quick
// and must not call the cache. Prefetch reports whether it started a
// load, which is then counted in Stats.Prefetches. A prefetch counts
// neither a hit nor a miss; a reader that comes while it runs joins it
// as any miss joins a load.
func (c *Cache) Prefetch(object string, info blob.Info, index int64, charge func() bool) bool {
	if blockLen(c.cfg.BlockSize, info.Size, index) == 0 || c.cfg.MaxPrefetches <= 0 {
		return false
	}
	id := blockID{object, index}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.prefetches >= c.cfg.MaxPrefetches || c.loads[id] != nil {
		return false
	}
	if e := c.entries[id]; e != nil && e.objSize == info.Size && e.version == info.Version {
		return false
	}
	if charge != nil && !charge() {
		return false
	}
	l := c.newLoadLocked(id, info)
	l.prefetch = true
	c.prefetches++
	c.cfg.Stats.Prefetch()
	return true
}
