package coordinator

import (
	"sync"
	"time"
)

// EventType names what a coordinator observed.
type EventType string

// Event types. Node events come from comparing successive views; the
// coordinator's own events from its readiness and store reads.
const (
	EventNodeJoined    EventType = "node_joined"
	EventNodeHealth    EventType = "node_health_changed"
	EventNodeReadiness EventType = "node_readiness_changed"
	EventNodeRestarted EventType = "node_restarted"
	EventNodeRemoved   EventType = "node_expired_or_removed"
	// EventNodeCordoned and EventNodeUncordoned: an operator's cordon
	// of a worker was set or lifted (through any coordinator's /api/v1);
	// Reason names who.
	EventNodeCordoned   EventType = "node_cordoned"
	EventNodeUncordoned EventType = "node_uncordoned"
	// EventNodeRevoked: a coordinator found the worker's credential on
	// its deny list and marked its incarnation revoked.
	EventNodeRevoked      EventType = "node_revoked"
	EventPlacementVersion EventType = "placement_version_changed"
	EventSelfUnready      EventType = "coordinator_unready"
	EventSelfReady        EventType = "coordinator_ready"
	EventStoreUnreachable EventType = "store_unreachable"
	EventStoreRecovered   EventType = "store_recovered"
	// EventsDropped stands for the node events of one view past
	// maxMembershipEvents: a mass expiry is summed up, not listed.
	EventsDropped EventType = "events_dropped"
)

// EventTypes lists every event type, for validation of filters.
func EventTypes() []EventType {
	return []EventType{EventNodeJoined, EventNodeHealth, EventNodeReadiness, EventNodeRestarted, EventNodeRemoved,
		EventNodeCordoned, EventNodeUncordoned, EventNodeRevoked,
		EventPlacementVersion, EventSelfUnready, EventSelfReady, EventStoreUnreachable, EventStoreRecovered, EventsDropped}
}

// Event is one thing this coordinator observed, or, for node events, one
// that any coordinator of the cluster observed and wrote to the store's
// shared event log (state.EventLog; see sharedEvents): node events carry
// a deterministic ID, so the list holds each once, and they survive a
// coordinator's restart. The coordinator's own events (readiness, store
// reachability) stay in its memory.
type Event struct {
	// Seq numbers the events of this coordinator process from 1, without
	// gaps; with the incarnation it orders them.
	Seq  uint64
	Time time.Time
	Type EventType
	// Role and NodeID name the node the event is about; empty for the
	// coordinator's own events.
	Role   string
	NodeID string
	// Old and New are the values that changed (health, readiness,
	// placement version); empty when nothing changed from one to another.
	Old, New string
	// Reason says why, when known (a not-ready reason, a store error).
	Reason string
	// Revision is the store revision of the view that showed the change.
	Revision string
	// ID is a node event's identity (state.EventID), the same at every
	// coordinator that observed the change; empty for local events.
	ID string
	// Coordinator is the node ID of the coordinator that wrote a node
	// event read from the store; empty for this coordinator's.
	Coordinator string
}

// DefaultEventCapacity is how many events a coordinator keeps.
const DefaultEventCapacity = 1000

// maxEventReason bounds an event's reason (store errors can be long).
const maxEventReason = 256

// eventLog is the bounded in-memory list of events: a ring of the last
// capacity events. Watchers wait on changed, a channel closed and replaced
// on every append.
type eventLog struct {
	now func() time.Time
	// maxAge hides events older than it from queries (0: no age bound).
	maxAge time.Duration

	mu      sync.Mutex // guards the fields below
	ring    []Event    // len capacity; ring[(seq-1) % capacity] holds seq
	next    uint64     // the Seq of the next event (first is 1)
	changed chan struct{}
	ids     map[string]uint64 // ID -> Seq of each event with an ID in ring
}

func newEventLog(capacity int, maxAge time.Duration, now func() time.Time) *eventLog {
	if capacity <= 0 {
		capacity = DefaultEventCapacity
	}
	return &eventLog{now: now, maxAge: maxAge, ring: make([]Event, capacity), next: 1, changed: make(chan struct{}), ids: map[string]uint64{}}
}

// add appends e, stamping its Seq and, when zero, its Time, and returns
// it; added is false (and nothing changes) when an event with e's ID is
// kept already.
func (l *eventLog) add(e Event) (stamped Event, added bool) {
	if len(e.Reason) > maxEventReason {
		e.Reason = e.Reason[:maxEventReason] + "…"
	}
	if e.Time.IsZero() {
		e.Time = l.now()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.ids[e.ID]; ok && e.ID != "" {
		return e, false
	}
	e.Seq = l.next
	i := (e.Seq - 1) % uint64(len(l.ring))
	if old := l.ring[i]; old.ID != "" && l.ids[old.ID] == old.Seq {
		delete(l.ids, old.ID)
	}
	l.ring[i] = e
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
	Types  []EventType
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
	capy := uint64(len(l.ring))
	last := l.next - 1
	oldest := uint64(1)
	if last > capy {
		oldest = last - capy + 1
	}
	page := EventPage{Events: []Event{}, LastSeq: last, OldestSeq: oldest}
	if last == 0 {
		page.OldestSeq = 0
	}
	if q.AfterSeq >= last {
		return page, l.changed // nothing newer; AfterSeq+1 would wrap at the largest
	}
	from := max(oldest, q.AfterSeq+1)
	for seq := from; seq <= last; seq++ {
		e := l.ring[(seq-1)%capy]
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

// Events returns the events this coordinator kept that match q (its own,
// and the cluster's node events, read from the store at start and every
// sharedEventsResync), in the order it learnt them, and a channel closed when the next event is added (for a
// watch: query again with AfterSeq once it closes).
func (c *Coordinator) Events(q EventQuery) (EventPage, <-chan struct{}) {
	return c.events.query(q)
}

// Incarnation returns this coordinator process's incarnation ID: event
// sequence numbers are meaningful within one incarnation.
func (c *Coordinator) Incarnation() string { return c.incarnation }
