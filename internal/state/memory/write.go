package memory

import (
	"container/heap"
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

// maxAttempts bounds state.Write's swaps; under mu a swap never loses.
const maxAttempts = 2

// UpsertNode applies rec under cluster.Order through state.Write. An
// accepted record is stored as cluster.Next's copy stamped with the clock's
// time, with a lease of leaseTTL. Generations come from a per-slot counter
// that outlives the slot's records, so they grow strictly per node ID for
// the store's life.
func (s *Store) UpsertNode(ctx context.Context, rec *cluster.Record, leaseTTL time.Duration, opts ...state.UpsertOption) (state.WriteResult, error) {
	o := state.NewUpsertOptions(opts)
	if err := s.gate(ctx, "upsert"); err != nil {
		return state.WriteResult{}, err
	}
	if rec == nil {
		return state.WriteResult{}, fmt.Errorf("memory store upsert: %w: record is nil", state.ErrInvalidRecord)
	}
	if leaseTTL <= 0 {
		return state.WriteResult{}, fmt.Errorf("memory store upsert %s: %w: leaseTTL %s: must be positive", rec.Key(), state.ErrInvalidRecord, leaseTTL)
	}
	if err := state.ValidateKey(rec.Key()); err != nil {
		return state.WriteResult{}, fmt.Errorf("memory store upsert: %w", err)
	}
	return s.write(ctx, "upsert", rec.Key(), func(now time.Time) state.Decide {
		return state.Upsert(rec, o.Update, leaseTTL, o.StatusEvery, func() time.Time { return now })
	})
}

// RemoveNode deletes the record in slot key when its incarnation is
// incarnationID.
func (s *Store) RemoveNode(ctx context.Context, key cluster.Key, incarnationID string) (state.WriteResult, error) {
	if err := s.gate(ctx, "remove"); err != nil {
		return state.WriteResult{}, err
	}
	if err := state.ValidateKey(key); err != nil {
		return state.WriteResult{}, fmt.Errorf("memory store remove: %w", err)
	}
	if incarnationID == "" {
		return state.WriteResult{}, fmt.Errorf("memory store remove %s: %w: incarnationId \"\": must not be empty", key, state.ErrInvalidRecord)
	}
	return s.write(ctx, "remove", key, func(time.Time) state.Decide { return state.Remove(incarnationID) })
}

// ProposeTransition applies tr to slot key while it holds incarnationID at
// seq. A late record keeps its lease deadline.
func (s *Store) ProposeTransition(ctx context.Context, key cluster.Key, incarnationID string, seq uint64, tr state.Transition, opts ...state.ProposeOption) (state.WriteResult, error) {
	o := state.NewProposeOptions(opts)
	if err := s.gate(ctx, "propose "+tr.String()); err != nil {
		return state.WriteResult{}, err
	}
	if err := state.ValidateTransition(key, incarnationID, tr); err != nil {
		return state.WriteResult{}, fmt.Errorf("memory store propose %s %s: %w", tr, key, err)
	}
	return s.write(ctx, "propose "+tr.String(), key, func(time.Time) state.Decide {
		return state.Propose(incarnationID, seq, tr, o.MinSilence)
	})
}

// write runs state.Write over the store's slots with mu held, after
// expiring due leases at the clock's time.
func (s *Store) write(ctx context.Context, op string, key cluster.Key, decide func(now time.Time) state.Decide) (state.WriteResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return state.WriteResult{}, fmt.Errorf("memory store %s: %w", op, state.ErrClosed)
	}
	now := s.clock()
	s.sweepLocked(now)
	res, err := state.Write(ctx, lockedSlots{s: s, now: now}, key, maxAttempts, decide(now))
	if err != nil {
		return state.WriteResult{}, fmt.Errorf("memory store %s %s: %w", op, key, err)
	}
	return res, nil
}

// lockedSlots is the memory store's state.Slots: every read is fresh and
// every swap applies, because the whole write holds mu.
type lockedSlots struct {
	s   *Store
	now time.Time
}

func (l lockedSlots) Read(_ context.Context, key cluster.Key, _ bool) (state.Slot, error) {
	s := l.s
	cur := state.Slot{Revision: s.revTok, Fresh: true, Floor: s.gens[key]}
	if sl := s.slots[key]; sl != nil {
		cur.Record = sl.rec
		cur.Version = strconv.FormatUint(sl.modRev, 10)
	}
	return cur, nil
}

func (l lockedSlots) Swap(_ context.Context, key cluster.Key, cur state.Slot, ch state.Change) (state.Swapped, error) {
	s := l.s
	sl := s.slots[key]
	if version := slotVersion(sl); version != cur.Version {
		return state.Swapped{}, fmt.Errorf("memory store: slot %s moved from version %q to %q under mu", key, cur.Version, version)
	}
	if refused := l.renewedWithin(sl, cur, ch); refused != nil {
		return state.Swapped{Refused: refused}, nil
	}
	if ch.Renew && sl != nil {
		// The record stays; only its lease is renewed: no revision, no event.
		sl.expiresAt, sl.renewedAt = l.now.Add(ch.TTL), l.now
		heap.Fix(&s.expiry, sl.heapIdx)
		return state.Swapped{Applied: true, Renewed: true, Revision: s.revTok, Record: sl.rec.Clone()}, nil
	}
	if ch.Record == nil {
		s.deleteLocked(sl)
		s.appendLocked(state.Event{Type: state.EventDelete, Key: key})
		return state.Swapped{Applied: true, Revision: s.revTok}, nil
	}
	stored := ch.Record
	if ch.KeepLease && sl != nil && !sl.renewedAt.IsZero() && sl.renewedAt.UnixMilli() > stored.HeartbeatAt() {
		// A mark after renewals the record does not show: it carries the
		// last one as the last heartbeat (ch.Record is the caller's copy).
		stored.HeartbeatAtUnixMs = sl.renewedAt.UnixMilli()
	}
	s.gens[key] = max(s.gens[key], stored.Generation)
	switch {
	case sl == nil:
		sl = &slot{key: key, rec: stored, expiresAt: l.now.Add(ch.TTL)}
		s.slots[key] = sl
		heap.Push(&s.expiry, sl)
		v := s.clusters[key.ClusterID]
		if v == nil {
			v = &view{}
			s.clusters[key.ClusterID] = v
		}
		v.put(stored)
	default:
		sl.rec = stored
		sl.renewedAt = time.Time{} // a new version: it shows itself
		if !ch.KeepLease {
			sl.expiresAt = l.now.Add(ch.TTL)
			heap.Fix(&s.expiry, sl.heapIdx)
		}
		s.clusters[key.ClusterID].put(stored)
	}
	s.appendLocked(state.Event{Type: state.EventPut, Key: key, Record: stored})
	sl.modRev = s.rev
	return state.Swapped{Applied: true, Revision: s.revTok, Record: stored.Clone()}, nil
}

// renewedWithin is the refusal of a transition (ch.MinSilence) on a slot
// whose lease was renewed without a write less than MinSilence before, or
// nil. A slot not renewed since its record was written needs no check:
// its version shows its last heartbeat, as it does to the proposer.
func (l lockedSlots) renewedWithin(sl *slot, cur state.Slot, ch state.Change) *state.WriteResult {
	if sl == nil || sl.renewedAt.IsZero() || ch.MinSilence <= 0 || (ch.Record != nil && !ch.KeepLease) {
		return nil
	}
	if ago := l.now.Sub(sl.renewedAt); ago < ch.MinSilence {
		return &state.WriteResult{Outcome: state.OutcomeStale, Revision: cur.Revision, Record: sl.rec.Clone(), Renewed: true, RenewedAgo: max(ago, 0)}
	}
	return nil
}

func slotVersion(sl *slot) string {
	if sl == nil {
		return ""
	}
	return strconv.FormatUint(sl.modRev, 10)
}

// pendingLocked reports whether the store must take mu exclusively before
// answering at now: a lease is due, or the clock stepped past the stall
// threshold and the deadlines must move first. Otherwise it records now as
// observed. mu must be held (shared is enough).
func (s *Store) pendingLocked(now time.Time) bool {
	if s.stallLimit > 0 {
		n := now.UnixNano()
		last := s.observed.Load()
		if n-last > int64(s.stallLimit) {
			return true
		}
		for n > last && !s.observed.CompareAndSwap(last, n) {
			last = s.observed.Load()
		}
	}
	return s.dueLocked(now)
}

// observeLocked records now as observed. When the clock stepped further
// than the stall threshold since the last observation, only the threshold
// counts: every lease deadline moves out by the rest, time the store did
// not observe (its process stopped, its machine paused). mu must be held
// exclusively.
func (s *Store) observeLocked(now time.Time) {
	if s.stallLimit <= 0 {
		return
	}
	n := now.UnixNano()
	last := s.observed.Load()
	if n <= last {
		return
	}
	s.observed.Store(n)
	gap := time.Duration(n - last)
	if gap <= s.stallLimit {
		return
	}
	unobserved := gap - s.stallLimit
	for _, sl := range s.expiry {
		sl.expiresAt = sl.expiresAt.Add(unobserved) // the same shift for all: the heap stays ordered
	}
	s.log.Info("memory store clock stepped past the stall threshold; lease deadlines extended by the unobserved time",
		"step", gap, "threshold", s.stallLimit, "extended", unobserved, "leases", len(s.expiry))
}
