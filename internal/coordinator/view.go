package coordinator

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/placement"
	"github.com/talonhq/talon/internal/state"
)

// View is one consistent picture of the cluster: a store snapshot and the
// placement computed from it.
type View struct {
	Snapshot *state.Snapshot
	// Table is the placement over the eligible workers; its Version is the
	// PlacementVersion.
	Table *placement.Table
	// Excluded lists the workers left out of placement and why.
	Excluded []placement.Exclusion
	// ObservedAt is the local time the snapshot read completed.
	ObservedAt time.Time
	// Survey is the cluster's feature level and build versions, from the
	// snapshot's records (upgrade.go).
	Survey cluster.Survey

	indexOnce sync.Once
	index     map[cluster.Key]*cluster.Record
}

// record returns the snapshot's record in slot key, or nil. The index is
// built on first use and shared by every caller of this view.
func (v *View) record(key cluster.Key) *cluster.Record {
	v.indexOnce.Do(func() {
		v.index = make(map[cluster.Key]*cluster.Record, len(v.Snapshot.Records))
		for _, r := range v.Snapshot.Records {
			v.index[r.Key()] = r
		}
	})
	return v.index[key]
}

// Version returns the view's PlacementVersion.
func (v *View) Version() placement.Version { return v.Table.Version() }

// batcher coalesces concurrent snapshot reads. A caller joins the read
// that will start next, never one already in flight, so every successful
// view a caller gets comes from a read that began after it asked. Up to
// maxInflight reads run at once (pipelined): on a store with a round trip
// of its own (etcd's revision probe), the next batch need not wait for the
// previous one to come back, so throughput is not capped at one batch per
// round trip. Each read carries a sequence number in start order; the
// coordinator applies a read's outcome only when no later-started read was
// applied first (see Coordinator.applyRead), so the view never moves back.
// When a read fails, the callers queued behind it get its error at once.
type batcher struct {
	fetch func(ctx context.Context, seq uint64) (*View, error)
	// base bounds every read: it ends when the coordinator stops.
	base    context.Context
	timeout time.Duration
	wg      *sync.WaitGroup // the coordinator's background goroutines
	// maxInflight bounds concurrent reads; 0 means defaultMaxInflight.
	maxInflight int

	mu       sync.Mutex // guards the fields below
	inflight int        // reads running
	next     *call      // the read callers join; not started yet
	seq      uint64     // sequence number of the last read started
}

// defaultMaxInflight bounds the snapshot reads one coordinator runs at once.
// Two: on etcd, fewer reads in flight means more lookups share each
// revision probe (a second overlaps the first's round trip, a third and
// fourth only added probes: 14–15k lookups/s at 1 or 2, 12–13k at 4, 32
// callers on the 2-core development VM); on the memory store a second lets
// one batch's snapshot copy overlap the next batch's arrival.
const defaultMaxInflight = 2

type call struct {
	done chan struct{}
	view *View
	err  error
}

// get returns a view read after the call began, or ctx's error.
func (b *batcher) get(ctx context.Context) (*View, error) {
	b.mu.Lock()
	if err := b.base.Err(); err != nil {
		// The coordinator has stopped: start nothing it would not wait for.
		b.mu.Unlock()
		return nil, fmt.Errorf("coordinator stopped: %w", err)
	}
	if b.next == nil {
		b.next = &call{done: make(chan struct{})}
	}
	c := b.next
	limit := b.maxInflight
	if limit <= 0 {
		limit = defaultMaxInflight
	}
	if b.inflight < limit {
		b.startNextLocked()
	}
	b.mu.Unlock()
	select {
	case <-c.done:
		return c.view, c.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// started returns the number of reads started so far.
func (b *batcher) started() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.seq
}

// startNextLocked starts the read callers have joined. Called with mu held.
func (b *batcher) startNextLocked() {
	c := b.next
	b.next = nil
	b.inflight++
	b.seq++
	seq := b.seq
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		ctx, cancel := context.WithTimeout(b.base, b.timeout)
		c.view, c.err = b.fetch(ctx, seq)
		cancel()
		b.mu.Lock()
		b.inflight--
		if next := b.next; next != nil {
			if c.err != nil {
				// A failed read fails its queued successors too: an error is
				// always a safe answer (fail closed), and it keeps a caller's
				// wait within one request timeout while the store is down.
				// Only a successful view must come from a read that began
				// after the caller asked.
				b.next = nil
				next.err = c.err
				close(next.done)
			} else {
				b.startNextLocked()
			}
		}
		b.mu.Unlock()
		close(c.done)
	}()
}
