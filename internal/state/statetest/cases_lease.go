package statetest

import (
	"testing"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

// requireLeaseExpiry skips a case about the backend's own lease expiry on
// a backend that has none (Harness.LeaseExpiry).
func (e *env) requireLeaseExpiry() {
	e.t.Helper()
	if !e.h.LeaseExpiry {
		e.t.Skip("the backend has no lease expiry of its own: records expire only by TransitionExpire")
	}
}

// runLease checks per-record leases. Times are in fractions of h.LeaseTTL;
// a record may outlive its lease by the backend's expiry lag, but by less
// than half a lease.
func runLease(t *testing.T, newHarness Factory) {
	t.Run("VisibleUntilExpiryThenDeleted", func(t *testing.T) {
		e := setup(t, newHarness)
		e.requireLeaseExpiry()
		ttl := e.h.LeaseTTL
		rec := e.rec(cluster.RoleWorker, "w1", "inc-a", 4)
		res := e.mustUpsert(rec, ttl, cluster.DecisionInsert, rec)
		w := e.watch(e.cluster, res.Revision)

		// Older than any unhealthy threshold, but classifying it is the
		// caller's job: the store keeps it, unchanged, until the lease ends.
		e.h.Advance(ttl / 2)
		got := mustFind(t, e.snapshot(e.cluster), rec)
		if got.UpdatedAtUnixMs != res.Record.UpdatedAtUnixMs || got.Health != cluster.HealthHealthy {
			t.Fatalf("the store changed an ageing record: %s", describe(got))
		}

		e.h.Advance(ttl / 2)
		e.eventually("record gone from Snapshot after its lease", ttl/10, 10, func() bool {
			return find(t, e.snapshot(e.cluster), rec.Key()) == nil
		})
		// Watchers see the expiry as a delete.
		w.expect(wantEvent{typ: state.EventDelete, key: rec.Key()})

		// With the record gone, the same incarnation inserts anew.
		next := e.rec(cluster.RoleWorker, "w1", "inc-a", 5)
		e.mustUpsert(next, longTTL, cluster.DecisionInsert, next)
		mustFind(t, e.snapshot(e.cluster), next)
	})

	t.Run("AcceptedHeartbeatRefreshesLease", func(t *testing.T) {
		e := setup(t, newHarness)
		e.requireLeaseExpiry()
		ttl := e.h.LeaseTTL
		adv := e.rec(cluster.RoleWorker, "advance", "inc-a", 1)
		rst := e.rec(cluster.RoleWorker, "restart", "inc-a", 1)
		e.mustUpsert(adv, ttl, cluster.DecisionInsert, adv)
		e.mustUpsert(rst, ttl, cluster.DecisionInsert, rst)

		e.h.Advance(ttl / 2)
		adv2 := e.rec(cluster.RoleWorker, "advance", "inc-a", 2)
		rst2 := e.rec(cluster.RoleWorker, "restart", "inc-b", 0)
		e.mustUpsert(adv2, ttl, cluster.DecisionAdvance, adv2)
		e.mustUpsert(rst2, ttl, cluster.DecisionRestart, rst2)

		// 1.25 leases after the first write, 0.75 after the refresh.
		e.h.Advance(ttl * 3 / 4)
		snap := e.snapshot(e.cluster)
		mustFind(t, snap, adv2)
		mustFind(t, snap, rst2)

		e.h.Advance(ttl / 4)
		e.eventually("refreshed records gone after their new lease", ttl/10, 10, func() bool {
			return len(e.snapshot(e.cluster).Records) == 0
		})
	})

	t.Run("DuplicateAndStaleDoNotRefreshLease", func(t *testing.T) {
		e := setup(t, newHarness)
		e.requireLeaseExpiry()
		ttl := e.h.LeaseTTL
		rec := e.rec(cluster.RoleWorker, "w1", "inc-a", 5)
		e.mustUpsert(rec, ttl, cluster.DecisionInsert, rec)

		e.h.Advance(ttl / 2)
		e.mustUpsert(e.rec(cluster.RoleWorker, "w1", "inc-a", 5), ttl, cluster.DecisionDuplicate, rec)
		e.mustUpsert(e.rec(cluster.RoleWorker, "w1", "inc-a", 4), ttl, cluster.DecisionStale, rec)

		// Had either write refreshed the lease, the record would live until
		// 1.5 leases after the first write; it must be gone before that.
		e.h.Advance(ttl / 2)
		e.eventually("record gone one lease after its last accepted write", ttl/10, 4, func() bool {
			return find(t, e.snapshot(e.cluster), rec.Key()) == nil
		})
	})

	t.Run("LeaseIsPerRecord", func(t *testing.T) {
		e := setup(t, newHarness)
		e.requireLeaseExpiry()
		ttl := e.h.LeaseTTL
		short := e.rec(cluster.RoleWorker, "short", "inc-a", 1)
		long := e.rec(cluster.RoleWorker, "long", "inc-a", 1)
		e.mustUpsert(short, ttl, cluster.DecisionInsert, short)
		e.mustUpsert(long, 4*ttl, cluster.DecisionInsert, long)

		e.h.Advance(ttl)
		var snap *state.Snapshot
		e.eventually("short-lease record gone", ttl/10, 10, func() bool {
			snap = e.snapshot(e.cluster)
			return find(t, snap, short.Key()) == nil
		})
		mustFind(t, snap, long)
	})
}
