package cache

import "github.com/talonhq/talon/internal/blob"

// DefaultMaxPrefetches is the default Config.MaxPrefetches: read-ahead
// loads in flight at once, per worker.
const DefaultMaxPrefetches = 8

// Cold reports whether a read of block index of the object at info's
// version would load it from the store: it is neither resident at that
// version nor loading. It counts nothing.
func (c *Cache) Cold(object string, info blob.Info, index int64) bool {
	return c.loads.cold(blockID{object, index}, info)
}

// PrefetchSlots returns how many more Prefetch loads may start now:
// Config.MaxPrefetches less those in flight (0 when Prefetch is off).
func (c *Cache) PrefetchSlots() int { return c.loads.slots() }

// Prefetch starts loading block index of the object at info's version in
// the background (read-ahead), unless it is resident or loading already,
// the cache is closed, Config.MaxPrefetches such loads are in flight, or
// charge refuses. charge (nil: none) is called, under the mutex of the loads,
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
	return c.loads.prefetch(blockID{object, index}, info, charge)
}
