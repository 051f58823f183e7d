package etcd

import (
	"context"
	"errors"
	"strconv"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

// etcdSlots is the store's state.Slots for one write: a slot is read from
// the views the store holds (watch cache, its own last write or read) or
// with a linearizable get, and swapped with a transaction comparing its mod
// revision. An upsert's put goes through the group committer with the
// lease the lease plan picks; the lease work of the whole call is tracked
// in w, so a retry round neither refreshes a lease twice nor grants a
// second one.
type etcdSlots struct {
	s       *Store
	slotKey string
	// lk and want are set for upserts: the incarnation's lease and its TTL.
	lk   leaseKey
	want int64
	w    writeLeases
}

func (s *Store) slots(key cluster.Key) *etcdSlots {
	return &etcdSlots{s: s, slotKey: s.keys.slot(key)}
}

func (e *etcdSlots) Read(ctx context.Context, key cluster.Key, fresh bool) (state.Slot, error) {
	if !fresh {
		if v, ok := e.s.view(e.slotKey); ok {
			return slotOf(v), nil
		}
	}
	v, err := e.s.read(ctx, e.slotKey, key)
	if err != nil {
		return state.Slot{}, err
	}
	return slotOf(v), nil
}

// slotOf is v as the ordered write sees it. A registration's generation is
// above the revision of the read it was decided on: every generation
// issued for the slot before is at most the revision that wrote it, so
// generations grow strictly per node ID.
func slotOf(v slotView) state.Slot {
	return state.Slot{
		Record:   v.rec,
		Bad:      v.bad,
		Version:  strconv.FormatInt(v.modRev, 10),
		Token:    v,
		Revision: revision(v.asOf),
		Fresh:    v.fresh,
		Floor:    uint64(max(v.asOf, 0)),
	}
}

func (e *etcdSlots) Swap(ctx context.Context, key cluster.Key, cur state.Slot, ch state.Change) (state.Swapped, error) {
	v, _ := cur.Token.(slotView)
	refused, silentFor, err := e.silence(ctx, cur, ch, v)
	if refused != nil || err != nil {
		return state.Swapped{Refused: refused}, err
	}
	if ch, err = withHeartbeat(ch, silentFor, e.s.clock()); err != nil {
		return state.Swapped{}, err
	}
	switch {
	case ch.Renew && e.renewable(v):
		return e.renew(ctx, v)
	case ch.Record == nil:
		return e.remove(ctx, key, v)
	case ch.KeepLease:
		return e.mark(ctx, key, ch, v)
	}
	return e.put(ctx, key, ch, v)
}

// conflict is a lost compare: the slot as the failed transaction read it.
func (e *etcdSlots) conflict(key cluster.Key, v slotView) (state.Swapped, error) {
	e.s.stats.conflicts.Add(1)
	e.s.remember(e.slotKey, v)
	cur := slotOf(v)
	return state.Swapped{Current: &cur}, nil
}

// remove deletes the slot if it still holds v. It does not revoke v's
// lease: the same incarnation may register again at once (a process whose
// record a coordinator expired does), through another store that still
// holds that lease and attaches the new record to it, and a revoke that
// lands after that put would delete the accepted record with the lease.
// The lease, holding no key, expires within its TTL.
func (e *etcdSlots) remove(ctx context.Context, key cluster.Key, v slotView) (state.Swapped, error) {
	s := e.s
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(e.slotKey), "=", v.modRev)).
		Then(clientv3.OpDelete(e.slotKey)).
		Else(clientv3.OpGet(e.slotKey)).
		Commit()
	if err != nil {
		return state.Swapped{}, err
	}
	if !resp.Succeeded {
		return e.conflict(key, s.viewFromKVs(key, resp.Responses[0].GetResponseRange().GetKvs(), resp.Header.Revision))
	}
	rev := resp.Header.Revision
	s.remember(e.slotKey, slotView{asOf: rev})
	return state.Swapped{Applied: true, Revision: revision(rev)}, nil
}

// mark puts ch's record if the slot still holds v, keeping the key's lease
// as it is: neither refreshed nor extended.
func (e *etcdSlots) mark(ctx context.Context, key cluster.Key, ch state.Change, v slotView) (state.Swapped, error) {
	s := e.s
	value := string(ch.Encoded)
	s.memo.put(&memoEntry{slot: e.slotKey, val: value, writerMs: ch.Record.UpdatedAtUnixMs, rec: ch.Record})
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(e.slotKey), "=", v.modRev)).
		Then(clientv3.OpPut(e.slotKey, value, clientv3.WithIgnoreLease())).
		Else(clientv3.OpGet(e.slotKey)).
		Commit()
	if err != nil {
		return state.Swapped{}, err
	}
	if !resp.Succeeded {
		return e.conflict(key, s.viewFromKVs(key, resp.Responses[0].GetResponseRange().GetKvs(), resp.Header.Revision))
	}
	return e.landed(ch.Record, ch.Record.UpdatedAtUnixMs, resp.Header.Revision, v.lease), nil
}

// landed records a put of rec at rev on lease: the memo and the view hold
// the version as this store observed it land, which it returns.
func (e *etcdSlots) landed(rec *cluster.Record, writerMs, rev, lease int64) state.Swapped {
	s := e.s
	// This store saw its own write land: from now (or from when its watch
	// event arrived, if that came first) the record ages here.
	written := rec
	if m := s.memo.get(e.slotKey, rev, nil); m != nil {
		written = m.rec // a watch delivered it first and stamped it
	}
	if observed := s.stampObserved(e.slotKey, rev, written, writerMs, false, true); observed != written {
		written = observed
		s.memo.put(&memoEntry{slot: e.slotKey, modRev: rev, writerMs: writerMs, rec: written})
	}
	s.remember(e.slotKey, slotView{stored: stored{rec: written, modRev: rev, lease: lease}, asOf: rev})
	return state.Swapped{Applied: true, Revision: revision(rev), Record: written.Clone()}
}

// put writes an upsert's record attached to the lease the plan picks, with
// the group committer. A round whose lease turned out to be gone, or that
// needs a grant on a view that is not fresh, asks for a fresh read
// (Swapped.Current nil).
func (e *etcdSlots) put(ctx context.Context, key cluster.Key, ch state.Change, v slotView) (state.Swapped, error) {
	s := e.s
	plan := s.leases.plan(e.lk, ch.Decision, v, e.want, &e.w)
	if plan.grant && !v.fresh {
		// A grant is a Raft write: confirm the decision with a read first
		// rather than waste one on a stale view.
		return state.Swapped{}, nil
	}
	lease, refreshed, err := e.lease(ctx, plan)
	if err != nil {
		return state.Swapped{}, err
	}
	// The watches may deliver this version before the answer comes: they
	// take it from the memo by its value instead of decoding it.
	value := string(ch.Encoded)
	writerMs := ch.Record.UpdatedAtUnixMs
	s.memo.put(&memoEntry{slot: e.slotKey, val: value, writerMs: writerMs, rec: ch.Record})
	res := s.commit.commit(ctx, &commitOp{key: e.slotKey, modRev: v.modRev, value: value, lease: lease})
	if refreshed != nil {
		if gone, err := e.refreshed(<-refreshed, lease); gone || err != nil {
			return state.Swapped{}, err
		}
	}
	if res.err != nil {
		if errors.Is(res.err, rpctypes.ErrLeaseNotFound) {
			// The lease expired or was revoked since it was chosen; so did
			// any record attached to it. Start over from a read.
			s.leases.forget(e.lk, lease)
			e.w.drop(lease)
			return state.Swapped{}, nil
		}
		return state.Swapped{}, res.err
	}
	if !res.ok {
		return e.conflict(key, s.viewFromKVs(key, res.kvs, res.rev))
	}
	sw := e.landed(ch.Record, writerMs, res.rev, lease)
	if lease == e.w.granted {
		s.leases.put(e.lk, e.w.grantedRef)
	}
	e.w.used(lease)
	if v.lease != 0 && v.lease != lease && v.rec != nil {
		// The record moved to a new lease (restart or TTL change). The old
		// one holds no key any more; it is left to expire rather than
		// revoked, for the reason remove gives: the old incarnation may
		// take an emptied slot again on it.
		s.leases.forget(leaseKey{slot: e.slotKey, incarnation: v.rec.IncarnationID}, v.lease)
	}
	return sw, nil
}

// lease carries out plan: granted first when the plan says so; otherwise
// its keepalive goes out beside the transaction, not before it (a put on a
// lease that is gone fails, so the outcome is the same), and its answer
// arrives on refreshed.
func (e *etcdSlots) lease(ctx context.Context, plan leasePlan) (lease int64, refreshed <-chan keepAliveResult, err error) {
	if !plan.grant && e.w.kept != plan.candidate {
		return plan.candidate, e.s.leases.keepAliveAsync(ctx, plan.candidate), nil
	}
	lease, err = e.s.leases.leaseFor(ctx, e.lk, plan, e.want, &e.w)
	return lease, nil, err
}

// refreshed takes the answer of the keepalive sent beside the put. gone
// reports that the lease had expired: the put failed, or its key went with
// the lease, and the round starts over from a read (the decision may now be
// an insert, with a new lease).
func (e *etcdSlots) refreshed(ka keepAliveResult, lease int64) (gone bool, err error) {
	if ka.err != nil {
		return true, ka.err
	}
	if ka.ttl <= 0 {
		e.s.leases.forget(e.lk, lease)
		return true, nil
	}
	e.w.kept = lease
	e.s.leases.learn(e.lk, lease, ka.ttl, e.want)
	return false, nil
}
