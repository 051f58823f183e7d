package coordinator

import (
	"slices"
	"sync"
	"time"

	"github.com/talonhq/talon/internal/state"
)

// Event is one thing this coordinator observed, or, for node events, one
// that any coordinator of the cluster observed and wrote to the store's
// shared event log (state.EventLog; see sharedEvents): node events carry
// a deterministic ID, so the list holds each once, and they survive a
// coordinator's restart. The coordinator's own events (readiness, store
// reachability) stay in its memory.
type Event struct {
	// Seq numbers the events of this coordinator process from 1, without
	// gaps; with the incarnation it orders them.
	Seq uint64
	// NodeEvent is the event itself. Its Coordinator is empty for the
	// events this coordinator observed; ClusterID is set on node events.
	state.NodeEvent
}

// DefaultEventCapacity is how many events a coordinator keeps.
const DefaultEventCapacity = 1000

// maxEventReason bounds an event's reason (store errors can be long):
// the shared log's bound, which its writers enforce (state.ValidateEvent).
const maxEventReason = state.MaxEventReason

// eventLog is the bounded in-memory list of events: the last capacity
// events, and apart from them the last capacity operator and security
// events (state.Protected: cordons, uncordons, revocations), so that no
// flood of worker-driven events pushes those out of the list (issue 47).
// Watchers wait on changed, a channel closed and replaced on every append.
type eventLog struct {
	now func() time.Time
	// maxAge hides events older than it from queries (0: no age bound).
	maxAge time.Duration

	mu      sync.Mutex // guards the fields below
	all     eventRing  // every event but the protected ones
	kept    eventRing  // the protected ones
	next    uint64     // the Seq of the next event (first is 1)
	changed chan struct{}
	ids     map[string]uint64 // ID -> Seq of each event with an ID in either ring
}

// eventRing is a ring of events in Seq order.
type eventRing struct {
	buf []Event
	n   uint64 // events pushed so far
}

// push appends e and returns the event it replaced, if any.
func (r *eventRing) push(e Event) (old Event, replaced bool) {
	i := r.n % uint64(len(r.buf))
	old, replaced = r.buf[i], r.n >= uint64(len(r.buf))
	r.buf[i] = e
	r.n++
	return old, replaced
}

// since returns the ring's events with a Seq after after, oldest first.
func (r *eventRing) since(after uint64) []Event {
	capy := uint64(len(r.buf))
	first := uint64(0)
	if r.n > capy {
		first = r.n - capy
	}
	var out []Event
	for i := first; i < r.n; i++ {
		if e := r.buf[i%capy]; e.Seq > after {
			out = append(out, e)
		}
	}
	return out
}

// oldest returns the Seq of the ring's oldest event, 0 when empty.
func (r *eventRing) oldest() uint64 {
	if r.n == 0 {
		return 0
	}
	capy := uint64(len(r.buf))
	if r.n > capy {
		return r.buf[r.n%capy].Seq
	}
	return r.buf[0].Seq
}

func newEventLog(capacity int, maxAge time.Duration, now func() time.Time) *eventLog {
	if capacity <= 0 {
		capacity = DefaultEventCapacity
	}
	return &eventLog{now: now, maxAge: maxAge, all: eventRing{buf: make([]Event, capacity)}, kept: eventRing{buf: make([]Event, capacity)},
		next: 1, changed: make(chan struct{}), ids: map[string]uint64{}}
}

// protectedEvent reports whether e is an operator or security event,
// which a flood of others never pushes out (state.Protected).
func protectedEvent(t state.NodeEventType) bool {
	return slices.Contains(state.ProtectedEventTypes, t)
}

// add appends e, stamping its Seq and, when zero, its Time, and returns
// it; added is false (and nothing changes) when an event with e's ID is
// kept already.
func (l *eventLog) add(e Event) (stamped Event, added bool) {
	e.Reason = state.CutEventReason(e.Reason)
	if e.Time.IsZero() {
		e.Time = l.now()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.ids[e.ID]; ok && e.ID != "" {
		return e, false
	}
	e.Seq = l.next
	ring := &l.all
	if protectedEvent(e.Type) {
		ring = &l.kept
	}
	if old, replaced := ring.push(e); replaced && old.ID != "" && l.ids[old.ID] == old.Seq {
		delete(l.ids, old.ID)
	}
	if e.ID != "" {
		l.ids[e.ID] = e.Seq
	}
	l.next++
	close(l.changed)
	l.changed = make(chan struct{})
	return e, true
}

// EventQuery selects events. Zero fields do not filter.
type EventQuery struct {
	// AfterSeq returns only events with a larger Seq.
	AfterSeq uint64
	// Since returns only events at or after it.
	Since  time.Time
	NodeID string
	Types  []state.NodeEventType
	// Limit bounds the answer (the oldest matching first); 0 means all kept.
	Limit int
}

// EventPage is an answer to an EventQuery.
type EventPage struct {
	Events []Event
	// LastSeq is the Seq of the newest event kept (0 when none); a watcher
	// passes it, or the last event's Seq, as the next AfterSeq.
	LastSeq uint64
	// OldestSeq is the Seq of the oldest event still kept; events before
	// it were dropped to bound memory.
	OldestSeq uint64
	// More is true when Limit cut the answer short.
	More bool
}

// query returns the events matching q, oldest first, and the channel that
// is closed at the next append.
func (l *eventLog) query(q EventQuery) (EventPage, <-chan struct{}) {
	if l.maxAge > 0 {
		if floor := l.now().Add(-l.maxAge); q.Since.Before(floor) {
			q.Since = floor
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	last := l.next - 1
	oldest := l.all.oldest()
	if k := l.kept.oldest(); k != 0 && (oldest == 0 || k < oldest) {
		oldest = k
	}
	page := EventPage{Events: []Event{}, LastSeq: last, OldestSeq: oldest}
	if q.AfterSeq >= last {
		return page, l.changed // nothing newer; AfterSeq+1 would wrap at the largest
	}
	// The two rings are each in Seq order: merge them.
	a, k := l.all.since(q.AfterSeq), l.kept.since(q.AfterSeq)
	for len(a) > 0 || len(k) > 0 {
		var e Event
		if len(k) == 0 || (len(a) > 0 && a[0].Seq < k[0].Seq) {
			e, a = a[0], a[1:]
		} else {
			e, k = k[0], k[1:]
		}
		if !q.match(e) {
			continue
		}
		if q.Limit > 0 && len(page.Events) == q.Limit {
			page.More = true
			break
		}
		page.Events = append(page.Events, e)
	}
	return page, l.changed
}

func (q EventQuery) match(e Event) bool {
	if q.NodeID != "" && e.NodeID != q.NodeID {
		return false
	}
	if !q.Since.IsZero() && e.Time.Before(q.Since) {
		return false
	}
	if len(q.Types) == 0 {
		return true
	}
	for _, t := range q.Types {
		if t == e.Type {
			return true
		}
	}
	return false
}
