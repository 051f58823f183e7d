package state

import (
	"context"
	"fmt"
	"sync"
)

// ringEvent is one watch event a reflector made, with its revision.
type ringEvent struct {
	rev uint64
	ev  Event
}

// eventRing keeps the newest events a reflector made, of every cluster,
// and floor: every event after revision floor is in the ring. A
// subscriber whose revision is at least floor is replayed from it; one
// below floor ends with ErrCompacted.
type eventRing struct {
	buf   []ringEvent
	start int // index of the oldest event
	n     int
	floor uint64
}

func newEventRing(size int) eventRing { return eventRing{buf: make([]ringEvent, size)} }

// reset empties the ring after a listing at rev.
func (g *eventRing) reset(rev uint64) {
	clear(g.buf)
	g.start, g.n, g.floor = 0, 0, rev
}

// push appends events, dropping the oldest when full.
func (g *eventRing) push(events []ringEvent) {
	for _, e := range events {
		if g.n == len(g.buf) {
			g.floor = max(g.floor, g.buf[g.start].rev)
			g.buf[g.start] = ringEvent{}
			g.start = (g.start + 1) % len(g.buf)
			g.n--
		}
		g.buf[(g.start+g.n)%len(g.buf)] = e
		g.n++
	}
}

// since returns the cluster's events after revision after, oldest first.
func (g *eventRing) since(clusterID string, after uint64) []Event {
	var out []Event
	for i := range g.n {
		e := &g.buf[(g.start+i)%len(g.buf)]
		if e.rev > after && e.ev.Key.ClusterID == clusterID {
			out = append(out, e.ev)
		}
	}
	return out
}

// subscriber is one Store.Watch served from a reflector. The reflector
// queues its batches under its own lock; the subscriber's goroutine hands
// them to the caller's channel.
type subscriber struct {
	clusterID string
	after     uint64 // events at or below it were already seen
	limit     int    // most events queued before the subscriber ends

	mu     sync.Mutex // guards the fields below; taken after the reflector's mu
	queue  []WatchBatch
	queued int   // events in queue
	err    error // terminal: sent after the queue, then the channel closes
	wake   chan struct{}
}

// offer queues the events after the subscriber's revision, or ends it
// with ErrUnavailable when it is too far behind.
func (s *subscriber) offer(events []ringEvent) {
	var batch []Event
	for i := range events {
		if e := &events[i]; e.rev > s.after && e.ev.Key.ClusterID == s.clusterID {
			batch = append(batch, e.ev)
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

// publishLocked offers events to every subscriber; mu must be held.
func (r *Reflector[E]) publishLocked(events []ringEvent) {
	for s := range r.subs {
		s.offer(events)
	}
}

// endSubsLocked ends every subscriber with err; mu must be held for
// writing.
func (r *Reflector[E]) endSubsLocked(err error) {
	for s := range r.subs {
		s.end(err)
		delete(r.subs, s)
	}
}

// Subscribe serves Store.Watch from the reflector: the cluster's changes
// after revision after, in order and without gaps or duplicates. Events
// the reflector has applied already are replayed from its ring; a
// revision older than the ring ends the watch with ErrCompacted (the
// caller reads again). The channel ends with ErrUnavailable when the
// reflector is not ready (after waiting for a listing in flight) or the
// caller falls behind, with the cause when the reflector loses its
// watch, and without an error batch when ctx ends. ok is false when the
// reflector is off for good, or when the store still has a revision the
// ring no longer covers (a snapshot read before the reflector's latest
// listing): the backend then watches the store itself.
func (r *Reflector[E]) Subscribe(ctx context.Context, clusterID string, after uint64) (ch <-chan WatchBatch, ok bool) {
	out := make(chan WatchBatch, 1)
	fail := func(err error) (<-chan WatchBatch, bool) {
		out <- WatchBatch{Err: err}
		close(out)
		return out, true
	}
	if !r.AwaitReady(ctx) {
		if r.isOff() {
			return nil, false
		}
		if ctx.Err() != nil {
			close(out)
			return out, true
		}
		return fail(r.notReady(clusterID))
	}
	if err := r.available(ctx, after); err != nil {
		return fail(fmt.Errorf("watch of cluster %s from revision %d: %w", clusterID, after, err))
	}
	s := &subscriber{clusterID: clusterID, after: after, limit: r.ringSize, wake: make(chan struct{}, 1)}
	r.mu.Lock()
	switch {
	case r.off:
		r.mu.Unlock()
		return nil, false
	case !r.ready:
		r.mu.Unlock()
		return fail(r.notReady(clusterID))
	case after < r.ring.floor && r.src.Available != nil:
		// The store still has the revision (available said so), the
		// ring does not (the caller's snapshot predates the listing):
		// the backend watches the store itself.
		r.mu.Unlock()
		return nil, false
	case after < r.ring.floor:
		floor := r.ring.floor
		r.mu.Unlock()
		return fail(fmt.Errorf("%w: watch of cluster %s from revision %d: the %s keeps changes after revision %d", ErrCompacted, clusterID, after, r.src.Name, floor))
	}
	if replay := r.ring.since(clusterID, after); len(replay) > 0 {
		s.queue, s.queued = []WatchBatch{{Events: replay}}, len(replay)
		s.signal()
	}
	r.subs[s] = struct{}{}
	r.mu.Unlock()
	if !r.src.Go(func() { r.deliver(ctx, s, out) }) {
		r.unsubscribe(s)
		return fail(fmt.Errorf("watch of cluster %s: %w", clusterID, ErrClosed))
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

// deliver hands s's batches to out until its terminal batch, ctx ends or
// the reflector's lifetime does.
func (r *Reflector[E]) deliver(ctx context.Context, s *subscriber, out chan<- WatchBatch) {
	defer close(out)
	defer r.unsubscribe(s)
	for {
		b, last, ok := s.take()
		if !ok {
			select {
			case <-s.wake:
				continue
			case <-ctx.Done():
				return
			case <-r.lifetime.Done():
				r.closed(out)
				return
			}
		}
		select {
		case out <- b:
		case <-ctx.Done():
			return
		case <-r.lifetime.Done():
			r.closed(out)
			return
		}
		if last {
			return
		}
	}
}

// closed tells a subscriber still reading that the store closed; Close
// must not wait for one that stopped reading.
func (r *Reflector[E]) closed(out chan<- WatchBatch) {
	select {
	case out <- WatchBatch{Err: fmt.Errorf("%s: %w", r.src.Name, ErrClosed)}:
	default:
	}
}

func (r *Reflector[E]) unsubscribe(s *subscriber) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.subs, s)
}

// Subscribers returns how many watches the reflector serves.
func (r *Reflector[E]) Subscribers() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.subs)
}
