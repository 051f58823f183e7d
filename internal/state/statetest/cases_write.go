package statetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

func runBasics(t *testing.T, newHarness Factory) {
	t.Run("BackendName", func(t *testing.T) {
		e := setup(t, newHarness)
		switch name := e.s.Backend(); name {
		case "memory", "etcd", "kubernetes":
		default:
			t.Fatalf("Backend() = %q, want memory, etcd or kubernetes", name)
		}
	})
	t.Run("CheckReady", func(t *testing.T) {
		e := setup(t, newHarness)
		if err := e.s.CheckReady(e.ctx()); err != nil {
			t.Fatalf("CheckReady on a healthy backend: %v", err)
		}
	})
	t.Run("CanceledContext", func(t *testing.T) {
		// A canceled context fails the operation with the context's error
		// and writes nothing.
		e := setup(t, newHarness)
		ctx, cancel := context.WithCancel(e.t.Context())
		cancel()
		rec := e.rec(cluster.RoleWorker, "w1", "inc-a", 1)
		if _, err := e.s.UpsertNode(ctx, rec, longTTL); !errors.Is(err, context.Canceled) {
			t.Fatalf("UpsertNode with a canceled context: error %v, want one wrapping context.Canceled", err)
		}
		if _, err := e.s.Snapshot(ctx, e.cluster); !errors.Is(err, context.Canceled) {
			t.Fatalf("Snapshot with a canceled context: error %v, want one wrapping context.Canceled", err)
		}
		mustLack(t, e.snapshot(e.cluster), rec.Key())
	})
}

func runUpsert(t *testing.T, newHarness Factory) {
	t.Run("Insert", func(t *testing.T) { upsertInsert(t, newHarness) })

	t.Run("Update", func(t *testing.T) { upsertUpdate(t, newHarness) })

	t.Run("Duplicate", func(t *testing.T) { upsertDuplicate(t, newHarness) })

	t.Run("Stale", func(t *testing.T) { upsertStale(t, newHarness) })

	t.Run("RestartWithNewIncarnation", func(t *testing.T) { upsertRestartWithNewIncarnation(t, newHarness) })

	// A process that restarts on a host whose clock is a minute behind is
	// refused while the old record is on time (its start time says it is
	// older), accepted once the old record is marked late; a zero start
	// time compares with nothing and is a restart.
	t.Run("RestartOnAClockBehind", func(t *testing.T) { upsertRestartOnAClockBehind(t, newHarness) })

	// A heartbeat never creates a slot or takes one over: a forged or
	// delayed heartbeat of an unknown incarnation is refused, nothing
	// stored.
	t.Run("HeartbeatNeverTakesASlot", func(t *testing.T) { upsertHeartbeatNeverTakesASlot(t, newHarness) })

	t.Run("StoresACopy", func(t *testing.T) { upsertStoresACopy(t, newHarness) })
}

// upsertInsert is the Insert case of runUpsert.
func upsertInsert(t *testing.T, newHarness Factory) {
	e := setup(t, newHarness)
	rec := e.rec(cluster.RoleWorker, "w1", "inc-a", 7)
	rec.UpdatedAtUnixMs = 1 // ignored: the store stamps its own time
	sent := rec.Clone()
	res := e.mustUpsert(rec, longTTL, cluster.DecisionInsert, sent)
	if !sameRecord(rec, sent) || rec.UpdatedAtUnixMs != 1 {
		t.Fatalf("UpsertNode modified its argument: now %s", describe(rec))
	}
	if res.Record.UpdatedAtUnixMs == 1 || res.Record.UpdatedAtUnixMs <= 0 {
		t.Fatalf("stored UpdatedAtUnixMs = %d, want the store's observation time, not the sender's 1", res.Record.UpdatedAtUnixMs)
	}
	snap := e.snapshot(e.cluster)
	if len(snap.Records) != 1 {
		t.Fatalf("snapshot holds %d records, want 1", len(snap.Records))
	}
	if got := snap.Records[0]; !sameRecord(got, res.Record) {
		t.Fatalf("snapshot holds %s, want the written %s", describe(got), describe(res.Record))
	}
	if age := time.Duration(snap.ObservedAtUnixMs-res.Record.UpdatedAtUnixMs) * time.Millisecond; age < -clockTolerance {
		t.Fatalf("record updated at %d, after the snapshot's observation time %d", res.Record.UpdatedAtUnixMs, snap.ObservedAtUnixMs)
	}
}

// upsertUpdate is the Update case of runUpsert.
func upsertUpdate(t *testing.T, newHarness Factory) {
	e := setup(t, newHarness)
	first := e.mustUpsert(e.rec(cluster.RoleWorker, "w1", "inc-a", 1), longTTL, cluster.DecisionInsert, e.rec(cluster.RoleWorker, "w1", "inc-a", 1))
	next := e.rec(cluster.RoleWorker, "w1", "inc-a", 2)
	next.Health = cluster.HealthDegraded
	second := e.mustUpsert(next, longTTL, cluster.DecisionAdvance, next)
	if second.Revision == first.Revision {
		t.Fatalf("an accepted update kept revision %s", first.Revision)
	}
	// A gap in the sequence is accepted: heartbeats may be lost.
	jump := e.rec(cluster.RoleWorker, "w1", "inc-a", 100)
	e.mustUpsert(jump, longTTL, cluster.DecisionAdvance, jump)
	mustFind(t, e.snapshot(e.cluster), jump)
}

// upsertDuplicate is the Duplicate case of runUpsert.
func upsertDuplicate(t *testing.T, newHarness Factory) {
	e := setup(t, newHarness)
	orig := e.rec(cluster.RoleWorker, "w1", "inc-a", 5)
	acc := e.mustUpsert(orig, longTTL, cluster.DecisionInsert, orig)
	before := e.snapshot(e.cluster)
	dup := e.rec(cluster.RoleWorker, "w1", "inc-a", 5)
	dup.Health = cluster.HealthUnhealthy // same sequence, other content: still a duplicate
	res := e.mustUpsert(dup, longTTL, cluster.DecisionDuplicate, orig)
	if res.Record.UpdatedAtUnixMs != acc.Record.UpdatedAtUnixMs {
		t.Fatalf("a duplicate changed UpdatedAtUnixMs from %d to %d", acc.Record.UpdatedAtUnixMs, res.Record.UpdatedAtUnixMs)
	}
	after := e.snapshot(e.cluster)
	if !sameSnapshot(before, after) {
		t.Fatalf("a duplicate changed the snapshot: %s became %s", describe(before.Records[0]), describe(after.Records[0]))
	}
	if e.h.StableRevisions && (res.Revision != acc.Revision || after.Revision != before.Revision) {
		t.Fatalf("a duplicate moved the revision: write %s -> %s, snapshot %s -> %s", acc.Revision, res.Revision, before.Revision, after.Revision)
	}
}

// upsertStale is the Stale case of runUpsert.
func upsertStale(t *testing.T, newHarness Factory) {
	e := setup(t, newHarness)
	orig := e.rec(cluster.RoleWorker, "w1", "inc-a", 5)
	acc := e.mustUpsert(orig, longTTL, cluster.DecisionInsert, orig)
	before := e.snapshot(e.cluster)
	for _, seq := range []uint64{4, 0} {
		res := e.mustUpsert(e.rec(cluster.RoleWorker, "w1", "inc-a", seq), longTTL, cluster.DecisionStale, orig)
		if res.Record.UpdatedAtUnixMs != acc.Record.UpdatedAtUnixMs {
			t.Fatalf("a stale update changed UpdatedAtUnixMs from %d to %d", acc.Record.UpdatedAtUnixMs, res.Record.UpdatedAtUnixMs)
		}
		if e.h.StableRevisions && res.Revision != acc.Revision {
			t.Fatalf("a stale update moved the revision from %s to %s", acc.Revision, res.Revision)
		}
	}
	after := e.snapshot(e.cluster)
	if !sameSnapshot(before, after) {
		t.Fatal("a stale update changed the snapshot")
	}
	if e.h.StableRevisions && after.Revision != before.Revision {
		t.Fatalf("a stale update moved the snapshot revision from %s to %s", before.Revision, after.Revision)
	}
}

// upsertRestartWithNewIncarnation is the RestartWithNewIncarnation case of runUpsert.
func upsertRestartWithNewIncarnation(t *testing.T, newHarness Factory) {
	e := setup(t, newHarness)
	old := e.rec(cluster.RoleWorker, "w1", "inc-old", 40)
	first := e.mustUpsert(old, longTTL, cluster.DecisionInsert, old)
	// The restarted process starts its sequence again; a registration
	// of a new incarnation is a restart whatever its sequence.
	fresh := e.rec(cluster.RoleWorker, "w1", "inc-new", 0)
	res := e.mustUpsert(fresh, longTTL, cluster.DecisionRestart, fresh)
	if res.Record.Generation <= first.Record.Generation {
		t.Fatalf("restart issued generation %d, not above the previous %d", res.Record.Generation, first.Record.Generation)
	}
	if len(res.Record.Superseded) != 1 || res.Record.Superseded[0] != "inc-old" {
		t.Fatalf("restart superseded %q, want [inc-old]", res.Record.Superseded)
	}
	mustFind(t, e.snapshot(e.cluster), fresh)
	// The new incarnation's own ordering starts from its sequence.
	e.mustHeartbeat(e.rec(cluster.RoleWorker, "w1", "inc-new", 0), longTTL, cluster.DecisionDuplicate, fresh)
	next := e.rec(cluster.RoleWorker, "w1", "inc-new", 1)
	adv := e.mustHeartbeat(next, longTTL, cluster.DecisionAdvance, next)
	if adv.Record.Generation != res.Record.Generation {
		t.Fatalf("a heartbeat changed the generation from %d to %d", res.Record.Generation, adv.Record.Generation)
	}
	// Delayed messages of the previous process, heartbeat or
	// registration, never move the slot back, whatever they claim.
	back := e.rec(cluster.RoleWorker, "w1", "inc-old", 41)
	back.StartTimeUnixMs = next.StartTimeUnixMs + 3_600_000
	e.mustHeartbeat(back, longTTL, cluster.DecisionSuperseded, next)
	e.mustUpsert(back, longTTL, cluster.DecisionSuperseded, next)
	mustFind(t, e.snapshot(e.cluster), next)
	// A third incarnation registers: a restart, generation grows again.
	third := e.rec(cluster.RoleWorker, "w1", "inc-third", 0)
	res3 := e.mustUpsert(third, longTTL, cluster.DecisionRestart, third)
	if res3.Record.Generation <= res.Record.Generation {
		t.Fatalf("second restart issued generation %d, not above %d", res3.Record.Generation, res.Record.Generation)
	}
	if got := res3.Record.Superseded; len(got) != 2 || got[0] != "inc-new" || got[1] != "inc-old" {
		t.Fatalf("second restart superseded %q, want [inc-new inc-old]", got)
	}
	mustFind(t, e.snapshot(e.cluster), third)
}

// upsertRestartOnAClockBehind is the RestartOnAClockBehind case of runUpsert.
func upsertRestartOnAClockBehind(t *testing.T, newHarness Factory) {
	e := setup(t, newHarness)
	old := e.rec(cluster.RoleWorker, "w1", "inc-old", 9)
	e.mustUpsert(old, longTTL, cluster.DecisionInsert, old)
	behind := e.rec(cluster.RoleWorker, "w1", "inc-behind", 0)
	behind.StartTimeUnixMs = old.StartTimeUnixMs - 60_000
	// A process that started before the live holder is, as far as the
	// store can tell, a delayed registration of an older process: refused
	// while the holder is on time (a crash loop outruns any list of
	// superseded incarnations).
	e.mustUpsert(behind, longTTL, cluster.DecisionSuperseded, old)
	// Once a coordinator marked the holder late, the restart on the host
	// whose clock is behind is accepted.
	if res := e.propose(old.Key(), old.IncarnationID, old.HeartbeatSeq, state.TransitionLate); res.Outcome != state.OutcomeAccepted {
		t.Fatalf("late mark of the holder: %s, want accepted", res.Outcome)
	}
	e.mustUpsert(behind, longTTL, cluster.DecisionRestart, behind)
	// A registration without a start time proves nothing about its age:
	// it never displaces a live, on-time holder (issue 47: it took a live
	// node's slot), only a late one.
	zero := e.rec(cluster.RoleWorker, "w1", "inc-zero", 0)
	zero.StartTimeUnixMs = 0
	e.mustUpsert(zero, longTTL, cluster.DecisionSuperseded, behind)
	mustFind(t, e.snapshot(e.cluster), behind)
	if res := e.propose(behind.Key(), behind.IncarnationID, behind.HeartbeatSeq, state.TransitionLate); res.Outcome != state.OutcomeAccepted {
		t.Fatalf("late mark of the holder: %s, want accepted", res.Outcome)
	}
	e.mustUpsert(zero, longTTL, cluster.DecisionRestart, zero)
	mustFind(t, e.snapshot(e.cluster), zero)
}

// upsertHeartbeatNeverTakesASlot is the HeartbeatNeverTakesASlot case of runUpsert.
func upsertHeartbeatNeverTakesASlot(t *testing.T, newHarness Factory) {
	e := setup(t, newHarness)
	e.mustHeartbeat(e.rec(cluster.RoleWorker, "w1", "inc-a", 5), longTTL, cluster.DecisionUnregistered, nil)
	mustLack(t, e.snapshot(e.cluster), cluster.Key{ClusterID: e.cluster, Role: cluster.RoleWorker, NodeID: "w1"})
	owner := e.rec(cluster.RoleWorker, "w1", "inc-a", 0)
	e.mustUpsert(owner, longTTL, cluster.DecisionInsert, owner)
	e.mustHeartbeat(e.rec(cluster.RoleWorker, "w1", "inc-forged", 1<<40), longTTL, cluster.DecisionSuperseded, owner)
	mustFind(t, e.snapshot(e.cluster), owner)
}

// upsertStoresACopy is the StoresACopy case of runUpsert.
func upsertStoresACopy(t *testing.T, newHarness Factory) {
	e := setup(t, newHarness)
	rec := e.rec(cluster.RoleWorker, "w1", "inc-a", 1)
	want := rec.Clone()
	res := e.mustUpsert(rec, longTTL, cluster.DecisionInsert, want)
	rec.Health = cluster.HealthUnhealthy
	rec.Labels["zone"] = "changed-by-caller"
	res.Record.Labels["zone"] = "changed-by-result"
	res.Record.Ready = false
	mustFind(t, e.snapshot(e.cluster), want)
}

func runIdentity(t *testing.T, newHarness Factory) {
	t.Run("ClustersAreIsolated", func(t *testing.T) {
		e := setup(t, newHarness)
		other := clusterID(t, "-b")
		a1 := e.rec(cluster.RoleWorker, "n1", "inc-a", 3)
		a2 := e.rec(cluster.RoleWorker, "n2", "inc-a", 1)
		b1 := newRecord(other, cluster.RoleWorker, "n1", "inc-b", 9)
		b1.Address = "10.9.9.9:7070"
		e.mustUpsert(a1, longTTL, cluster.DecisionInsert, a1)
		e.mustUpsert(a2, longTTL, cluster.DecisionInsert, a2)
		// Same node ID, other cluster: its own slot, not a restart of a1.
		e.mustUpsert(b1, longTTL, cluster.DecisionInsert, b1)

		sa, sb := e.snapshot(e.cluster), e.snapshot(other)
		if len(sa.Records) != 2 || len(sb.Records) != 1 {
			t.Fatalf("snapshots hold %d and %d records, want 2 and 1", len(sa.Records), len(sb.Records))
		}
		mustFind(t, sa, a1)
		mustFind(t, sb, b1)

		if res := e.remove(b1.Key(), "inc-b"); res.Outcome != state.OutcomeAccepted {
			t.Fatalf("RemoveNode(%s) = %s, want accepted", b1.Key(), res.Outcome)
		}
		if res := e.remove(b1.Key(), "inc-a"); res.Outcome != state.OutcomeNotFound {
			t.Fatalf("RemoveNode(%s, a's incarnation) = %s, want not_found: the slot is per cluster", b1.Key(), res.Outcome)
		}
		mustFind(t, e.snapshot(e.cluster), a1)
		if n := len(e.snapshot(other).Records); n != 0 {
			t.Fatalf("cluster %s still holds %d records", other, n)
		}
	})

	t.Run("RoleIsPartOfTheSlot", func(t *testing.T) {
		e := setup(t, newHarness)
		w := e.rec(cluster.RoleWorker, "n1", "inc-w", 1)
		c := e.rec(cluster.RoleCoordinator, "n1", "inc-c", 1)
		e.mustUpsert(w, longTTL, cluster.DecisionInsert, w)
		e.mustUpsert(c, longTTL, cluster.DecisionInsert, c)
		snap := e.snapshot(e.cluster)
		if len(snap.Records) != 2 {
			t.Fatalf("snapshot holds %d records, want a coordinator and a worker", len(snap.Records))
		}
		if snap.Records[0].Role != cluster.RoleCoordinator || snap.Records[1].Role != cluster.RoleWorker {
			t.Fatalf("snapshot order %s, %s: want the coordinator first", snap.Records[0].Key(), snap.Records[1].Key())
		}
		mustFind(t, snap, w)
		mustFind(t, snap, c)
	})
}

func runRemove(t *testing.T, newHarness Factory) {
	t.Run("MatchingIncarnation", func(t *testing.T) {
		e := setup(t, newHarness)
		rec := e.rec(cluster.RoleWorker, "w1", "inc-a", 3)
		keep := e.rec(cluster.RoleWorker, "w2", "inc-a", 3)
		e.mustUpsert(rec, longTTL, cluster.DecisionInsert, rec)
		e.mustUpsert(keep, longTTL, cluster.DecisionInsert, keep)
		before := e.snapshot(e.cluster)
		res := e.remove(rec.Key(), "inc-a")
		if res.Outcome != state.OutcomeAccepted || res.Record != nil {
			t.Fatalf("RemoveNode = outcome %s record %s, want accepted and no record", res.Outcome, describe(res.Record))
		}
		if res.Revision == before.Revision {
			t.Fatalf("a removal kept revision %s", res.Revision)
		}
		after := e.snapshot(e.cluster)
		mustLack(t, after, rec.Key())
		mustFind(t, after, keep)
		if after.Revision == before.Revision {
			t.Fatalf("the snapshot revision %s did not change after a removal", after.Revision)
		}
	})

	t.Run("OldIncarnationIsStale", func(t *testing.T) {
		e := setup(t, newHarness)
		old := e.rec(cluster.RoleWorker, "w1", "inc-old", 9)
		fresh := e.rec(cluster.RoleWorker, "w1", "inc-new", 0)
		e.mustUpsert(old, longTTL, cluster.DecisionInsert, old)
		e.mustUpsert(fresh, longTTL, cluster.DecisionRestart, fresh)
		// A late deregistration of the old process must not delete the
		// restarted process's record.
		res := e.remove(old.Key(), "inc-old")
		if res.Outcome != state.OutcomeStale {
			t.Fatalf("RemoveNode(old incarnation) = %s, want stale", res.Outcome)
		}
		if !sameContent(res.Record, fresh) {
			t.Fatalf("RemoveNode(old incarnation) reports the slot holds %s, want %s", describe(res.Record), describe(fresh))
		}
		mustFind(t, e.snapshot(e.cluster), fresh)
	})

	t.Run("Missing", func(t *testing.T) {
		e := setup(t, newHarness)
		key := cluster.Key{ClusterID: e.cluster, Role: cluster.RoleWorker, NodeID: "never-written"}
		if res := e.remove(key, "inc-a"); res.Outcome != state.OutcomeNotFound || res.Record != nil {
			t.Fatalf("RemoveNode(missing) = outcome %s record %s, want not_found and no record", res.Outcome, describe(res.Record))
		}
		rec := e.rec(cluster.RoleWorker, "w1", "inc-a", 1)
		e.mustUpsert(rec, longTTL, cluster.DecisionInsert, rec)
		if res := e.remove(rec.Key(), "inc-a"); res.Outcome != state.OutcomeAccepted {
			t.Fatalf("first RemoveNode = %s, want accepted", res.Outcome)
		}
		if res := e.remove(rec.Key(), "inc-a"); res.Outcome != state.OutcomeNotFound {
			t.Fatalf("second RemoveNode = %s, want not_found", res.Outcome)
		}
	})

	t.Run("ReinsertAfterRemoval", func(t *testing.T) {
		e := setup(t, newHarness)
		rec := e.rec(cluster.RoleWorker, "w1", "inc-a", 10)
		e.mustUpsert(rec, longTTL, cluster.DecisionInsert, rec)
		e.remove(rec.Key(), "inc-a")
		// With no record there is nothing to be stale against.
		again := e.rec(cluster.RoleWorker, "w1", "inc-a", 2)
		e.mustUpsert(again, longTTL, cluster.DecisionInsert, again)
		mustFind(t, e.snapshot(e.cluster), again)
	})
}

func runSnapshot(t *testing.T, newHarness Factory) {
	t.Run("EmptyCluster", func(t *testing.T) { snapshotEmptyCluster(t, newHarness) })

	t.Run("OrderedByRoleThenNodeID", func(t *testing.T) { snapshotOrderedByRoleThenNodeID(t, newHarness) })

	t.Run("Revision", func(t *testing.T) { snapshotRevision(t, newHarness) })

	t.Run("ObservedAt", func(t *testing.T) { snapshotObservedAt(t, newHarness) })
}

// snapshotEmptyCluster is the EmptyCluster case of runSnapshot.
func snapshotEmptyCluster(t *testing.T, newHarness Factory) {
	e := setup(t, newHarness)
	if snap := e.snapshot(e.cluster); len(snap.Records) != 0 {
		t.Fatalf("a fresh cluster holds %d records", len(snap.Records))
	}
}

// snapshotOrderedByRoleThenNodeID is the OrderedByRoleThenNodeID case of runSnapshot.
func snapshotOrderedByRoleThenNodeID(t *testing.T, newHarness Factory) {
	e := setup(t, newHarness)
	// Written out of order; byte order puts "N" before "a" and "n-10"
	// before "n-9".
	writes := []struct {
		role cluster.Role
		node string
	}{
		{cluster.RoleWorker, "n-9"}, {cluster.RoleCoordinator, "c-2"}, {cluster.RoleWorker, "a"},
		{cluster.RoleWorker, "n-10"}, {cluster.RoleCoordinator, "c-10"}, {cluster.RoleWorker, "N-1"},
		{cluster.RoleWorker, "n-1"}, {cluster.RoleCoordinator, "z"},
	}
	for _, w := range writes {
		rec := e.rec(w.role, w.node, "inc", 1)
		e.mustUpsert(rec, longTTL, cluster.DecisionInsert, rec)
	}
	want := []string{
		"coordinator/c-10", "coordinator/c-2", "coordinator/z",
		"worker/N-1", "worker/a", "worker/n-1", "worker/n-10", "worker/n-9",
	}
	snap := e.snapshot(e.cluster)
	got := make([]string, len(snap.Records))
	for i, r := range snap.Records {
		got[i] = string(r.Role) + "/" + r.NodeID
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("snapshot order:\n got %v\nwant %v", got, want)
	}
}

// snapshotRevision is the Revision case of runSnapshot.
func snapshotRevision(t *testing.T, newHarness Factory) {
	e := setup(t, newHarness)
	rec := e.rec(cluster.RoleWorker, "w1", "inc-a", 1)
	e.mustUpsert(rec, longTTL, cluster.DecisionInsert, rec)
	s1, s2 := e.snapshot(e.cluster), e.snapshot(e.cluster)
	if s1.Revision == s2.Revision && !sameSnapshot(s1, s2) {
		t.Fatalf("two snapshots at revision %s differ", s1.Revision)
	}
	if e.h.StableRevisions && s1.Revision != s2.Revision {
		t.Fatalf("two snapshots with no write between them have revisions %s and %s", s1.Revision, s2.Revision)
	}
	next := e.rec(cluster.RoleWorker, "w1", "inc-a", 2)
	res := e.mustUpsert(next, longTTL, cluster.DecisionAdvance, next)
	if res.Revision == s2.Revision {
		t.Fatalf("an accepted write returned the earlier snapshot's revision %s", res.Revision)
	}
	s3 := e.snapshot(e.cluster)
	if s3.Revision == s2.Revision {
		t.Fatalf("the snapshot revision %s did not change after an accepted write", s3.Revision)
	}
	mustFind(t, s3, next)
	if e.h.StableRevisions && s3.Revision != res.Revision {
		t.Fatalf("snapshot revision %s, want the last write's %s", s3.Revision, res.Revision)
	}
	e.mustUpsert(next, longTTL, cluster.DecisionDuplicate, next)
	s4 := e.snapshot(e.cluster)
	if s4.Revision == s3.Revision && !sameSnapshot(s3, s4) {
		t.Fatalf("two snapshots at revision %s differ", s3.Revision)
	}
	if e.h.StableRevisions && s4.Revision != s3.Revision {
		t.Fatalf("a duplicate write moved the snapshot revision from %s to %s", s3.Revision, s4.Revision)
	}
	if s := s4.Revision.String(); s == "" {
		t.Fatal("Revision.String() is empty")
	}
}

// snapshotObservedAt is the ObservedAt case of runSnapshot.
func snapshotObservedAt(t *testing.T, newHarness Factory) {
	e := setup(t, newHarness)
	rec := e.rec(cluster.RoleWorker, "w1", "inc-a", 1)
	res := e.mustUpsert(rec, longTTL, cluster.DecisionInsert, rec)
	s1 := e.snapshot(e.cluster)
	got := mustFind(t, s1, rec)
	if got.UpdatedAtUnixMs != res.Record.UpdatedAtUnixMs {
		t.Fatalf("snapshot UpdatedAtUnixMs %d, write result %d", got.UpdatedAtUnixMs, res.Record.UpdatedAtUnixMs)
	}
	if got.Age(s1.ObservedAtUnixMs) < -clockTolerance {
		t.Fatalf("record updated at %d, after the observation time %d", got.UpdatedAtUnixMs, s1.ObservedAtUnixMs)
	}
	// Heartbeat age is the caller's measure of health: it must grow
	// with the store's clock while nothing refreshes the record, and
	// the record stays visible until its lease ends.
	d := e.h.LeaseTTL / 2
	e.h.Advance(d)
	s2 := e.snapshot(e.cluster)
	got2 := mustFind(t, s2, rec)
	if got2.UpdatedAtUnixMs != got.UpdatedAtUnixMs {
		t.Fatalf("UpdatedAtUnixMs moved from %d to %d without a write", got.UpdatedAtUnixMs, got2.UpdatedAtUnixMs)
	}
	if adv := time.Duration(s2.ObservedAtUnixMs-s1.ObservedAtUnixMs) * time.Millisecond; adv < d-clockTolerance {
		t.Fatalf("observation time advanced %s after the clock advanced %s", adv, d)
	}
	if age := got2.Age(s2.ObservedAtUnixMs); age < d-clockTolerance {
		t.Fatalf("record age %s after the clock advanced %s", age, d)
	}
}

func runValidation(t *testing.T, newHarness Factory) {
	invalid := []struct {
		name  string
		field string // the cluster.FieldError field the error names
		edit  func(r *cluster.Record)
	}{
		{"EmptyNodeID", "nodeId", func(r *cluster.Record) { r.NodeID = "" }},
		{"NodeIDWithSlash", "nodeId", func(r *cluster.Record) { r.NodeID = "a/../b" }},
		{"NodeIDTooLong", "nodeId", func(r *cluster.Record) { r.NodeID = strings.Repeat("n", cluster.MaxIDBytes+1) }},
		{"ClusterIDWithSlash", "clusterId", func(r *cluster.Record) { r.ClusterID += "/x" }},
		{"UnknownRole", "role", func(r *cluster.Record) { r.Role = "observer" }},
		{"EmptyIncarnation", "incarnationId", func(r *cluster.Record) { r.IncarnationID = "" }},
		{"AddressWithoutPort", "address", func(r *cluster.Record) { r.Address = "10.1.2.3" }},
		{"UnknownHealth", "health", func(r *cluster.Record) { r.Health = "great" }},
		{"NegativeStartTime", "startTimeUnixMs", func(r *cluster.Record) { r.StartTimeUnixMs = -1 }},
		{"TooManyLabels", "labels", func(r *cluster.Record) {
			for i := range cluster.MaxLabels + 1 {
				r.Labels["k"+strings.Repeat("x", i)] = "v"
			}
		}},
		{"BadLabelKey", "labels key", func(r *cluster.Record) { r.Labels["-bad"] = "v" }},
	}
	for _, tc := range invalid {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t, newHarness)
			rec := e.rec(cluster.RoleWorker, "w1", "inc-a", 1)
			tc.edit(rec)
			checkRejected(e, rec, state.ErrInvalidRecord, tc.field)
		})
	}
	t.Run("TooLarge", func(t *testing.T) {
		e := setup(t, newHarness)
		rec := e.rec(cluster.RoleWorker, "w1", "inc-a", 1)
		// Every field within its limit, but '<' encodes as \u003c, so the
		// record exceeds cluster.MaxRecordBytes.
		clear(rec.Labels)
		for i := range cluster.MaxLabels {
			rec.Labels["k"+strings.Repeat("x", i)] = strings.Repeat("<", cluster.MaxLabelValueBytes)
		}
		checkRejected(e, rec, state.ErrRecordTooLarge, "")
	})
	t.Run("NilRecord", func(t *testing.T) {
		e := setup(t, newHarness)
		checkRejected(e, nil, state.ErrInvalidRecord, "")
	})
}

// checkRejected checks that rec is rejected with want (naming field, when
// set) and that the store did not change.
func checkRejected(e *env, rec *cluster.Record, want error, field string) {
	t := e.t
	t.Helper()
	seed := e.rec(cluster.RoleWorker, "seed", "inc-a", 1)
	e.mustUpsert(seed, longTTL, cluster.DecisionInsert, seed)
	before := e.snapshot(e.cluster)
	w := e.watch(e.cluster, before.Revision)

	res, err := e.s.UpsertNode(e.ctx(), rec, longTTL)
	checkSentinel(t, "UpsertNode(invalid record)", err, want)
	if res.Outcome != 0 || res.Record != nil {
		t.Fatalf("a rejected write returned outcome %s record %s", res.Outcome, describe(res.Record))
	}
	if field != "" {
		var fe *cluster.FieldError
		if !errors.As(err, &fe) {
			t.Fatalf("error %q does not wrap the *cluster.FieldError naming the field", err)
		}
		if fe.Field != field {
			t.Fatalf("error names field %q, want %q: %v", fe.Field, field, err)
		}
	}

	after := e.snapshot(e.cluster)
	if !sameSnapshot(before, after) {
		t.Fatalf("a rejected write changed the snapshot from %d to %d records", len(before.Records), len(after.Records))
	}
	if e.h.StableRevisions && after.Revision != before.Revision {
		t.Fatalf("a rejected write moved the revision from %s to %s", before.Revision, after.Revision)
	}
	// The next event is the marker's: the rejected write made none.
	marker := e.rec(cluster.RoleWorker, "marker", "inc-a", 1)
	w.expect(putOf(e.mustUpsert(marker, longTTL, cluster.DecisionInsert, marker)))
}
