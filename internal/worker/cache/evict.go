package cache

// This file is the index and its byte accounting: reservations for loads,
// eviction through the S3-FIFO policy (s3fifo.go), and adding and removing
// entries. The ...Locked functions run with Cache.mu held; reserve,
// release and dropIf take it themselves.

import (
	"context"
	"fmt"
)

// reserve waits until need bytes fit under the capacity, evicting as
// needed, and reserves them.
func (c *Cache) reserve(ctx context.Context, need int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		if c.closed {
			return ErrClosed
		}
		for c.resident+c.reserved+need > c.cfg.Capacity {
			e := c.pol.victim()
			if e == nil {
				break
			}
			c.removeLocked(e, true, true)
		}
		if c.resident+c.reserved+need <= c.cfg.Capacity {
			c.reserved += need
			return nil
		}
		if c.reserved == 0 {
			return fmt.Errorf("%w: a block file of %d bytes exceeds the capacity of %d", ErrIO, need, c.cfg.Capacity)
		}
		ch := c.spaceFreed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			c.mu.Lock()
			return ctx.Err()
		}
		c.mu.Lock()
	}
}

func (c *Cache) release(need int64) {
	c.mu.Lock()
	c.reserved -= need
	c.signalLocked()
	c.mu.Unlock()
}

// signalLocked wakes loads waiting for space.
func (c *Cache) signalLocked() {
	close(c.spaceFreed)
	c.spaceFreed = make(chan struct{})
}

func (c *Cache) addLocked(e *entry) {
	c.entries[e.id] = e
	c.pol.insert(e)
	c.resident += e.fileSize
	c.cfg.Stats.BlockAdded(e.fileSize)
	c.signalLocked() // a new entry is evictable
}

// removeLocked drops e from the index and the accounting, and deletes its
// file when unlink is set.
func (c *Cache) removeLocked(e *entry, evicted, unlink bool) {
	c.pol.drop(e)
	delete(c.entries, e.id)
	c.resident -= e.fileSize
	c.cfg.Stats.BlockRemoved(e.fileSize, evicted)
	if unlink {
		c.unlink(e.path)
	}
	c.signalLocked()
}

// dropIf removes e if it is still the resident entry for its ID, and
// reports whether it was.
func (c *Cache) dropIf(e *entry, unlink bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries[e.id] != e {
		return false
	}
	c.removeLocked(e, false, unlink)
	return true
}
