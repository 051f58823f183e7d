package etcd

import (
	"context"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

// slotView is what the store believes one slot holds, and as of which
// revision. A view from the watch cache or from an earlier operation may be
// stale; every write compares its mod revision in the transaction, so a
// stale view costs a round trip, never correctness.
type slotView struct {
	stored
	asOf   int64 // the slot held this at revision asOf
	fresh  bool  // read from etcd during the current operation
	cached bool  // from the watch cache, which sees every writer's changes
}

// leaseKey names the lease of one incarnation in one slot.
type leaseKey struct{ slot, incarnation string }

// leaseRef is a lease this store granted or learned from a stored record.
type leaseRef struct {
	id   int64
	want int64 // TTL seconds it stands for; -1: unknown, replace it on the next accepted update
	ttl  int64 // TTL seconds etcd granted
}

// ttlSeconds rounds a lease TTL up to etcd's whole seconds.
func ttlSeconds(d time.Duration) int64 {
	return int64((d + time.Second - 1) / time.Second)
}

// UpsertNode applies rec under cluster.Order through state.Write over the
// store's slots (etcdSlots), one compare-and-swap transaction per round:
// compare the slot's mod revision with the view the decision was made on,
// put the stamped record attached to the incarnation's lease, or else read
// the slot back and decide again. See the package documentation for the
// lease rules and the round-trip budget.
func (s *Store) UpsertNode(ctx context.Context, rec *cluster.Record, leaseTTL time.Duration, opts ...state.UpsertOption) (state.WriteResult, error) {
	o := state.NewUpsertOptions(opts)
	if rec == nil {
		return state.WriteResult{}, fmt.Errorf("etcd upsert: %w: record is nil", state.ErrInvalidRecord)
	}
	if leaseTTL <= 0 {
		return state.WriteResult{}, fmt.Errorf("etcd upsert %s: %w: leaseTTL %s: must be positive", rec.Key(), state.ErrInvalidRecord, leaseTTL)
	}
	if err := state.ValidateKey(rec.Key()); err != nil {
		return state.WriteResult{}, fmt.Errorf("etcd upsert: %w", err)
	}
	ctx, cancel, ci, err := s.begin(ctx, "upsert")
	if err != nil {
		return state.WriteResult{}, err
	}
	defer cancel()
	key := rec.Key()
	sl := s.slots(key)
	sl.lk = leaseKey{slot: sl.slotKey, incarnation: rec.IncarnationID}
	sl.want = ttlSeconds(leaseTTL)
	defer s.leases.releaseUnused(ctx, sl.lk, &sl.w)
	// The writer's stamp: shown raw by etcdctl, feeds others' skew estimates.
	res, err := state.Write(ctx, sl, key, maxAttempts, state.Upsert(rec, o.Update, leaseTTL, o.StatusEvery, s.clock))
	if err != nil {
		return state.WriteResult{}, s.mapError("upsert "+key.String(), err, ci)
	}
	return res, nil
}

// RemoveNode deletes the record in slot key when its incarnation is
// incarnationID, in a transaction that compares the mod revision of the
// record whose incarnation it checked. The record's lease is left to
// expire (see etcdSlots.remove).
func (s *Store) RemoveNode(ctx context.Context, key cluster.Key, incarnationID string) (state.WriteResult, error) {
	if err := state.ValidateKey(key); err != nil {
		return state.WriteResult{}, fmt.Errorf("etcd remove: %w", err)
	}
	if incarnationID == "" {
		return state.WriteResult{}, fmt.Errorf("etcd remove %s: %w: incarnationId \"\": must not be empty", key, state.ErrInvalidRecord)
	}
	return s.writeSlot(ctx, "remove", key, state.Remove(incarnationID))
}

// ProposeTransition applies tr to slot key while it holds incarnationID at
// seq: a late mark is a transaction comparing the key's mod revision with
// a put that keeps the key's lease (clientv3.WithIgnoreLease: neither
// refreshed nor extended), an expiry one with a delete.
//
// With MinSilence, the transition applies only when etcd's lessor says the
// record's lease went unrenewed that long (etcdSlots.silence): heartbeats
// that only renew the lease change no version a coordinator can watch.
func (s *Store) ProposeTransition(ctx context.Context, key cluster.Key, incarnationID string, seq uint64, tr state.Transition, opts ...state.ProposeOption) (state.WriteResult, error) {
	o := state.NewProposeOptions(opts)
	if err := state.ValidateTransition(key, incarnationID, tr); err != nil {
		return state.WriteResult{}, fmt.Errorf("etcd propose %s: %w", tr, err)
	}
	res, err := s.writeSlot(ctx, "propose "+tr.String(), key, state.Propose(incarnationID, seq, tr, o.MinSilence))
	s.stats.transitions.Note(tr, res.Outcome, err)
	return res, err
}

// writeSlot runs state.Write for a write that needs no lease of its own.
func (s *Store) writeSlot(ctx context.Context, op string, key cluster.Key, decide state.Decide) (state.WriteResult, error) {
	ctx, cancel, ci, err := s.begin(ctx, op)
	if err != nil {
		return state.WriteResult{}, err
	}
	defer cancel()
	res, err := state.Write(ctx, s.slots(key), key, maxAttempts, decide)
	if err != nil {
		return state.WriteResult{}, s.mapError(op+" "+key.String(), err, ci)
	}
	return res, nil
}

// writeLeases tracks the lease work of one UpsertNode call, so that a
// retry round neither refreshes a lease twice nor grants a second one.
type writeLeases struct {
	granted    int64    // granted in this call and not yet attached to the record
	grantedRef leaseRef // what granted stands for
	kept       int64    // refreshed in this call
}

func (w *writeLeases) used(id int64) {
	if w.granted == id {
		w.granted = 0
	}
}

func (w *writeLeases) drop(id int64) {
	if w.granted == id {
		w.granted = 0
	}
	if w.kept == id {
		w.kept = 0
	}
}

// leasePlan is how an accepted update gets its lease: refresh candidate,
// or grant a new one.
type leasePlan struct {
	candidate int64
	grant     bool
}

// read returns the slot's current state from a linearizable read.
func (s *Store) read(ctx context.Context, slotKey string, key cluster.Key) (slotView, error) {
	resp, err := s.client.Get(ctx, slotKey)
	if err != nil {
		return slotView{}, err
	}
	v := s.viewFromKVs(key, resp.Kvs, resp.Header.Revision)
	s.remember(slotKey, v)
	return v, nil
}

// viewFromKVs makes a fresh view from the result of reading one key at
// revision rev.
func (s *Store) viewFromKVs(key cluster.Key, kvs []*mvccpb.KeyValue, rev int64) slotView {
	if len(kvs) == 0 {
		return slotView{asOf: rev, fresh: true}
	}
	return slotView{stored: s.decodeKV(kvs[0], key, false), asOf: rev, fresh: true}
}

// view returns the newest view of a slot the store holds without asking
// etcd: the watch cache's (authoritative up to its revision, absence
// included) or this store's own last write or read, whichever is newer.
func (s *Store) view(slotKey string) (slotView, bool) {
	s.mu.RLock()
	h, hok := s.hints[slotKey]
	s.mu.RUnlock()
	if s.cache != nil {
		if cv, ok := s.cache.lookup(slotKey); ok && (!hok || cv.asOf >= h.asOf) {
			cv.cached = true
			return cv, true
		}
	}
	h.fresh = false
	return h, hok
}

// remember records a view of a slot unless a newer one is known.
func (s *Store) remember(slotKey string, v slotView) {
	v.fresh, v.cached = false, false
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.hints[slotKey]; ok && old.asOf > v.asOf {
		return
	}
	if _, ok := s.hints[slotKey]; !ok && len(s.hints) >= maxHints {
		for k := range s.hints { // evict an arbitrary entry
			delete(s.hints, k)
			break
		}
	}
	s.hints[slotKey] = v
}
