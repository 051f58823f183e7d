package etcd

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/talonhq/talon/internal/cluster"
)

// leaseBook is the incarnations' leases this store granted or learned
// from stored records, and the lease requests of a write: grant, refresh
// (through the keeper), revoke. It holds only what that needs: the conn,
// the keeper, the lease counters and its table, under its own lock.
type leaseBook struct {
	c      *conn
	keeper *keeper
	stats  *statsCounters // grants, revokes, keepAlives
	log    *slog.Logger

	// minTTL is the smallest lease TTL etcd has granted when asked for
	// less (its floor), 0 until seen; it tells a lease granted elsewhere for
	// a short TTL from one granted for a different TTL.
	minTTL atomic.Int64

	// mu guards m. It is never held across a request, nor together with
	// any other lock.
	mu sync.RWMutex
	m  map[leaseKey]leaseRef // slot+incarnation -> the incarnation's lease
}

func newLeaseBook(c *conn, k *keeper, stats *statsCounters, log *slog.Logger) *leaseBook {
	return &leaseBook{c: c, keeper: k, stats: stats, log: log, m: make(map[leaseKey]leaseRef)}
}

// plan decides where an accepted update of decision d gets its lease.
//
//   - Advance keeps the stored record's lease (kv.Lease, so a store that
//     never wrote this slot learns it too) and refreshes it with one
//     keepalive; only a lease that is gone or was granted for another TTL
//     is replaced.
//   - Insert and Restart use the incarnation's lease: one this store
//     already holds for it (refreshed), else a new grant. The grant is the
//     only Raft write of a lease, once per incarnation.
func (b *leaseBook) plan(lk leaseKey, d cluster.Decision, v slotView, want int64, w *writeLeases) leasePlan {
	if w.granted != 0 {
		return leasePlan{candidate: w.granted}
	}
	b.mu.RLock()
	ref, ok := b.m[lk]
	b.mu.RUnlock()
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
func (b *leaseBook) leaseFor(ctx context.Context, lk leaseKey, plan leasePlan, want int64, w *writeLeases) (int64, error) {
	if plan.grant {
		return b.grant(ctx, lk, want, w)
	}
	candidate := plan.candidate
	if w.kept == candidate {
		return candidate, nil
	}
	ttl, err := b.keepAlive(ctx, candidate)
	if err != nil {
		return 0, err
	}
	if ttl <= 0 {
		b.forget(lk, candidate)
		return b.grant(ctx, lk, want, w)
	}
	w.kept = candidate
	b.learn(lk, candidate, ttl, want)
	return candidate, nil
}

// learn remembers lease id, which a keepalive just reported alive
// with ttl, as lk's lease unless it is already.
func (b *leaseBook) learn(lk leaseKey, id, ttl, want int64) {
	b.mu.RLock()
	ref, ok := b.m[lk]
	b.mu.RUnlock()
	if !ok || ref.id != id {
		// Granted by another store (or evicted here): learn it. When its TTL
		// does not match ours, the next accepted update replaces it.
		known := want
		if !b.ttlMatches(ttl, want) {
			known = -1
		}
		b.put(lk, leaseRef{id: id, want: known, ttl: ttl})
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
func (b *leaseBook) keepAliveAsync(ctx context.Context, id int64) <-chan keepAliveResult {
	ch := make(chan keepAliveResult, 1)
	go func() {
		ttl, err := b.keepAlive(ctx, id)
		ch <- keepAliveResult{ttl: ttl, err: err}
	}()
	return ch
}

// ttlMatches reports whether a lease etcd reports with TTL granted was
// granted for want seconds: etcd raises TTLs below its floor.
func (b *leaseBook) ttlMatches(granted, want int64) bool {
	if granted == want {
		return true
	}
	floor := b.minTTL.Load()
	return granted > want && floor != 0 && granted == floor
}

func (b *leaseBook) grant(ctx context.Context, lk leaseKey, want int64, w *writeLeases) (int64, error) {
	b.stats.grants.Add(1)
	resp, err := b.c.client.Grant(ctx, want)
	if err != nil {
		return 0, err
	}
	if resp.TTL > want {
		b.minTTL.Store(resp.TTL)
	}
	id := int64(resp.ID)
	// Published (put) only once a record holds it: a lease another
	// call could pick up while this one might still revoke it as unused
	// would take that call's record with it.
	w.granted, w.grantedRef = id, leaseRef{id: id, want: want, ttl: resp.TTL}
	w.kept = id
	return id, nil
}

func (b *leaseBook) keepAlive(ctx context.Context, id int64) (int64, error) {
	b.stats.keepAlives.Add(1)
	return b.keeper.keepAlive(ctx, id)
}

// revoke revokes a lease that no record uses any more, best effort: a
// failure leaves it to expire on its own.
func (b *leaseBook) revoke(ctx context.Context, lk leaseKey, id int64) {
	b.forget(lk, id)
	b.stats.revokes.Add(1)
	if _, err := b.c.client.Revoke(ctx, clientv3.LeaseID(id)); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		b.log.Debug("lease revoke failed; it will expire", "lease", id, "err", err)
	}
}

// releaseUnused revokes a lease granted during a call that did not use it
// (the decision changed on a retry, or the call failed).
func (b *leaseBook) releaseUnused(ctx context.Context, lk leaseKey, w *writeLeases) {
	if w.granted == 0 {
		return
	}
	if ctx.Err() != nil {
		// The call's deadline is spent; give the revoke its own, short one.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
	}
	b.revoke(ctx, lk, w.granted)
}

func (b *leaseBook) put(lk leaseKey, ref leaseRef) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.m[lk]; !ok && len(b.m) >= maxLeases {
		for k := range b.m {
			delete(b.m, k)
			break
		}
	}
	b.m[lk] = ref
}

// forget drops lk's entry if it still names lease id.
func (b *leaseBook) forget(lk leaseKey, id int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ref, ok := b.m[lk]; ok && ref.id == id {
		delete(b.m, lk)
	}
}
