package kube

import (
	"sync"

	coordv1 "k8s.io/api/coordination/v1"
)

// leaseCache maps Lease names to the Lease as this store last wrote it.
// An entry is only ever a guess: UpsertNode writes with the entry's
// resourceVersion as precondition and drops the entry when that fails, so
// a stale entry costs one failed request, never a wrong write. Entries
// whose lease has run out are pruned, which bounds the cache by the number
// of live Leases this store keeps writing.
//
// A leaseCache is safe for concurrent use; the Leases in it are never
// modified (buildLease copies).
type leaseCache struct {
	mu sync.Mutex
	m  map[string]*coordv1.Lease // guarded by mu
}

func newLeaseCache() *leaseCache {
	return &leaseCache{m: make(map[string]*coordv1.Lease)}
}

func (c *leaseCache) get(name string) (*coordv1.Lease, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.m[name]
	return l, ok
}

func (c *leaseCache) put(name string, l *coordv1.Lease) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[name] = l
}

func (c *leaseCache) drop(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, name)
}

// prune drops the entries expired reports as run out.
func (c *leaseCache) prune(expired func(*coordv1.Lease) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, l := range c.m {
		if expired(l) {
			delete(c.m, name)
		}
	}
}

// len returns the number of entries.
func (c *leaseCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
