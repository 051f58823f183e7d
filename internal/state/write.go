package state

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/talonhq/talon/internal/cluster"
)

// Slot is one read of a store slot: the record it holds and the backend's
// opaque version of it, as of a revision. A Slot from a cache may be stale;
// Swap compares its Version, so a stale Slot costs a round trip, never
// correctness.
type Slot struct {
	// Record is the stored record; nil when the slot is empty or its value
	// cannot be read (Bad).
	Record *cluster.Record
	// Bad is why a value the slot holds is not a usable record; it wraps
	// cluster.ErrUnsupportedVersion for a record of another schema version.
	Bad error
	// Holder is the incarnation the backend's own metadata names as the
	// slot's holder when Record cannot be read (a Lease's holderIdentity);
	// empty otherwise.
	Holder string
	// Version is the backend's token for the value (an etcd mod revision,
	// a resourceVersion): what Swap compares. Backends may keep more
	// beside it in Token.
	Version string
	// Token is the backend's own state of the read (its lease, its object),
	// handed back to Swap unchanged.
	Token any
	// Revision is the store revision as of which the slot held this.
	Revision Revision
	// Fresh reports a read from the backend during the current operation
	// (not a cache): only a fresh Slot can confirm a rejection.
	Fresh bool
	// Floor is the backend's lower bound for a new generation
	// (cluster.Next); 0 when it has none.
	Floor uint64
}

// Change is what a write decided to do to a slot: store Record, or delete
// the slot when Record is nil.
type Change struct {
	// Decision is the ordering decision of an upsert (zero otherwise).
	Decision cluster.Decision
	// Record is the record to store, stamped; nil deletes the slot.
	Record *cluster.Record
	// Encoded is Record's stored form.
	Encoded []byte
	// TTL is Record's lease for an upsert.
	TTL time.Duration
	// KeepLease keeps the slot's lease and its deadline as they are
	// (TransitionLate): the write neither refreshes nor extends it.
	KeepLease bool
	// Renew says the stored record may stay as it is: an accepted
	// heartbeat that changes nothing cluster.NeedsStatusWrite counts. A
	// backend that can renews only the slot's lease (and answers
	// Swapped.Renewed); one that cannot writes Record as usual.
	Renew bool
	// MinSilence is, for a transition, ProposeOptions.MinSilence.
	MinSilence time.Duration
}

// Swapped is a backend's answer to one compare-and-swap.
type Swapped struct {
	// Applied reports that the change was made.
	Applied bool
	// Revision is the store revision of the change.
	Revision Revision
	// Record is the record the slot holds after an applied change (nil
	// after a deletion), with the backend's stamps.
	Record *cluster.Record
	// Current is, when the compare failed, the slot as the failed request
	// read it, if the backend got it; nil means read the slot again.
	Current *Slot
	// Renewed reports that the backend renewed the lease of the slot's
	// record instead of writing (Change.Renew); Record is then the stored
	// record.
	Renewed bool
	// Refused is, when not nil, the backend's final answer without a
	// change (a transition refused because the lease was renewed within
	// MinSilence).
	Refused *WriteResult
}

// Slots is the per-backend primitive of the ordered write: read a slot
// (from a cache or fresh) and compare-and-swap it against the version a
// read returned. A backend keeps its own machinery (group commit, leases,
// caches) behind it. One value serves one write; it need not be safe for
// concurrent use.
type Slots interface {
	// Read returns the slot, from the backend when fresh is set, else from
	// whatever the backend holds (which may itself be a fresh read).
	Read(ctx context.Context, key cluster.Key, fresh bool) (Slot, error)
	// Swap applies ch to the slot if it still holds cur's Version.
	Swap(ctx context.Context, key cluster.Key, cur Slot, ch Change) (Swapped, error)
}

// Decide is one write's rule: given what the slot holds, the change to
// make, or (final non-nil) the answer without a change. An error or a
// final answer on a Slot that is not fresh is confirmed on a fresh read.
type Decide func(cur Slot) (ch Change, final *WriteResult, err error)

// Write is the ordered-write loop every backend runs: read the slot,
// decide, confirm a rejection on a fresh read, compare-and-swap, and on a
// lost compare decide again on what the slot now holds, at most attempts
// swaps before ErrConflict. Errors of the backend are returned as they
// come; the caller maps them.
func Write(ctx context.Context, slots Slots, key cluster.Key, attempts int, decide Decide) (WriteResult, error) {
	cur, err := slots.Read(ctx, key, false)
	if err != nil {
		return WriteResult{}, err
	}
	for swaps := 0; swaps < attempts; {
		ch, final, err := decide(cur)
		if err != nil || final != nil {
			if !cur.Fresh {
				if cur, err = slots.Read(ctx, key, true); err != nil {
					return WriteResult{}, err
				}
				continue
			}
			if err != nil {
				return WriteResult{}, err
			}
			return *final, nil
		}
		swaps++
		sw, err := slots.Swap(ctx, key, cur, ch)
		if err != nil {
			return WriteResult{}, err
		}
		if sw.Refused != nil {
			return *sw.Refused, nil
		}
		if sw.Applied {
			return WriteResult{Outcome: OutcomeAccepted, Decision: ch.Decision, Revision: sw.Revision, Record: sw.Record, Renewed: sw.Renewed}, nil
		}
		if sw.Current != nil {
			cur = *sw.Current
			continue
		}
		if cur, err = slots.Read(ctx, key, true); err != nil {
			return WriteResult{}, err
		}
	}
	return WriteResult{}, fmt.Errorf("%w: lost %d compare-and-swap rounds in a row", ErrConflict, attempts)
}

// Upsert returns the Decide of UpsertNode for rec: cluster.Order against
// the slot (a value that is not a record counts as an empty slot; one of
// another schema version cannot be ordered against and fails with
// ErrUnsupportedVersion), cluster.Next, the stamp of now, and the encoding.
//
// The field rules are checked once per decision, not before it: an
// accepted update by the encoding of what is stored (EncodeRecord, which
// checks every field and the size), a rejected one by ValidateRecord. So a
// heartbeat costs one check of the record's fields in the store; the
// caller checks only the key (ValidateKey) before reading the slot.
//
// With statusEvery (UpsertOptions.StatusEvery), an Advance that
// cluster.NeedsStatusWrite finds changes nothing is marked Renew.
func Upsert(rec *cluster.Record, u cluster.Update, ttl time.Duration, statusEvery uint64, now func() time.Time) Decide {
	return func(cur Slot) (Change, *WriteResult, error) {
		if cur.Bad != nil && errors.Is(cur.Bad, cluster.ErrUnsupportedVersion) {
			return Change{}, nil, fmt.Errorf("%w: stored record: %w", ErrUnsupportedVersion, cur.Bad)
		}
		d := cluster.Order(cur.Record, rec, u)
		if !d.Accepted() {
			if err := ValidateRecord(rec); err != nil {
				return Change{}, nil, err
			}
			return Change{}, &WriteResult{Outcome: OutcomeOf(d), Decision: d, Revision: cur.Revision, Record: cur.Record.Clone()}, nil
		}
		next := cluster.Next(cur.Record, rec, d, cur.Floor)
		next.UpdatedAtUnixMs = now().UnixMilli()
		renew := d == cluster.DecisionAdvance && !cluster.NeedsStatusWrite(cur.Record, rec, statusEvery)
		next.StatusAtUnixMs = next.UpdatedAtUnixMs
		next.HeartbeatAtUnixMs = next.UpdatedAtUnixMs
		if renew {
			next.StatusAtUnixMs = cur.Record.StatusAtUnixMs // a renewal keeps the stored status
		}
		// The size rule applies to what is stored, store-issued fields included.
		enc, err := EncodeRecord(next)
		if err != nil {
			return Change{}, nil, err
		}
		return Change{Decision: d, Record: next, Encoded: enc, TTL: ttl, Renew: renew}, nil, nil
	}
}

// Remove returns the Decide of RemoveNode: delete the slot while
// incarnationID holds it.
func Remove(incarnationID string) Decide {
	return func(cur Slot) (Change, *WriteResult, error) {
		holder, final, err := holderOf(cur)
		if final != nil || err != nil {
			return Change{}, final, err
		}
		if holder != incarnationID {
			return Change{}, &WriteResult{Outcome: OutcomeStale, Revision: cur.Revision, Record: cur.Record.Clone()}, nil
		}
		return Change{}, nil, nil
	}
}

// holderOf returns the incarnation that holds cur, or the final answer
// when none can be named: not found for an empty slot, an error for a
// record of another schema version whose holder is unknown, stale for any
// other unreadable value (it is no incarnation's).
func holderOf(cur Slot) (string, *WriteResult, error) {
	switch {
	case cur.Record != nil:
		return cur.Record.IncarnationID, nil, nil
	case cur.Bad == nil:
		return "", &WriteResult{Outcome: OutcomeNotFound, Revision: cur.Revision}, nil
	case cur.Holder != "":
		return cur.Holder, nil, nil
	case errors.Is(cur.Bad, cluster.ErrUnsupportedVersion):
		return "", nil, fmt.Errorf("%w: stored record: %w", ErrUnsupportedVersion, cur.Bad)
	}
	return "", &WriteResult{Outcome: OutcomeStale, Revision: cur.Revision}, nil
}

// Propose returns the Decide of ProposeTransition: apply tr while the slot
// holds incarnationID at sequence seq (and, for TransitionLate, is not late
// yet).
//
// minSilence (ProposeOptions.MinSilence) is handed to the backend in the
// Change, for a backend whose renewals do not show in the version.
func Propose(incarnationID string, seq uint64, tr Transition, minSilence time.Duration) Decide {
	return func(cur Slot) (Change, *WriteResult, error) {
		switch {
		case cur.Record == nil && cur.Bad == nil:
			return Change{}, &WriteResult{Outcome: OutcomeNotFound, Revision: cur.Revision}, nil
		case cur.Record == nil:
			// A value that cannot be read holds no sequence to be at.
			return Change{}, &WriteResult{Outcome: OutcomeStale, Revision: cur.Revision}, nil
		}
		r := cur.Record
		if r.IncarnationID != incarnationID || r.HeartbeatSeq != seq || (tr == TransitionLate && r.Late) {
			return Change{}, &WriteResult{Outcome: OutcomeStale, Revision: cur.Revision, Record: r.Clone()}, nil
		}
		if tr == TransitionExpire {
			return Change{MinSilence: minSilence}, nil, nil
		}
		late := r.Clone()
		late.Late = true
		late.HeartbeatAtUnixMs = r.HeartbeatAt() // the mark is no heartbeat
		enc, err := EncodeRecord(late)
		if err != nil {
			return Change{}, nil, err
		}
		return Change{Record: late, Encoded: enc, KeepLease: true, MinSilence: minSilence}, nil, nil
	}
}

// Mark returns the Decide of SetMarks: apply m to the record while
// incarnationID ("" for any) holds the slot, keeping its lease.
func Mark(incarnationID string, m MarkChange) Decide {
	return func(cur Slot) (Change, *WriteResult, error) {
		holder, final, err := holderOf(cur)
		if final != nil || err != nil {
			return Change{}, final, err
		}
		if cur.Record == nil || (incarnationID != "" && holder != incarnationID) {
			return Change{}, &WriteResult{Outcome: OutcomeStale, Revision: cur.Revision, Record: cur.Record.Clone()}, nil
		}
		next := cur.Record.Clone()
		next.HeartbeatAtUnixMs = cur.Record.HeartbeatAt() // a mark is no heartbeat
		if m.SetCordon {
			next.CordonedBy, next.CordonedAtUnixMs, next.CordonPersist = m.Cordon.By, m.Cordon.AtUnixMs, m.Cordon.Persist
			if m.Cordon.By == "" {
				next.CordonedAtUnixMs, next.CordonPersist = 0, false
			}
		}
		if m.RevokedBy != "" {
			next.RevokedBy, next.RevokedReason = m.RevokedBy, m.RevokedReason
		}
		if sameMarks(cur.Record, next) {
			return Change{}, &WriteResult{Outcome: OutcomeDuplicate, Revision: cur.Revision, Record: next}, nil
		}
		enc, err := EncodeRecord(next)
		if err != nil {
			return Change{}, nil, err
		}
		return Change{Record: next, Encoded: enc, KeepLease: true}, nil, nil
	}
}

func sameMarks(a, b *cluster.Record) bool {
	return a.CordonedBy == b.CordonedBy && a.CordonedAtUnixMs == b.CordonedAtUnixMs && a.CordonPersist == b.CordonPersist &&
		a.RevokedBy == b.RevokedBy && a.RevokedReason == b.RevokedReason
}

// ValidateMarks checks the arguments of a SetMarks call.
func ValidateMarks(key cluster.Key, m MarkChange) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if !m.SetCordon && m.RevokedBy == "" {
		return fmt.Errorf("%w: marks: nothing to change (neither a cordon nor a revocation)", ErrInvalidRecord)
	}
	return nil
}

// ValidateTransition checks the arguments of a ProposeTransition call.
func ValidateTransition(key cluster.Key, incarnationID string, tr Transition) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if incarnationID == "" {
		return fmt.Errorf("%w: incarnationId \"\": must not be empty", ErrInvalidRecord)
	}
	if !tr.Valid() {
		return fmt.Errorf("%w: transition %d: must be late or expire", ErrInvalidRecord, tr)
	}
	return nil
}

// TransitionCounts counts ProposeTransition calls by transition and
// outcome, for a backend's metrics. The zero value is ready; it is safe
// for concurrent use.
type TransitionCounts struct {
	n [TransitionExpire + 1][OutcomeNotFound + 2]atomic.Uint64 // the last outcome index counts errors
}

// Note counts one call's answer.
func (c *TransitionCounts) Note(tr Transition, o Outcome, err error) {
	if !tr.Valid() {
		return
	}
	i := int(OutcomeNotFound) + 1
	if err == nil && o >= OutcomeAccepted && o <= OutcomeNotFound {
		i = int(o)
	}
	c.n[tr][i].Add(1)
}

// Each calls f for every transition and outcome label ("accepted",
// "stale", "not_found", "error"; bounded) with its count.
func (c *TransitionCounts) Each(f func(tr Transition, outcome string, n uint64)) {
	for _, tr := range []Transition{TransitionLate, TransitionExpire} {
		for _, o := range []Outcome{OutcomeAccepted, OutcomeStale, OutcomeNotFound} {
			f(tr, o.String(), c.n[tr][o].Load())
		}
		f(tr, "error", c.n[tr][OutcomeNotFound+1].Load())
	}
}
