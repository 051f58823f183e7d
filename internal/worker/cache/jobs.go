package cache

import (
	"context"
	"fmt"

	"github.com/talonhq/talon/internal/blob"
)

// Load makes block index of the object at info's version resident, for an
// operator's warm job: it joins the block's load in flight or starts one,
// and waits for it. loaded is false when the block was resident already;
// n is the block's bytes. It counts neither a hit nor a miss: the reads
// that follow a warm are the hits.
func (c *Cache) Load(ctx context.Context, object string, info blob.Info, index int64) (loaded bool, n int64, err error) {
	n = blockLen(c.cfg.BlockSize, info.Size, index)
	if n == 0 {
		return false, 0, fmt.Errorf("%w: block %d of object %q (%d bytes, block size %d)", ErrOutOfRange, index, object, info.Size, c.cfg.BlockSize)
	}
	id := blockID{object, index}
	c.loads.mu.Lock()
	if c.life.isClosed() {
		c.loads.mu.Unlock()
		return false, 0, ErrClosed
	}
	if c.idx.holds(id, info) {
		c.loads.mu.Unlock()
		return false, n, nil
	}
	l := c.loads.m[id]
	if l == nil {
		if l, err = c.loads.newLocked(id, info); err != nil {
			c.loads.mu.Unlock()
			return false, 0, err
		}
	}
	l.waiters++
	b, err := c.finishMissLocked(ctx, id, info, l)
	if err != nil {
		return false, 0, err
	}
	return true, n, b.Close()
}

// Free evicts every resident block of the objects match accepts, for an
// operator's free job, and returns how many blocks and bytes it freed.
// Loads in flight are left to finish.
func (c *Cache) Free(match func(object string) bool) (blocks, bytes int64) {
	return c.idx.free(match)
}

// Source returns the blob store the cache loads from.
func (c *Cache) Source() blob.Store { return c.cfg.Source }
