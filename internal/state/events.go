package state

import (
	"context"
	"encoding/hex"
	"errors"
	"slices"
	"strconv"
	"time"

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

// NodeEvent is one node event in the shared log (Event is a watch change).
type NodeEvent struct {
	// ID is the event's identity (EventID): every coordinator that
	// observes the same change derives the same ID.
	ID        string `json:"id"`
	ClusterID string `json:"clusterId"`
	// Time is when the writer observed the change.
	Time time.Time `json:"time"`
	Type string    `json:"type"`
	Role string    `json:"role,omitempty"`
	// NodeID names the node the event is about.
	NodeID   string `json:"nodeId,omitempty"`
	Old      string `json:"old,omitempty"`
	New      string `json:"new,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Revision string `json:"revision,omitempty"`
	// Coordinator is the node ID of the coordinator that wrote it.
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
	ClusterID, Type, Role, NodeID string
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
	for _, s := range []string{id.ClusterID, id.Type, id.Role, id.NodeID, id.Incarnation, strconv.FormatUint(id.Seq, 10), id.Old, id.New} {
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
	}
	return nil
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
