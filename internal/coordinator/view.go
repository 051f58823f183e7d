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
	// stableUntilUnixMs is the store time at which a record of Snapshot
	// next turns unhealthy or expires by age alone.
	stableUntilUnixMs int64

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
// view a caller gets comes from a read that began after it asked. When a
// read fails, the callers queued behind it get its error at once.
type batcher struct {
	fetch func(ctx context.Context) (*View, error)
	// base bounds every read: it ends when the coordinator stops.
	base    context.Context
	timeout time.Duration
	wg      *sync.WaitGroup // the coordinator's background goroutines

	mu       sync.Mutex // guards the fields below
	inflight *call
	next     *call
}

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
	var c *call
	if b.inflight == nil {
		c = &call{done: make(chan struct{})}
		b.inflight = c
		b.start(c)
	} else {
		if b.next == nil {
			b.next = &call{done: make(chan struct{})}
		}
		c = b.next
	}
	b.mu.Unlock()
	select {
	case <-c.done:
		return c.view, c.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// start runs c's read in the background. Called with mu held.
func (b *batcher) start(c *call) {
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		ctx, cancel := context.WithTimeout(b.base, b.timeout)
		c.view, c.err = b.fetch(ctx)
		cancel()
		b.mu.Lock()
		next := b.next
		b.inflight, b.next = nil, nil
		if next != nil {
			if c.err != nil {
				// A failed read fails its queued successors too: an error is
				// always a safe answer (fail closed), and it keeps a caller's
				// wait within one request timeout while the store is down.
				// Only a successful view must come from a read that began
				// after the caller asked.
				next.err = c.err
				close(next.done)
			} else {
				b.inflight = next
				b.start(next)
			}
		}
		b.mu.Unlock()
		close(c.done)
	}()
}
