package worker

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/datav1"
)

// Ownership answers the data server's ownership checks from the placement
// the coordinators compute: a PlacementLookup for the block's key through
// the placement client, whose cache drops every entry as soon as a
// different PlacementVersion is seen (pushed to the worker by its
// subscription, see Options.Client and Client.Watch). A check costs a
// network round trip only on the first request for a block in a
// membership, or after the cache TTL.
//
// When no coordinator can answer, the block is served (owned, version 0):
// the data is still correct (the blob store is the source of truth), only
// perhaps not from its preferred owner, and refusing would turn a
// management-plane outage into a data-path outage.
type Ownership struct {
	client   *client.Client
	self     string
	replicas int // the cluster's placement-replicas
	timeout  time.Duration
	// openUntil is when a recent lookup failure stops short-circuiting
	// checks (Unix nanoseconds): while coordinators are unreachable, every
	// check fails open at once instead of each waiting for a timeout.
	openUntil atomic.Int64
}

// failOpenFor is how long one failed lookup makes checks fail open.
const failOpenFor = 5 * time.Second

// NewOwnership returns the ownership checker of worker nodeID: a block is
// its own when it is among the first replicas owners (the cluster's
// placement-replicas; never a count a client sends, which would let any
// client make any worker cache any block).
func NewOwnership(c *client.Client, nodeID string, replicas int, timeout time.Duration) *Ownership {
	return &Ownership{client: c, self: nodeID, replicas: max(replicas, 1), timeout: timeout}
}

// Owns implements dataserver.Ownership.
func (o *Ownership) Owns(object string, block int64) (bool, uint64) {
	if time.Now().UnixNano() < o.openUntil.Load() {
		return true, 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	p, err := o.client.Lookup(ctx, datav1.BlockKey(object, block), o.replicas)
	if err != nil {
		o.openUntil.Store(time.Now().Add(failOpenFor).UnixNano())
		return true, 0
	}
	for _, owner := range p.Owners {
		if owner.NodeID == o.self {
			return true, uint64(p.Version)
		}
	}
	return false, uint64(p.Version)
}

// OwnsFirst implements dataserver.FirstOwnership: whether this worker is
// the first of the block's owners (readers ask it first). Like Owns it
// fails open while no coordinator answers.
func (o *Ownership) OwnsFirst(object string, block int64) bool {
	if time.Now().UnixNano() < o.openUntil.Load() {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	p, err := o.client.Lookup(ctx, datav1.BlockKey(object, block), o.replicas)
	if err != nil {
		o.openUntil.Store(time.Now().Add(failOpenFor).UnixNano())
		return true
	}
	return len(p.Owners) > 0 && p.Owners[0].NodeID == o.self
}
