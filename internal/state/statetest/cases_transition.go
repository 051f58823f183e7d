package statetest

import (
	"sync"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

// propose calls ProposeTransition and fails the case on error.
func (e *env) propose(key cluster.Key, incarnation string, seq uint64, tr state.Transition) state.WriteResult {
	e.t.Helper()
	res, err := e.s.ProposeTransition(e.ctx(), key, incarnation, seq, tr)
	if err != nil {
		e.t.Fatalf("ProposeTransition(%s, %s, seq %d, %s): %v", key, incarnation, seq, tr, err)
	}
	if res.Revision.IsZero() {
		e.t.Fatalf("ProposeTransition(%s, %s, seq %d, %s) returned the zero revision", key, incarnation, seq, tr)
	}
	return res
}

// mustPropose is propose, checking the outcome and, for a stale or late
// answer, that the record returned is holds (nil: none).
func (e *env) mustPropose(key cluster.Key, incarnation string, seq uint64, tr state.Transition, want state.Outcome, holds *cluster.Record) state.WriteResult {
	e.t.Helper()
	res := e.propose(key, incarnation, seq, tr)
	what := "ProposeTransition(" + key.String() + ", " + incarnation + ", " + tr.String() + ")"
	if res.Outcome != want {
		e.t.Fatalf("%s = %s (slot holds %s), want %s", what, res.Outcome, describe(res.Record), want)
	}
	if res.Decision != 0 {
		e.t.Fatalf("%s.Decision = %s, want none", what, res.Decision)
	}
	if !sameContent(res.Record, holds) {
		e.t.Fatalf("%s returned %s, want %s", what, describe(res.Record), describe(holds))
	}
	return res
}

// lateOf is rec as a late mark stores it.
func lateOf(rec *cluster.Record) *cluster.Record {
	l := rec.Clone()
	l.Late = true
	return l
}

// runTransition checks ProposeTransition: a time-based change applied
// only while the slot holds the version the proposer saw.
func runTransition(t *testing.T, newHarness Factory) {
	t.Run("LateThenHeartbeatClearsIt", func(t *testing.T) {
		e := setup(t, newHarness)
		rec := e.rec(cluster.RoleWorker, "w1", "inc-a", 3)
		e.mustUpsert(rec, longTTL, cluster.DecisionInsert, rec)
		res := e.mustPropose(rec.Key(), "inc-a", 3, state.TransitionLate, state.OutcomeAccepted, lateOf(rec))
		w := e.watch(e.cluster, res.Revision)
		got := mustFind(t, e.snapshot(e.cluster), lateOf(rec))
		if !got.Late || got.EffectiveHealth() != cluster.HealthUnhealthy || got.Generation != res.Record.Generation {
			t.Fatalf("snapshot holds %s late %v generation %d; want it late, unhealthy, generation %d",
				describe(got), got.Late, got.Generation, res.Record.Generation)
		}
		// A second mark of the same version changes nothing.
		e.mustPropose(rec.Key(), "inc-a", 3, state.TransitionLate, state.OutcomeStale, lateOf(rec))
		next := e.rec(cluster.RoleWorker, "w1", "inc-a", 4)
		hb := e.mustHeartbeat(next, longTTL, cluster.DecisionAdvance, next)
		if hb.Record.Late {
			t.Fatalf("heartbeat after a late mark stored %s still late", describe(hb.Record))
		}
		w.expect(putOf(hb))
		if r := mustFind(t, e.snapshot(e.cluster), next); r.Late {
			t.Fatalf("snapshot after the heartbeat holds %s late", describe(r))
		}
	})

	t.Run("HeartbeatFirstMakesTheProposalStale", func(t *testing.T) {
		e := setup(t, newHarness)
		rec := e.rec(cluster.RoleWorker, "w1", "inc-a", 3)
		e.mustUpsert(rec, longTTL, cluster.DecisionInsert, rec)
		next := e.rec(cluster.RoleWorker, "w1", "inc-a", 4)
		e.mustHeartbeat(next, longTTL, cluster.DecisionAdvance, next)
		e.mustPropose(rec.Key(), "inc-a", 3, state.TransitionLate, state.OutcomeStale, next)
		e.mustPropose(rec.Key(), "inc-a", 3, state.TransitionExpire, state.OutcomeStale, next)
		if r := mustFind(t, e.snapshot(e.cluster), next); r.Late {
			t.Fatalf("a stale proposal marked %s late", describe(r))
		}
	})

	t.Run("OtherIncarnationIsStale", func(t *testing.T) {
		e := setup(t, newHarness)
		old := e.rec(cluster.RoleWorker, "w1", "inc-a", 3)
		e.mustUpsert(old, longTTL, cluster.DecisionInsert, old)
		restarted := e.rec(cluster.RoleWorker, "w1", "inc-b", 3)
		e.mustUpsert(restarted, longTTL, cluster.DecisionRestart, restarted)
		e.mustPropose(old.Key(), "inc-a", 3, state.TransitionLate, state.OutcomeStale, restarted)
		e.mustPropose(old.Key(), "inc-a", 3, state.TransitionExpire, state.OutcomeStale, restarted)
		mustFind(t, e.snapshot(e.cluster), restarted)
	})

	t.Run("NotFound", func(t *testing.T) {
		e := setup(t, newHarness)
		key := cluster.Key{ClusterID: e.cluster, Role: cluster.RoleWorker, NodeID: "nobody"}
		e.mustPropose(key, "inc-a", 0, state.TransitionLate, state.OutcomeNotFound, nil)
		e.mustPropose(key, "inc-a", 0, state.TransitionExpire, state.OutcomeNotFound, nil)
	})

	t.Run("ExpireDeletes", func(t *testing.T) {
		e := setup(t, newHarness)
		rec := e.rec(cluster.RoleWorker, "w1", "inc-a", 3)
		ins := e.mustUpsert(rec, longTTL, cluster.DecisionInsert, rec)
		w := e.watch(e.cluster, ins.Revision)
		late := e.mustPropose(rec.Key(), "inc-a", 3, state.TransitionLate, state.OutcomeAccepted, lateOf(rec))
		// A late record expires like any other: the sequence is the same.
		gone := e.mustPropose(rec.Key(), "inc-a", 3, state.TransitionExpire, state.OutcomeAccepted, nil)
		w.expect(wantEvent{typ: state.EventPut, key: rec.Key(), rec: late.Record, rev: late.Revision},
			wantEvent{typ: state.EventDelete, key: rec.Key(), rev: gone.Revision})
		mustLack(t, e.snapshot(e.cluster), rec.Key())
		// The expired incarnation registers anew.
		again := e.rec(cluster.RoleWorker, "w1", "inc-a", 4)
		e.mustUpsert(again, longTTL, cluster.DecisionInsert, again)
	})

	t.Run("ExpireAfterAHeartbeatIsStale", func(t *testing.T) {
		e := setup(t, newHarness)
		rec := e.rec(cluster.RoleWorker, "w1", "inc-a", 3)
		e.mustUpsert(rec, longTTL, cluster.DecisionInsert, rec)
		e.mustPropose(rec.Key(), "inc-a", 3, state.TransitionLate, state.OutcomeAccepted, lateOf(rec))
		next := e.rec(cluster.RoleWorker, "w1", "inc-a", 4)
		e.mustHeartbeat(next, longTTL, cluster.DecisionAdvance, next)
		e.mustPropose(rec.Key(), "inc-a", 3, state.TransitionExpire, state.OutcomeStale, next)
		mustFind(t, e.snapshot(e.cluster), next)
	})

	t.Run("ConcurrentProposersExactlyOneApplies", func(t *testing.T) { runConcurrentProposers(t, newHarness) })
	// A late mark keeps the lease: on a backend that expires records itself
	// the record still goes at its original deadline.
	t.Run("LateDoesNotExtendTheLease", func(t *testing.T) {
		e := setup(t, newHarness)
		if !e.h.LeaseExpiry {
			t.Skip("the backend has no lease expiry of its own: records expire only by TransitionExpire")
		}
		ttl := e.h.LeaseTTL
		rec := e.rec(cluster.RoleWorker, "w1", "inc-a", 3)
		e.mustUpsert(rec, ttl, cluster.DecisionInsert, rec)
		e.h.Advance(ttl / 2)
		e.mustPropose(rec.Key(), "inc-a", 3, state.TransitionLate, state.OutcomeAccepted, lateOf(rec))
		e.h.Advance(ttl / 2)
		// Had the mark refreshed the lease, the record would live until 1.5
		// leases after its write.
		e.eventually("late record gone at its original deadline", ttl/10, 4, func() bool {
			return find(t, e.snapshot(e.cluster), rec.Key()) == nil
		})
	})

	// Without a lease expiry of its own, a backend keeps every record past
	// its lease, in every snapshot, until a proposal expires it.
	t.Run("NoReaderClockExpiry", func(t *testing.T) {
		e := setup(t, newHarness)
		if e.h.LeaseExpiry {
			t.Skip("the backend expires records by its own lease")
		}
		ttl := e.h.LeaseTTL
		rec := e.rec(cluster.RoleWorker, "w1", "inc-a", 3)
		e.mustUpsert(rec, ttl, cluster.DecisionInsert, rec)
		e.h.Advance(ttl + ttl/2)
		mustFind(t, e.snapshot(e.cluster), rec)
		ctx, cancel := opContext(t)
		defer cancel()
		snap, err := e.h.Peer(t, 10*time.Minute).Snapshot(ctx, e.cluster)
		if err != nil {
			t.Fatal(err)
		}
		mustFind(t, snap, rec)
		e.mustPropose(rec.Key(), "inc-a", 3, state.TransitionExpire, state.OutcomeAccepted, nil)
		mustLack(t, e.snapshot(e.cluster), rec.Key())
	})

	t.Run("InvalidArguments", func(t *testing.T) {
		e := setup(t, newHarness)
		key := cluster.Key{ClusterID: e.cluster, Role: cluster.RoleWorker, NodeID: "w1"}
		for name, call := range map[string]func() error{
			"empty incarnation": func() error { _, err := e.s.ProposeTransition(e.ctx(), key, "", 1, state.TransitionLate); return err },
			"unknown transition": func() error {
				_, err := e.s.ProposeTransition(e.ctx(), key, "inc-a", 1, state.Transition(0))
				return err
			},
			"invalid key": func() error {
				_, err := e.s.ProposeTransition(e.ctx(), cluster.Key{ClusterID: e.cluster, Role: "nobody", NodeID: "w1"}, "inc-a", 1, state.TransitionExpire)
				return err
			},
		} {
			checkSentinel(t, "ProposeTransition with "+name, call(), state.ErrInvalidRecord)
		}
	})
}

// runConcurrentProposers: every coordinator that sees a deadline pass
// proposes; exactly one proposal applies, whichever store (cache) it goes
// through.
func runConcurrentProposers(t *testing.T, newHarness Factory) {
	e := setup(t, newHarness)
	peer := e.h.Peer(t, 0)
	for _, tr := range []state.Transition{state.TransitionLate, state.TransitionExpire} {
		rec := e.rec(cluster.RoleWorker, "w-"+tr.String(), "inc-a", 3)
		e.mustUpsert(rec, longTTL, cluster.DecisionInsert, rec)
		// Both stores have seen the record before they propose.
		e.snapshot(e.cluster)
		ctx, cancel := opContext(t)
		if _, err := peer.Snapshot(ctx, e.cluster); err != nil {
			t.Fatal(err)
		}
		cancel()
		const proposers = 8
		var wg sync.WaitGroup
		results := make([]state.WriteResult, proposers)
		errs := make([]error, proposers)
		for i := range proposers {
			s := e.s
			if i%2 == 1 {
				s = peer
			}
			wg.Go(func() {
				ctx, cancel := opContext(t)
				defer cancel()
				results[i], errs[i] = s.ProposeTransition(ctx, rec.Key(), "inc-a", 3, tr)
			})
		}
		wg.Wait()
		accepted := 0
		for i, res := range results {
			switch {
			case errs[i] != nil:
				t.Fatalf("%s proposer %d: %v", tr, i, errs[i])
			case res.Outcome == state.OutcomeAccepted:
				accepted++
			case tr == state.TransitionLate && res.Outcome != state.OutcomeStale,
				tr == state.TransitionExpire && res.Outcome != state.OutcomeNotFound && res.Outcome != state.OutcomeStale:
				t.Fatalf("%s proposer %d = %s, want accepted or refused", tr, i, res.Outcome)
			}
		}
		if accepted != 1 {
			t.Fatalf("%d of %d concurrent %s proposals applied, want exactly 1", accepted, proposers, tr)
		}
	}
}
