package state

import (
	"context"
	"fmt"
	"sync"
)

// FanEvent is one watch event a fan-out hands to its watchers, with the
// revision it happened at.
type FanEvent struct {
	Rev   uint64
	Event Event
}

// FanOut serves Store.Watch from changes a backend publishes: a ring of
// recent events, of every cluster, replays what a new watcher's revision
// is behind by, and every open watcher gets the events published after it
// subscribed, in order and without gaps or duplicates.
//
// It holds the one rule for a slow watcher on every backend: a watcher
// that falls a ring's worth of events behind ends with ErrUnavailable
// (it reads again), so a publisher never waits for a watcher. A watch
// from a revision older than the ring ends with ErrCompacted. The
// reflector (etcd, Kubernetes) and the memory store run it.
//
// Concurrency: mu guards the fields below it; a subscriber's own lock is
// taken after mu, never before. A caller may hold its own lock while it
// calls FanOut (the reflector's, the memory store's), never the other
// way round.
type FanOut struct {
	name string
	size int
	// lifetime is the owning store's: watchers end when it ends.
	lifetime context.Context
	// goFn runs a watcher's goroutine, one the store's Close waits for,
	// or returns false once the store is closed.
	goFn func(func()) bool

	mu   sync.Mutex
	ring eventRing
	subs map[*subscriber]struct{}
}

// maxReplayBatch bounds the events of one replayed batch, so a watcher
// replaying a long ring gets it in pieces.
const maxReplayBatch = 512

// NewFanOut returns a fan-out whose ring starts empty at revision floor.
// name names it in errors ("memory store", "snapshot cache"); size <= 0
// means DefaultRingSize.
func NewFanOut(lifetime context.Context, name string, size int, floor uint64, goFn func(func()) bool) *FanOut {
	if size <= 0 {
		size = DefaultRingSize
	}
	f := &FanOut{name: name, size: size, lifetime: lifetime, goFn: goFn,
		ring: newEventRing(size), subs: map[*subscriber]struct{}{}}
	f.ring.reset(floor)
	return f
}

// Reset empties the ring after a listing at rev: watchers from before
// rev must read again.
func (f *FanOut) Reset(rev uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ring.reset(rev)
}

// Compact drops the ring's events up to and including rev, so a watch
// from an older revision ends with ErrCompacted. Open watchers keep what
// is queued for them.
func (f *FanOut) Compact(rev uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ring.compact(rev)
}

// Floor returns the revision after which the ring holds every event.
func (f *FanOut) Floor() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ring.floor
}

// Publish hands events, in revision order, to the ring and to every
// watcher; it never waits for one.
func (f *FanOut) Publish(events []FanEvent) {
	if len(events) == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ring.push(events)
	for s := range f.subs {
		s.offer(events)
	}
}

// End ends every open watcher with err, after what is queued for it.
func (f *FanOut) End(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for s := range f.subs {
		s.end(err)
		delete(f.subs, s)
	}
}

// Subscribers returns how many watches the fan-out serves.
func (f *FanOut) Subscribers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.subs)
}

// Subscribe serves one Store.Watch: the cluster's events after revision
// after, the ring's first, then those published from now on. It returns
// an error wrapping ErrCompacted when after is older than the ring, and
// ErrClosed when the store is closed; the channel closes after a batch
// with Err set (End, a slow watcher), when ctx ends (no error batch) or
// when the lifetime ends (ErrClosed, if the watcher is reading).
func (f *FanOut) Subscribe(ctx context.Context, clusterID string, after uint64) (<-chan WatchBatch, error) {
	s := &subscriber{clusterID: clusterID, after: after, limit: f.size, wake: make(chan struct{}, 1)}
	f.mu.Lock()
	if after < f.ring.floor {
		floor := f.ring.floor
		f.mu.Unlock()
		return nil, fmt.Errorf("%w: watch of cluster %s from revision %d: the %s keeps changes after revision %d", ErrCompacted, clusterID, after, f.name, floor)
	}
	if replay := f.ring.since(clusterID, after); len(replay) > 0 {
		s.queued = len(replay)
		for len(replay) > 0 {
			n := min(len(replay), maxReplayBatch)
			s.queue = append(s.queue, WatchBatch{Events: replay[:n:n]})
			replay = replay[n:]
		}
		s.signal()
	}
	f.subs[s] = struct{}{}
	f.mu.Unlock()
	out := make(chan WatchBatch, 1)
	if !f.goFn(func() { f.deliver(ctx, s, out) }) {
		f.unsubscribe(s)
		return nil, fmt.Errorf("watch of cluster %s: %w", clusterID, ErrClosed)
	}
	return out, nil
}

// deliver hands s's batches to out until its terminal batch, ctx ends or
// the lifetime does.
func (f *FanOut) deliver(ctx context.Context, s *subscriber, out chan<- WatchBatch) {
	defer close(out)
	defer f.unsubscribe(s)
	for {
		b, last, ok := s.take()
		if !ok {
			select {
			case <-s.wake:
				continue
			case <-ctx.Done():
				return
			case <-f.lifetime.Done():
				f.closed(out)
				return
			}
		}
		select {
		case out <- b:
		case <-ctx.Done():
			return
		case <-f.lifetime.Done():
			f.closed(out)
			return
		}
		if last {
			return
		}
	}
}

// closed tells a watcher still reading that the store closed; Close must
// not wait for one that stopped reading.
func (f *FanOut) closed(out chan<- WatchBatch) {
	select {
	case out <- WatchBatch{Err: fmt.Errorf("%s: %w", f.name, ErrClosed)}:
	default:
	}
}

func (f *FanOut) unsubscribe(s *subscriber) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.subs, s)
}
