package kube

import (
	"sync"

	coordv1 "k8s.io/api/coordination/v1"

	"github.com/talonhq/talon/internal/cluster"
)

// maxCached bounds the write cache; evicting an entry costs one GET.
const maxCached = 1 << 16

// leaseCache maps Lease names to the Lease as this store last wrote it,
// with the record it wrote there, so a heartbeat decides on it without
// decoding the annotation again. An entry is only ever a guess: a write
// has the entry's resourceVersion as precondition and drops the entry when
// that fails, so a stale entry costs one failed request, never a wrong
// write.
//
// A leaseCache is safe for concurrent use; the Leases and records in it
// are never modified (buildLease copies, readers clone).
type leaseCache struct {
	mu sync.Mutex
	m  map[string]cacheEntry // guarded by mu
}

// cacheEntry is one Lease this store wrote, the record it holds (as
// decodeLease reads it: at the sequence of its last renewal) and the
// sequence of its status annotation.
type cacheEntry struct {
	lease     *coordv1.Lease
	rec       *cluster.Record
	statusSeq uint64
}

func newLeaseCache() *leaseCache {
	return &leaseCache{m: make(map[string]cacheEntry)}
}

func (c *leaseCache) get(name string) (cacheEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[name]
	return e, ok
}

func (c *leaseCache) put(name string, e cacheEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[name]; !ok && len(c.m) >= maxCached {
		for k := range c.m { // evict an arbitrary entry
			delete(c.m, k)
			break
		}
	}
	c.m[name] = e
}

func (c *leaseCache) drop(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, name)
}

// len returns the number of entries.
func (c *leaseCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
