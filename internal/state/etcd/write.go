package etcd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

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
	defer s.releaseUnused(ctx, sl.lk, &sl.w)
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

// planLease decides where an accepted update of decision d gets its lease.
//
//   - Advance keeps the stored record's lease (kv.Lease, so a store that
//     never wrote this slot learns it too) and refreshes it with one
//     keepalive; only a lease that is gone or was granted for another TTL
//     is replaced.
//   - Insert and Restart use the incarnation's lease: one this store
//     already holds for it (refreshed), else a new grant. The grant is the
//     only Raft write of a lease, once per incarnation.
func (s *Store) planLease(lk leaseKey, d cluster.Decision, v slotView, want int64, w *writeLeases) leasePlan {
	if w.granted != 0 {
		return leasePlan{candidate: w.granted}
	}
	s.mu.RLock()
	ref, ok := s.leases[lk]
	s.mu.RUnlock()
	switch {
	case d == cluster.DecisionAdvance && v.lease != 0:
		if ok && ref.id == v.lease && ref.want != want {
			return leasePlan{grant: true} // the TTL changed
		}
		return leasePlan{candidate: v.lease}
	case ok && ref.want == want:
		return leasePlan{candidate: ref.id}
	}
	return leasePlan{grant: true}
}

// leaseFor carries out plan and returns the lease to attach.
func (s *Store) leaseFor(ctx context.Context, lk leaseKey, plan leasePlan, want int64, w *writeLeases) (int64, error) {
	if plan.grant {
		return s.grant(ctx, lk, want, w)
	}
	candidate := plan.candidate
	if w.kept == candidate {
		return candidate, nil
	}
	ttl, err := s.keepAlive(ctx, candidate)
	if err != nil {
		return 0, err
	}
	if ttl <= 0 {
		s.forgetLease(lk, candidate)
		return s.grant(ctx, lk, want, w)
	}
	w.kept = candidate
	s.learnLease(lk, candidate, ttl, want)
	return candidate, nil
}

// learnLease remembers lease id, which a keepalive just reported alive
// with ttl, as lk's lease unless it is already.
func (s *Store) learnLease(lk leaseKey, id, ttl, want int64) {
	s.mu.RLock()
	ref, ok := s.leases[lk]
	s.mu.RUnlock()
	if !ok || ref.id != id {
		// Granted by another store (or evicted here): learn it. When its TTL
		// does not match ours, the next accepted update replaces it.
		known := want
		if !s.ttlMatches(ttl, want) {
			known = -1
		}
		s.putLease(lk, leaseRef{id: id, want: known, ttl: ttl})
	}
}

// keepAliveResult is the answer to one keepalive.
type keepAliveResult struct {
	ttl int64
	err error
}

// keepAliveAsync refreshes lease id in the background; the result arrives
// on the returned channel, which the caller must receive from before it
// returns (the goroutine is part of its call).
func (s *Store) keepAliveAsync(ctx context.Context, id int64) <-chan keepAliveResult {
	ch := make(chan keepAliveResult, 1)
	go func() {
		ttl, err := s.keepAlive(ctx, id)
		ch <- keepAliveResult{ttl: ttl, err: err}
	}()
	return ch
}

// ttlMatches reports whether a lease etcd reports with TTL granted was
// granted for want seconds: etcd raises TTLs below its floor.
func (s *Store) ttlMatches(granted, want int64) bool {
	if granted == want {
		return true
	}
	floor := s.minTTL.Load()
	return granted > want && floor != 0 && granted == floor
}

func (s *Store) grant(ctx context.Context, lk leaseKey, want int64, w *writeLeases) (int64, error) {
	s.stats.grants.Add(1)
	resp, err := s.client.Grant(ctx, want)
	if err != nil {
		return 0, err
	}
	if resp.TTL > want {
		s.minTTL.Store(resp.TTL)
	}
	id := int64(resp.ID)
	// Published (putLease) only once a record holds it: a lease another
	// call could pick up while this one might still revoke it as unused
	// would take that call's record with it.
	w.granted, w.grantedRef = id, leaseRef{id: id, want: want, ttl: resp.TTL}
	w.kept = id
	return id, nil
}

func (s *Store) keepAlive(ctx context.Context, id int64) (int64, error) {
	s.stats.keepAlives.Add(1)
	return s.keeper.keepAlive(ctx, id)
}

// revoke revokes a lease that no record uses any more, best effort: a
// failure leaves it to expire on its own.
func (s *Store) revoke(ctx context.Context, lk leaseKey, id int64) {
	s.forgetLease(lk, id)
	s.stats.revokes.Add(1)
	if _, err := s.client.Revoke(ctx, clientv3.LeaseID(id)); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		s.log.Debug("lease revoke failed; it will expire", "lease", id, "err", err)
	}
}

// releaseUnused revokes a lease granted during a call that did not use it
// (the decision changed on a retry, or the call failed).
func (s *Store) releaseUnused(ctx context.Context, lk leaseKey, w *writeLeases) {
	if w.granted == 0 {
		return
	}
	if ctx.Err() != nil {
		// The call's deadline is spent; give the revoke its own, short one.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
	}
	s.revoke(ctx, lk, w.granted)
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

func (s *Store) putLease(lk leaseKey, ref leaseRef) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.leases[lk]; !ok && len(s.leases) >= maxLeases {
		for k := range s.leases {
			delete(s.leases, k)
			break
		}
	}
	s.leases[lk] = ref
}

// forgetLease drops lk's entry if it still names lease id.
func (s *Store) forgetLease(lk leaseKey, id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ref, ok := s.leases[lk]; ok && ref.id == id {
		delete(s.leases, lk)
	}
}
