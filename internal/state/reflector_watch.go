package state

import (
	"context"
	"fmt"
	"sync"
)

// eventRing keeps the newest events a fan-out published, of every cluster,
// and floor: every event after revision floor is in the ring. A
// subscriber whose revision is at least floor is replayed from it; one
// below floor ends with ErrCompacted.
type eventRing struct {
	buf   []FanEvent
	start int // index of the oldest event
	n     int
	floor uint64
}

func newEventRing(size int) eventRing { return eventRing{buf: make([]FanEvent, size)} }

// reset empties the ring after a listing at rev.
func (g *eventRing) reset(rev uint64) {
	clear(g.buf)
	g.start, g.n, g.floor = 0, 0, rev
}

// push appends events, dropping the oldest when full.
func (g *eventRing) push(events []FanEvent) {
	for _, e := range events {
		if g.n == len(g.buf) {
			g.floor = max(g.floor, g.buf[g.start].Rev)
			g.buf[g.start] = FanEvent{}
			g.start = (g.start + 1) % len(g.buf)
			g.n--
		}
		g.buf[(g.start+g.n)%len(g.buf)] = e
		g.n++
	}
}

// compact drops the events up to and including rev.
func (g *eventRing) compact(rev uint64) {
	for g.n > 0 && g.buf[g.start].Rev <= rev {
		g.buf[g.start] = FanEvent{}
		g.start = (g.start + 1) % len(g.buf)
		g.n--
	}
	g.floor = max(g.floor, rev)
}

// since returns the cluster's events after revision after, oldest first.
func (g *eventRing) since(clusterID string, after uint64) []Event {
	var out []Event
	for i := range g.n {
		e := &g.buf[(g.start+i)%len(g.buf)]
		if e.Rev > after && e.Event.Key.ClusterID == clusterID {
			out = append(out, e.Event)
		}
	}
	return out
}

// subscriber is one Store.Watch served from a fan-out. The fan-out
// queues its batches under its own lock; the subscriber's goroutine hands
// them to the caller's channel.
type subscriber struct {
	clusterID string
	after     uint64 // events at or below it were already seen
	limit     int    // most events queued before the subscriber ends

	mu     sync.Mutex // guards the fields below; taken after the fan-out's mu
	queue  []WatchBatch
	queued int   // events in queue
	err    error // terminal: sent after the queue, then the channel closes
	wake   chan struct{}
}

// offer queues the events after the subscriber's revision, or ends it
// with ErrUnavailable when it is too far behind.
func (s *subscriber) offer(events []FanEvent) {
	var batch []Event
	for i := range events {
		if e := &events[i]; e.Rev > s.after && e.Event.Key.ClusterID == s.clusterID {
			batch = append(batch, e.Event)
		}
	}
	if len(batch) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return
	}
	if s.queued+len(batch) > s.limit {
		s.queue, s.queued = nil, 0
		s.err = fmt.Errorf("%w: watch of cluster %s fell more than %d events behind; read again", ErrUnavailable, s.clusterID, s.limit)
	} else {
		s.queue = append(s.queue, WatchBatch{Events: batch})
		s.queued += len(batch)
	}
	s.signal()
}

// end ends the subscriber with err after what is queued.
func (s *subscriber) end(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
	s.signal()
}

func (s *subscriber) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// take returns the next batch to send; last is set when it is the
// terminal error batch. ok is false when nothing is queued.
func (s *subscriber) take() (b WatchBatch, last, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) > 0 {
		b = s.queue[0]
		s.queue[0] = WatchBatch{}
		s.queue = s.queue[1:]
		s.queued -= len(b.Events)
		return b, false, true
	}
	if s.err != nil {
		return WatchBatch{Err: s.err}, true, true
	}
	return WatchBatch{}, false, false
}

// Subscribe serves Store.Watch from the reflector's fan-out: the
// cluster's changes after revision after, in order and without gaps or
// duplicates. Events the reflector has applied already are replayed from
// the fan-out's ring; a revision older than the ring ends the watch with
// ErrCompacted (the caller reads again). The channel ends with
// ErrUnavailable when the reflector is not ready (after waiting for a
// listing in flight) or the caller falls a ring's worth behind (FanOut),
// with the cause when the reflector loses its watch, and without an
// error batch when ctx ends. ok is false when the reflector is off for
// good, or when the store still has a revision the ring no longer covers
// (a snapshot read before the reflector's latest listing): the backend
// then watches the store itself.
func (r *Reflector[E]) Subscribe(ctx context.Context, clusterID string, after uint64) (ch <-chan WatchBatch, ok bool) {
	fail := func(err error) (<-chan WatchBatch, bool) {
		out := make(chan WatchBatch, 1)
		out <- WatchBatch{Err: err}
		close(out)
		return out, true
	}
	if !r.AwaitReady(ctx) {
		if r.isOff() {
			return nil, false
		}
		if ctx.Err() != nil {
			out := make(chan WatchBatch)
			close(out)
			return out, true
		}
		return fail(r.notReady(clusterID))
	}
	if err := r.available(ctx, after); err != nil {
		return fail(fmt.Errorf("watch of cluster %s from revision %d: %w", clusterID, after, err))
	}
	// mu is held across the fan-out's subscription, so that no listing
	// or lost watch comes between the readiness seen and the ring read.
	r.mu.RLock()
	defer r.mu.RUnlock()
	switch {
	case r.off:
		return nil, false
	case !r.ready:
		return fail(r.notReadyLocked(clusterID))
	case after < r.fan.Floor() && r.src.Available != nil:
		// The store still has the revision (available said so), the
		// ring does not (the caller's snapshot predates the listing):
		// the backend watches the store itself.
		return nil, false
	}
	out, err := r.fan.Subscribe(ctx, clusterID, after)
	if err != nil {
		return fail(err)
	}
	return out, true
}

func (r *Reflector[E]) isOff() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.off
}

// notReady is why a subscriber cannot be served now: what ended the last
// watch or listing, or ErrUnavailable.
func (r *Reflector[E]) notReady(clusterID string) error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.notReadyLocked(clusterID)
}

func (r *Reflector[E]) notReadyLocked(clusterID string) error {
	if r.lastErr != nil {
		return fmt.Errorf("watch of cluster %s: the %s is resynchronising: %w", clusterID, r.src.Name, r.lastErr)
	}
	return fmt.Errorf("%w: watch of cluster %s: the %s is resynchronising", ErrUnavailable, clusterID, r.src.Name)
}

// available asks the source whether the store still has the changes
// after revision after, when the ring would replay some.
func (r *Reflector[E]) available(ctx context.Context, after uint64) error {
	if r.src.Available == nil {
		return nil
	}
	if rev, _ := r.Revision(); after >= rev {
		return nil
	}
	return r.src.Available(ctx, after)
}

// Subscribers returns how many watches the reflector serves.
func (r *Reflector[E]) Subscribers() int { return r.fan.Subscribers() }
