package statetest

import (
	"context"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/placement"
	"github.com/talonhq/talon/internal/state"
)

// skew is the clock offset of each peer coordinator in the skew cases,
// far beyond any lease: code that compares clocks of two hosts sees every
// record either from the future or long expired.
const skew = 30 * time.Second

// runSkew checks that no other host's clock takes part in ordering or
// liveness (ADR 0001 sections 2, 3 and 7, as amended).
func runSkew(t *testing.T, newHarness Factory) {
	// Two coordinators 60 s apart, each relaying heartbeats of its own
	// workers, read the same revision: they must see the same eligible
	// workers and so compute the same PlacementVersion.
	t.Run("CoordinatorsAgreeOnPlacement", func(t *testing.T) {
		e := setup(t, newHarness)
		ahead, behind := e.h.Peer(t, skew), e.h.Peer(t, -skew)
		timing := skewTiming(e.h.LeaseTTL)
		w1 := e.rec(cluster.RoleWorker, "w1", "inc-1", 0)
		w2 := e.rec(cluster.RoleWorker, "w2", "inc-2", 0)
		mustWrite(t, ahead, w1, e.h.LeaseTTL)
		mustWrite(t, behind, w2, e.h.LeaseTTL)
		for seq := uint64(1); seq <= 2; seq++ {
			w1.HeartbeatSeq, w2.HeartbeatSeq = seq, seq
			mustWrite(t, ahead, w1, e.h.LeaseTTL, state.Heartbeat())
			mustWrite(t, behind, w2, e.h.LeaseTTL, state.Heartbeat())
		}
		a, b := sameRevision(t, ahead, behind, e.cluster)
		va, na := placementOf(t, a, timing)
		vb, nb := placementOf(t, b, timing)
		if va != vb {
			t.Fatalf("same revision %s, different PlacementVersions: %s (%d eligible, clock +%s) and %s (%d eligible, clock -%s)",
				a.Revision, va, na, skew, vb, nb, skew)
		}
		if na != 2 {
			t.Fatalf("%d eligible workers at revision %s, want both fresh ones", na, a.Revision)
		}
	})

	// A worker restarts and registers through a coordinator whose clock
	// is a minute behind the one that wrote its previous record, with a
	// start time before the old one's: refused while the old record is on
	// time, accepted once a coordinator marked it late; the old
	// incarnation's delayed heartbeat, relayed by the coordinator that is
	// ahead, is then refused.
	t.Run("RestartThroughACoordinatorBehind", func(t *testing.T) {
		e := setup(t, newHarness)
		ahead, behind := e.h.Peer(t, skew), e.h.Peer(t, -skew)
		old := e.rec(cluster.RoleWorker, "w1", "inc-old", 0)
		mustWrite(t, ahead, old, e.h.LeaseTTL)
		restarted := e.rec(cluster.RoleWorker, "w1", "inc-new", 0)
		restarted.StartTimeUnixMs = old.StartTimeUnixMs - 2*skew.Milliseconds()
		if res := mustWrite(t, behind, restarted, e.h.LeaseTTL); res.Decision != cluster.DecisionSuperseded {
			t.Fatalf("restart through the coordinator behind, old record on time = %s, want superseded", res.Decision)
		}
		ctx, cancel := opContext(t)
		defer cancel()
		if res, err := ahead.ProposeTransition(ctx, old.Key(), "inc-old", 0, state.TransitionLate); err != nil || res.Outcome != state.OutcomeAccepted {
			t.Fatalf("marking the old record late: %+v, %v", res, err)
		}
		res := mustWrite(t, behind, restarted, e.h.LeaseTTL)
		if res.Decision != cluster.DecisionRestart {
			t.Fatalf("restart through the coordinator behind = %s, want restart", res.Decision)
		}
		late := e.rec(cluster.RoleWorker, "w1", "inc-old", 7)
		if res := mustWrite(t, ahead, late, e.h.LeaseTTL, state.Heartbeat()); res.Decision != cluster.DecisionSuperseded {
			t.Fatalf("delayed heartbeat of the old incarnation = %s, want superseded", res.Decision)
		}
		mustFind(t, e.snapshot(e.cluster), restarted)
	})
}

// skewTiming is a valid timing whose lease is the harness's.
func skewTiming(ttl time.Duration) cluster.Timing {
	return cluster.Timing{HeartbeatInterval: ttl / 6, UnhealthyAfter: ttl / 2, LeaseTTL: ttl}
}

func mustWrite(t *testing.T, s state.Store, rec *cluster.Record, ttl time.Duration, opts ...state.UpsertOption) state.WriteResult {
	t.Helper()
	ctx, cancel := opContext(t)
	defer cancel()
	res, err := s.UpsertNode(ctx, rec, ttl, opts...)
	if err != nil {
		t.Fatalf("UpsertNode(%s seq %d): %v", rec.Key(), rec.HeartbeatSeq, err)
	}
	if res.Outcome != state.OutcomeAccepted && res.Decision != cluster.DecisionSuperseded {
		t.Fatalf("UpsertNode(%s seq %d) = %s (%s), want accepted", rec.Key(), rec.HeartbeatSeq, res.Outcome, res.Decision)
	}
	return res
}

// sameRevision reads both stores until they answer at one revision (real
// servers share their revision counter with other writers).
func sameRevision(t *testing.T, a, b state.Store, clusterID string) (*state.Snapshot, *state.Snapshot) {
	t.Helper()
	for range 50 {
		ctx, cancel := opContext(t)
		sa, errA := a.Snapshot(ctx, clusterID)
		sb, errB := b.Snapshot(ctx, clusterID)
		cancel()
		if errA != nil || errB != nil {
			t.Fatalf("Snapshot: %v, %v", errA, errB)
		}
		if sa.Revision == sb.Revision {
			return sa, sb
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the two stores never answered at the same revision")
	return nil, nil
}

// placementOf is what a coordinator computes from snap: the version of the
// eligible workers' placement and their count.
func placementOf(t *testing.T, snap *state.Snapshot, timing cluster.Timing) (placement.Version, int) {
	t.Helper()
	eligible, _ := placement.Eligible(snap.Records)
	tbl, err := placement.New(eligible)
	if err != nil {
		t.Fatal(err)
	}
	return tbl.Version(), len(eligible)
}

// opContext is a context for one operation outside an env, bounded by
// opTimeout.
func opContext(t *testing.T) (context.Context, context.CancelFunc) {
	return context.WithTimeout(t.Context(), opTimeout)
}
