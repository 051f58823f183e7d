package state

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/zeebo/xxh3"
)

// EventLog is the cluster's shared list of node events: what every
// coordinator observed about the nodes (joined, health, readiness,
// restarts, expiry, marks, placement versions), written once per cluster
// however many coordinators observed it, and kept across coordinator
// restarts. It is a bounded, leased ring, not a time series: a backend
// keeps events for about DefaultEventMaxAge and at most about
// DefaultEventMax of them, and drops the oldest first.
//
// Backends implement it beside Store (the coordinator finds it with a type
// assertion on its Store), against the same server and credentials.
type EventLog interface {
	// AppendEvent writes ev unless an event with its ID exists: created is
	// false when another writer (or an earlier call) already wrote it.
	// ev.ID must be set (EventID), ev.Time must not be zero.
	AppendEvent(ctx context.Context, ev NodeEvent) (created bool, err error)
	// ListEvents returns the cluster's events at or after since (zero:
	// all kept), oldest first by Time (ties by ID), at most limit of them
	// (the newest; 0: all kept, never more than DefaultEventMax).
	ListEvents(ctx context.Context, clusterID string, since time.Time, limit int) ([]NodeEvent, error)
}

// EventWatcher is implemented by event logs that stream new events (etcd,
// Kubernetes), so a coordinator shows an event another coordinator wrote
// within a second rather than at its next full read of the log.
type EventWatcher interface {
	// WatchEvents sends the cluster's events as they are written, from
	// about now on (a backend may first send events already kept; the
	// reader drops those it holds by ID). The channel is closed when ctx
	// ends or the watch fails: the reader then reads the log and watches
	// again.
	WatchEvents(ctx context.Context, clusterID string) <-chan NodeEvent
}

// NodeEventType names what a coordinator observed: the type of a node event
// (NodeEvent.Type) and of a coordinator's own events.
type NodeEventType string

// Event types. Node events come from comparing successive views; the
// coordinator's own events from its readiness and store reads.
const (
	EventNodeJoined    NodeEventType = "node_joined"
	EventNodeHealth    NodeEventType = "node_health_changed"
	EventNodeReadiness NodeEventType = "node_readiness_changed"
	EventNodeRestarted NodeEventType = "node_restarted"
	EventNodeRemoved   NodeEventType = "node_expired_or_removed"
	// EventNodeCordoned and EventNodeUncordoned: an operator's cordon
	// of a worker was set or lifted (through any coordinator's /api/v1);
	// Reason names who.
	EventNodeCordoned   NodeEventType = "node_cordoned"
	EventNodeUncordoned NodeEventType = "node_uncordoned"
	// EventNodeRevoked: a coordinator found the worker's credential on
	// its deny list and marked its incarnation revoked.
	EventNodeRevoked      NodeEventType = "node_revoked"
	EventPlacementVersion NodeEventType = "placement_version_changed"
	EventSelfUnready      NodeEventType = "coordinator_unready"
	EventSelfReady        NodeEventType = "coordinator_ready"
	EventStoreUnreachable NodeEventType = "store_unreachable"
	EventStoreRecovered   NodeEventType = "store_recovered"
	// EventJobStarted and EventJobEnded: an operator's cache job (warm,
	// free) started, and ended (done, partial or cancelled); protected,
	// like the cordons.
	EventJobStarted NodeEventType = "job_started"
	EventJobEnded   NodeEventType = "job_ended"
	// EventsDropped stands for the node events of one view past
	// the coordinator's bound per view: a mass expiry is summed up, not listed.
	EventsDropped NodeEventType = "events_dropped"
)

// NodeEventTypes lists every event type, in the order the API documents
// them (recordgen reads the constants above for the OpenAPI enum).
func NodeEventTypes() []NodeEventType {
	return []NodeEventType{EventNodeJoined, EventNodeHealth, EventNodeReadiness, EventNodeRestarted, EventNodeRemoved,
		EventNodeCordoned, EventNodeUncordoned, EventNodeRevoked,
		EventPlacementVersion, EventSelfUnready, EventSelfReady, EventStoreUnreachable, EventStoreRecovered, EventJobStarted, EventJobEnded, EventsDropped}
}

// NodeEvent is one node event in the shared log (Event is a watch change).
type NodeEvent struct {
	// ID is a node event's identity (EventID): every coordinator that
	// observes the same change derives the same, so the shared log keeps
	// it once; empty for a coordinator's own events.
	ID        string `json:"id"`
	ClusterID string `json:"clusterId"`
	// Time is when the writer observed the change.
	Time time.Time     `json:"time"`
	Type NodeEventType `json:"type"`
	// Role and NodeID name the node the event is about; empty for a
	// coordinator's own events.
	Role   string `json:"role,omitempty"`
	NodeID string `json:"nodeId,omitempty"`
	// Old and New are the values that changed (health, readiness,
	// placement version).
	Old string `json:"old,omitempty"`
	New string `json:"new,omitempty"`
	// Reason says why, when known (a not-ready reason, a store error), at
	// most MaxEventReason bytes.
	Reason string `json:"reason,omitempty"`
	// Revision is the store revision of the view that showed the change.
	Revision string `json:"revision,omitempty"`
	// Coordinator is the node ID of the coordinator that observed it (for
	// an event of the shared log: the one that wrote it).
	Coordinator string `json:"coordinator,omitempty"`
}

// Bounds of the shared event log.
const (
	// DefaultEventMaxAge is how long a backend keeps an event.
	DefaultEventMaxAge = time.Hour
	// DefaultEventMax is how many events of a cluster a backend keeps.
	DefaultEventMax = 1000
	// MaxEventReason bounds an event's reason in bytes.
	MaxEventReason = 256
)

// EventIdentity is what makes two observations the same event.
type EventIdentity struct {
	ClusterID    string
	Type         NodeEventType
	Role, NodeID string
	// Incarnation and Seq are the record's incarnation and heartbeat
	// sequence number (or the store revision) that showed the change.
	Incarnation string
	Seq         uint64
	Old, New    string
}

// EventID returns the deterministic identity of an event: 32 hex digits
// of the 128-bit xxh3 of its identifying fields.
func EventID(id EventIdentity) string {
	b := make([]byte, 0, 128)
	for _, s := range []string{id.ClusterID, string(id.Type), id.Role, id.NodeID, id.Incarnation, strconv.FormatUint(id.Seq, 10), id.Old, id.New} {
		b = strconv.AppendInt(b, int64(len(s)), 10) // length-prefixed: no ambiguous concatenation
		b = append(b, ':')
		b = append(b, s...)
	}
	h := xxh3.Hash128(b).Bytes()
	return hex.EncodeToString(h[:])
}

// ValidateEvent checks what AppendEvent requires of ev.
func ValidateEvent(ev NodeEvent) error {
	switch {
	case len(ev.ID) != 32:
		return errors.New("event id: must be 32 hex digits (state.EventID)")
	case ev.ClusterID == "":
		return errors.New("event clusterId: must not be empty")
	case ev.Time.IsZero():
		return errors.New("event time: must not be zero")
	case ev.Type == "":
		return errors.New("event type: must not be empty")
	case len(ev.Reason) > MaxEventReason || !utf8.ValidString(ev.Reason):
		return fmt.Errorf("event reason: %d bytes; must be valid UTF-8 of at most %d bytes (CutEventReason)", len(ev.Reason), MaxEventReason)
	}
	return nil
}

// CutEventReason returns reason cut to MaxEventReason bytes, on a rune,
// with "…" when it was cut.
func CutEventReason(reason string) string {
	if len(reason) <= MaxEventReason && utf8.ValidString(reason) {
		return reason
	}
	const ellipsis = "…"
	cut := reason[:min(len(reason), MaxEventReason-len(ellipsis))]
	return strings.ToValidUTF8(cut, "") + ellipsis
}

// Eviction of the shared event log (issue 47: three worker credentials
// flushed the 1,000-event log in about 50 s, the operator's cordons and
// every revocation with it). When a cluster's log holds more than
// DefaultEventMax events, Evict chooses which go, in this order:
//
//  1. events of a source over its quota (DefaultEventSourceQuota), its
//     oldest first: one worker that flaps fills its own share, not the log;
//  2. the oldest events that are not protected;
//  3. only when the protected events alone are over the cap, the oldest
//     of them.
//
// A source is the node an event is about (role and node ID), or the
// cluster for cluster-wide events (a placement change). Operator and
// security events (ProtectedEventTypes: cordons, their lifting,
// revocations) are protected: no amount of worker-driven events evicts
// them.
const (
	// DefaultEventSourceQuota is how many events of one source the log
	// keeps before that source's oldest are the first to go.
	DefaultEventSourceQuota = 100
)

// ProtectedEventTypes are the operator and security event types that
// worker-driven events never evict.
var ProtectedEventTypes = []NodeEventType{EventNodeCordoned, EventNodeUncordoned, EventNodeRevoked, EventJobStarted, EventJobEnded}

// Protected reports whether ev is an operator or security event.
func Protected(ev NodeEvent) bool { return slices.Contains(ProtectedEventTypes, ev.Type) }

// eventSource is the source an event's quota counts against.
func eventSource(ev NodeEvent) string {
	if ev.NodeID == "" {
		return ""
	}
	return ev.Role + "/" + ev.NodeID
}

// Evict returns the events to delete so that at most max of events
// remain (max <= 0: DefaultEventMax), chosen by the order above. events
// need not be sorted; the result is oldest first.
func Evict(events []NodeEvent, max int) []NodeEvent {
	if max <= 0 {
		max = DefaultEventMax
	}
	excess := len(events) - max
	if excess <= 0 {
		return nil
	}
	sorted := slices.Clone(events)
	SortEvents(sorted)
	gone := make(map[string]bool, excess)
	var out []NodeEvent
	take := func(e NodeEvent) bool {
		if len(out) >= excess || gone[e.ID] {
			return len(out) < excess
		}
		gone[e.ID] = true
		out = append(out, e)
		return len(out) < excess
	}
	// 1. Each source's oldest beyond its quota (protected events count
	// towards their node's quota but are never taken here).
	perSource := map[string]int{}
	for _, e := range sorted {
		perSource[eventSource(e)]++
	}
	for _, e := range sorted {
		src := eventSource(e)
		if perSource[src] > DefaultEventSourceQuota && !Protected(e) {
			perSource[src]--
			if !take(e) {
				return sortedEvents(out)
			}
		}
	}
	// 2. The oldest unprotected, then 3. the oldest protected.
	for _, protected := range []bool{false, true} {
		for _, e := range sorted {
			if Protected(e) == protected && !take(e) {
				return sortedEvents(out)
			}
		}
	}
	return sortedEvents(out)
}

func sortedEvents(events []NodeEvent) []NodeEvent {
	SortEvents(events)
	return events
}

// TrimEvents sorts events oldest first (by Time, then ID), drops those
// before since and keeps the newest limit (0, or more than DefaultEventMax:
// DefaultEventMax). Backends share it.
func TrimEvents(events []NodeEvent, since time.Time, limit int) []NodeEvent {
	out := events[:0]
	for _, e := range events {
		if since.IsZero() || !e.Time.Before(since) {
			out = append(out, e)
		}
	}
	SortEvents(out)
	if limit <= 0 || limit > DefaultEventMax {
		limit = DefaultEventMax
	}
	if len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out
}

// KeepEvents returns events without the ones Evict chooses for max,
// oldest first: what a backend that holds its log in memory keeps.
func KeepEvents(events []NodeEvent, max int) []NodeEvent {
	gone := map[string]bool{}
	for _, e := range Evict(events, max) {
		gone[e.ID] = true
	}
	out := make([]NodeEvent, 0, len(events)-len(gone))
	for _, e := range events {
		if !gone[e.ID] {
			out = append(out, e)
		}
	}
	SortEvents(out)
	return out
}

// SortEvents orders events oldest first, ties by ID.
func SortEvents(events []NodeEvent) {
	slices.SortStableFunc(events, func(a, b NodeEvent) int {
		if c := a.Time.Compare(b.Time); c != 0 {
			return c
		}
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
}
