package etcd

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

// minRenewTTL is the shortest lease, in seconds, whose heartbeats may
// renew it without writing the record. etcd reports a lease's remaining
// TTL in whole seconds, truncated, so a transition's silence check
// (silence) is exact to a second: with leases this long, that second is
// a small part of unhealthy-after. Shorter leases (test timings, or a
// TTL etcd raised to its floor) are refreshed by full writes, whose
// versions every coordinator sees, and are never silence-checked.
const minRenewTTL = 5

// renewable reports whether an accepted heartbeat decided on v may renew
// v's lease instead of writing the record: the record's lease is known and
// long enough, and this store holds it for the requested TTL (no re-grant
// is due). The renewal itself needs v current (trusted). A renewal
// on a view the cache has not caught up with yet answers accepted to a
// heartbeat a moment after its slot moved on (a restart, a late mark); the
// process's next full write, at most a status interval later, is refused
// or clears the mark, and placement, read from the store, never depends
// on the answer.
func (e *etcdSlots) renewable(v slotView) bool {
	if v.rec == nil || v.lease == 0 || e.want < minRenewTTL {
		return false
	}
	plan := e.s.leases.plan(e.lk, cluster.DecisionAdvance, v, e.want, &e.w)
	return !plan.grant && plan.candidate == v.lease
}

// trusted reports whether v is current enough to renew on: read in this
// call, or from the watch cache, which sees every coordinator's writes
// within milliseconds.
func trusted(v slotView) bool { return v.fresh || v.cached }

// renew refreshes the lease of the stored record v with one keepalive and
// writes nothing: no revision, nothing in etcd's history. A lease that
// is gone took the record with it, and a view that is not trusted is
// confirmed first: either way the round starts over from a read.
func (e *etcdSlots) renew(ctx context.Context, v slotView) (state.Swapped, error) {
	s := e.s
	if !trusted(v) {
		return state.Swapped{}, nil
	}
	ttl, err := s.leases.keepAlive(ctx, v.lease)
	if err != nil {
		return state.Swapped{}, err
	}
	if ttl <= 0 {
		s.leases.forget(e.lk, v.lease)
		return state.Swapped{}, nil
	}
	e.w.kept = v.lease
	s.leases.learn(e.lk, v.lease, ttl, e.want)
	s.stats.renewals.Add(1)
	return state.Swapped{Applied: true, Renewed: true, Revision: revision(v.asOf), Record: v.rec.Clone()}, nil
}

// silence is a transition's check of ch.MinSilence: the time since the
// lease of v was last renewed, by etcd's own clock (the leader's lessor),
// read with one LeaseTimeToLive. It returns the refusal when the lease
// was renewed less than MinSilence before, or nil to go on. The silence
// counted is a lower bound (etcd truncates the remaining TTL to whole
// seconds), so a live process is never marked, and a silent one is marked
// at most a second after MinSilence. Leases shorter than minRenewTTL are
// never renewed without a write and are not checked.
//
// When it goes on, silentFor is the upper bound of the same silence (0
// when not checked): the mark it allows carries the renewal as the last
// heartbeat (withHeartbeat), so the record never says the process was
// heard later than it was.
func (e *etcdSlots) silence(ctx context.Context, cur state.Slot, ch state.Change, v slotView) (refused *state.WriteResult, silentFor time.Duration, err error) {
	if ch.MinSilence <= 0 || v.lease == 0 || v.rec == nil {
		return nil, 0, nil
	}
	e.s.stats.ttlChecks.Add(1)
	resp, err := e.s.client.TimeToLive(ctx, clientv3.LeaseID(v.lease))
	if err != nil {
		return nil, 0, err
	}
	if resp.GrantedTTL < minRenewTTL || resp.TTL <= 0 {
		return nil, 0, nil // never renewed silently, or gone (and its record with it)
	}
	ago := time.Duration(max(resp.GrantedTTL-resp.TTL-1, 0)) * time.Second
	if ago >= ch.MinSilence {
		return nil, time.Duration(resp.GrantedTTL-resp.TTL) * time.Second, nil
	}
	return &state.WriteResult{Outcome: state.OutcomeStale, Revision: cur.Revision, Record: v.rec.Clone(), Renewed: true, RenewedAgo: ago}, 0, nil
}

// withHeartbeat returns ch with its record's HeartbeatAtUnixMs raised to
// silentFor before now: the lease's last renewal, a heartbeat the record
// does not show. ch is returned as it is when nothing is to raise.
func withHeartbeat(ch state.Change, silentFor time.Duration, now time.Time) (state.Change, error) {
	if silentFor <= 0 || ch.Record == nil || !ch.KeepLease {
		return ch, nil
	}
	at := now.Add(-silentFor).UnixMilli()
	if at <= ch.Record.HeartbeatAt() {
		return ch, nil
	}
	rec := ch.Record.Clone()
	rec.HeartbeatAtUnixMs = at
	enc, err := state.EncodeRecord(rec)
	if err != nil {
		return ch, err
	}
	ch.Record, ch.Encoded = rec, enc
	return ch, nil
}
