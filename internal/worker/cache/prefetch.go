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

// Prefetch starts loading block index of the object at info's version in
// the background (read-ahead), unless it is resident or loading already,
// the cache is closed, or Config.MaxPrefetches such loads are in flight.
// It reports whether it started a load. A prefetch counts neither a hit
// nor a miss; a reader that comes while it runs joins it as any miss
// joins a load.
func (c *Cache) Prefetch(object string, info blob.Info, index int64) bool {
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
	l := c.newLoadLocked(id, info)
	l.prefetch = true
	c.prefetches++
	c.cfg.Stats.Prefetch()
	return true
}
