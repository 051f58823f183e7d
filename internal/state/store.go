package state

import (
	"context"
	"time"

	"github.com/talonhq/talon/internal/cluster"
)

// Store is the cluster-state contract. It is the one interface declared
// beside its implementations, because it is the contract they must meet.
type Store interface {
	// UpsertNode applies rec under the ordering rule (cluster.Order: a
	// registration unless Heartbeat is given) and, when accepted, writes
	// cluster.Next's record, with the store-issued generation, attached to
	// a lease of leaseTTL. The generation is issued inside the same
	// compare-and-swap as the write. rec is not modified.
	UpsertNode(ctx context.Context, rec *cluster.Record, leaseTTL time.Duration, opts ...UpsertOption) (WriteResult, error)
	// RemoveNode deletes the record in slot key when its incarnation is
	// incarnationID. The outcome is OutcomeAccepted (removed),
	// OutcomeNotFound or OutcomeStale (a different incarnation holds it).
	RemoveNode(ctx context.Context, key cluster.Key, incarnationID string) (WriteResult, error)
	// ProposeTransition applies tr to slot key only while the slot still
	// holds incarnation incarnationID at heartbeat sequence seq (for
	// TransitionLate: and is not already Late). It is one compare-and-swap
	// against the backend's own version of the record, so a heartbeat or
	// restart that lands between the proposer's read and its write always
	// wins. Outcomes: OutcomeAccepted (applied; WriteResult.Record is the
	// late record, nil after TransitionExpire), OutcomeStale (the slot
	// moved on or is already late; nothing changed; Record is what the
	// slot holds), OutcomeNotFound (no record). Any number of coordinators
	// may propose the same transition; exactly one applies it.
	//
	// A backend whose heartbeats may renew a lease without writing the
	// record (UpsertOptions.StatusEvery) cannot show them in the record's
	// version: with MinSilence it applies tr only when its own clock says
	// the slot's lease went unrenewed for at least that long, and answers
	// OutcomeStale with WriteResult.Renewed and RenewedAgo otherwise.
	ProposeTransition(ctx context.Context, key cluster.Key, incarnationID string, seq uint64, tr Transition, opts ...ProposeOption) (WriteResult, error)
	// SetMarks applies m to the record in slot key, while incarnation
	// incarnationID holds it ("" for any), in one compare-and-swap that
	// keeps the record's lease as it is: an operator's cordon, a
	// coordinator's revocation. Outcomes: OutcomeAccepted (Record is the
	// marked record), OutcomeDuplicate (the marks were already so),
	// OutcomeStale (another incarnation holds the slot), OutcomeNotFound.
	SetMarks(ctx context.Context, key cluster.Key, incarnationID string, m MarkChange) (WriteResult, error)
	// Snapshot returns every record the store holds for the cluster from
	// one consistent, linearizable read; no reader's clock filters it.
	Snapshot(ctx context.Context, clusterID string) (*Snapshot, error)
	// Watch streams the cluster's changes after revision after. The channel
	// is closed when ctx ends or after a batch whose Err is set (ErrCompacted
	// when after is no longer available; ErrUnavailable and the like when the
	// backend fails). A zero revision is not valid: watch from a snapshot's
	// revision.
	Watch(ctx context.Context, clusterID string, after Revision) <-chan WatchBatch
	// CheckReady returns nil when the backend can serve reads and writes
	// now, or an error wrapping one of the sentinel errors.
	CheckReady(ctx context.Context) error
	// Backend names the backend for metrics and diagnostics: "memory",
	// "etcd" or "kubernetes".
	Backend() string
	// Close releases the store's connections and goroutines.
	Close() error
}

// Revision is an opaque backend revision. Compare revisions with == and
// show them with String; never parse or order them.
type Revision struct{ token string }

// NewRevision wraps a backend's token. Only backends call it.
func NewRevision(token string) Revision { return Revision{token: token} }

// String returns the token for diagnostics and resumption.
func (r Revision) String() string { return r.token }

// IsZero reports whether r is the zero revision (no revision).
func (r Revision) IsZero() bool { return r.token == "" }

// Outcome is what a write did.
type Outcome uint8

// Outcomes of UpsertNode, RemoveNode and ProposeTransition.
const (
	OutcomeAccepted  Outcome = iota + 1 // the record was written (or removed)
	OutcomeDuplicate                    // same incarnation and sequence: nothing changed
	OutcomeStale                        // older sequence, a superseded incarnation, or removal of another incarnation: nothing changed
	OutcomeNotFound                     // removal of, or a heartbeat for, a slot with no record
)

// String returns the outcome's lowercase name (also its metrics label).
func (o Outcome) String() string {
	switch o {
	case OutcomeAccepted:
		return "accepted"
	case OutcomeDuplicate:
		return "duplicate"
	case OutcomeStale:
		return "stale"
	case OutcomeNotFound:
		return "not_found"
	}
	return "invalid"
}

// Transition is a time-based change a coordinator proposes for a record
// whose current version it watched go unchanged.
type Transition uint8

// Transitions of ProposeTransition.
const (
	// TransitionLate stores the record with Late set; its lease (TTL
	// deadline) is kept as it is: neither refreshed nor extended.
	TransitionLate Transition = iota + 1
	// TransitionExpire deletes the record.
	TransitionExpire
)

// String returns the transition's lowercase name (also its metrics label).
func (t Transition) String() string {
	switch t {
	case TransitionLate:
		return "late"
	case TransitionExpire:
		return "expire"
	}
	return "invalid"
}

// Valid reports whether t is a known transition.
func (t Transition) Valid() bool { return t == TransitionLate || t == TransitionExpire }

// UpsertOption adjusts one UpsertNode call.
type UpsertOption func(*UpsertOptions)

// UpsertOptions are the settings of one UpsertNode call. Backends read
// them with NewUpsertOptions.
type UpsertOptions struct {
	// Update is the kind of update; UpdateRegister by default.
	Update cluster.Update
	// StatusEvery is the n of StatusEvery; 0 writes every heartbeat.
	StatusEvery uint64
}

// MarkChange is what SetMarks changes on a record (cluster.Record's
// marks, which no process sets on its own record).
type MarkChange struct {
	// SetCordon sets the cordon to Cordon (CordonedBy empty lifts it).
	SetCordon bool
	// Cordon holds CordonedBy, CordonedAtUnixMs and CordonPersist.
	Cordon Cordon
	// RevokedBy, when not empty, revokes the incarnation; RevokedReason
	// says why.
	RevokedBy, RevokedReason string
}

// Cordon is an operator's cordon as SetMarks stores it.
type Cordon struct {
	By       string
	AtUnixMs int64
	Persist  bool
}

// ProposeOption adjusts one ProposeTransition call.
type ProposeOption func(*ProposeOptions)

// ProposeOptions are the settings of one ProposeTransition call.
// Backends read them with NewProposeOptions.
type ProposeOptions struct {
	// MinSilence is the time the slot's lease must have gone unrenewed,
	// by the backend's own clock, for the transition to apply (see
	// ProposeTransition); 0 applies it on the version alone.
	MinSilence time.Duration
}

// MinSilence makes a transition apply only to a slot whose lease the
// backend's own clock says went unrenewed for at least d.
func MinSilence(d time.Duration) ProposeOption { return func(o *ProposeOptions) { o.MinSilence = d } }

// NewProposeOptions applies opts to the defaults.
func NewProposeOptions(opts []ProposeOption) ProposeOptions {
	var o ProposeOptions
	for _, f := range opts {
		f(&o)
	}
	return o
}

// Heartbeat makes an UpsertNode a heartbeat: it only advances the
// incarnation that holds the slot, and never creates or takes one over.
func Heartbeat() UpsertOption { return func(o *UpsertOptions) { o.Update = cluster.UpdateHeartbeat } }

// StatusEvery lets an accepted heartbeat that cluster.NeedsStatusWrite
// finds changes nothing (n: heartbeats per status interval) renew the
// slot's lease without writing the record, on a backend that can (etcd:
// a lease keepalive, which adds nothing to the store's history). The
// answer is then OutcomeAccepted with DecisionAdvance and Renewed set;
// its Record is the stored one. 0 (the default) writes every heartbeat.
func StatusEvery(n uint64) UpsertOption { return func(o *UpsertOptions) { o.StatusEvery = n } }

// NewUpsertOptions applies opts to the defaults.
func NewUpsertOptions(opts []UpsertOption) UpsertOptions {
	o := UpsertOptions{Update: cluster.UpdateRegister}
	for _, f := range opts {
		f(&o)
	}
	return o
}

// OutcomeOf returns the outcome of an ordering decision: accepted,
// duplicate, stale (a smaller sequence or a superseded incarnation) or
// not_found (a heartbeat for a slot with no record: register first).
func OutcomeOf(d cluster.Decision) Outcome {
	switch d {
	case cluster.DecisionDuplicate:
		return OutcomeDuplicate
	case cluster.DecisionStale, cluster.DecisionSuperseded:
		return OutcomeStale
	case cluster.DecisionUnregistered:
		return OutcomeNotFound
	}
	return OutcomeAccepted
}

// WriteResult reports the outcome of a write.
type WriteResult struct {
	Outcome Outcome
	// Decision is the ordering rule's decision for upserts (zero for removals).
	Decision cluster.Decision
	// Revision is the store revision after the write, or the revision at
	// which the store observed that nothing needed to change.
	Revision Revision
	// Record is the record the slot holds after the operation (nil after a
	// removal or when none exists), with the store's UpdatedAtUnixMs.
	Record *cluster.Record
	// Renewed reports, for an accepted heartbeat, that only the slot's
	// lease was renewed and Record is the stored record, unchanged
	// (UpsertOptions.StatusEvery); for a refused transition, that the
	// lease was renewed RenewedAgo before (ProposeOptions.MinSilence).
	Renewed bool
	// RenewedAgo is, with Renewed on a refused transition, how long ago by
	// the backend's clock the slot's lease was last renewed.
	RenewedAgo time.Duration
}

// Snapshot is one consistent view of a cluster.
type Snapshot struct {
	ClusterID string
	// Records holds every record the store holds, ordered by role then node ID.
	// Callers must not modify them.
	Records  []*cluster.Record
	Revision Revision
	// ObservedAtUnixMs is the store-side time of the read, against which
	// the record ages shown (UpdatedAtUnixMs) are computed; display only.
	ObservedAtUnixMs int64
}

// Find returns the record in slot key, or nil.
func (s *Snapshot) Find(key cluster.Key) *cluster.Record {
	for _, r := range s.Records {
		if r.Key() == key {
			return r
		}
	}
	return nil
}

// EventType is the kind of a watch event.
type EventType uint8

// Watch event types.
const (
	EventPut    EventType = iota + 1 // a record was written
	EventDelete                      // a record was removed or its lease expired
)

// String returns the event type's lowercase name.
func (t EventType) String() string {
	switch t {
	case EventPut:
		return "put"
	case EventDelete:
		return "delete"
	}
	return "invalid"
}

// Event is one change to one slot.
type Event struct {
	Type EventType
	Key  cluster.Key
	// Record is the new record for EventPut, nil for EventDelete.
	Record *cluster.Record
	// Revision is the store revision at which the change happened; watching
	// again after it resumes with the next change.
	Revision Revision
}

// WatchBatch is what a watch channel carries: events in order, or a
// terminal error after which the channel is closed.
type WatchBatch struct {
	Events []Event
	Err    error
}
