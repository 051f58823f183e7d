package statetest

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

func runWatch(t *testing.T, newHarness Factory) {
	t.Run("OrderedEventsAfterRevision", func(t *testing.T) {
		e := setup(t, newHarness)
		other := clusterID(t, "-other")
		early := e.rec(cluster.RoleWorker, "early", "inc-a", 1)
		e.mustUpsert(early, longTTL, cluster.DecisionInsert, early)
		snap := e.snapshot(e.cluster)

		// Written before the watch opens: replayed from the history.
		a1 := e.mustUpsert(e.rec(cluster.RoleWorker, "a", "inc-a", 1), longTTL, cluster.DecisionInsert, e.rec(cluster.RoleWorker, "a", "inc-a", 1))
		b1 := e.mustUpsert(e.rec(cluster.RoleCoordinator, "b", "inc-b", 1), longTTL, cluster.DecisionInsert, e.rec(cluster.RoleCoordinator, "b", "inc-b", 1))
		e.mustUpsert(newRecord(other, cluster.RoleWorker, "a", "inc-a", 1), longTTL, cluster.DecisionInsert, newRecord(other, cluster.RoleWorker, "a", "inc-a", 1))
		w := e.watch(e.cluster, snap.Revision)

		// Written after: streamed live. Duplicates, stale updates, failed
		// removals and other clusters' changes produce no event.
		e.mustUpsert(e.rec(cluster.RoleWorker, "a", "inc-a", 1), longTTL, cluster.DecisionDuplicate, e.rec(cluster.RoleWorker, "a", "inc-a", 1))
		a3 := e.mustUpsert(e.rec(cluster.RoleWorker, "a", "inc-a", 3), longTTL, cluster.DecisionAdvance, e.rec(cluster.RoleWorker, "a", "inc-a", 3))
		e.mustUpsert(e.rec(cluster.RoleWorker, "a", "inc-a", 2), longTTL, cluster.DecisionStale, e.rec(cluster.RoleWorker, "a", "inc-a", 3))
		e.mustUpsert(newRecord(other, cluster.RoleWorker, "a", "inc-a", 2), longTTL, cluster.DecisionAdvance, newRecord(other, cluster.RoleWorker, "a", "inc-a", 2))
		bKey := b1.Record.Key()
		if res := e.remove(bKey, "inc-other"); res.Outcome != state.OutcomeStale {
			t.Fatalf("RemoveNode(wrong incarnation) = %s, want stale", res.Outcome)
		}
		rb := e.remove(bKey, "inc-b")
		if res := e.remove(bKey, "inc-b"); res.Outcome != state.OutcomeNotFound {
			t.Fatalf("second RemoveNode = %s, want not_found", res.Outcome)
		}
		ar := e.mustUpsert(e.rec(cluster.RoleWorker, "a", "inc-r", 0), longTTL, cluster.DecisionRestart, e.rec(cluster.RoleWorker, "a", "inc-r", 0))
		marker := e.mustUpsert(e.rec(cluster.RoleWorker, "marker", "inc-a", 1), longTTL, cluster.DecisionInsert, e.rec(cluster.RoleWorker, "marker", "inc-a", 1))

		w.expect(putOf(a1), putOf(b1), putOf(a3), deleteOf(bKey, rb), putOf(ar), putOf(marker))
	})

	t.Run("ResumeWithoutGapsOrDuplicates", func(t *testing.T) {
		e := setup(t, newHarness)
		snap := e.snapshot(e.cluster)
		w := e.watch(e.cluster, snap.Revision)
		var want []wantEvent
		var midSnap *state.Snapshot
		var afterMid []wantEvent
		for seq := uint64(1); seq <= 4; seq++ {
			for _, node := range []string{"n1", "n2", "n3"} {
				rec := e.rec(cluster.RoleWorker, node, "inc-a", seq)
				ev := putOf(e.upsert(rec, longTTL))
				want = append(want, ev)
				if midSnap != nil {
					afterMid = append(afterMid, ev)
				}
			}
			if seq == 2 {
				midSnap = e.snapshot(e.cluster)
			}
		}
		key := cluster.Key{ClusterID: e.cluster, Role: cluster.RoleWorker, NodeID: "n2"}
		want = append(want, deleteOf(key, e.remove(key, "inc-a")))
		afterMid = append(afterMid, want[len(want)-1])
		w.expect(want...)
		all := w.buf // nothing more buffered
		if len(all) != 0 {
			t.Fatalf("unexpected extra events: %s", describeEvents(all))
		}
		// Re-read the events to resume from their revisions.
		full := e.watch(e.cluster, snap.Revision)
		events := full.next(len(want))
		checkEvents(t, full.desc, events, want)

		// Resume after event k: exactly the events after it, then a fresh
		// write. Each fresh write joins the history resumed later.
		for _, k := range []int{1, len(want) / 2, len(want) - 1, len(want)} {
			r := e.watch(e.cluster, events[k-1].Revision)
			marker := e.rec(cluster.RoleWorker, "marker", "inc-a", uint64(k))
			mev := putOf(e.upsert(marker, longTTL))
			r.expect(append(append([]wantEvent{}, want[k:]...), mev)...)
			got := full.next(1)
			checkEvents(t, full.desc, got, []wantEvent{mev})
			want = append(want, mev)
			events = append(events, got[0])
			r.stop()
		}
		// Resume from a snapshot taken mid-stream: only the later changes.
		m := e.watch(e.cluster, midSnap.Revision)
		m.expect(append(afterMid, want[len(want)-4:]...)...)
	})

	t.Run("ZeroRevisionIsRejected", func(t *testing.T) {
		e := setup(t, newHarness)
		w := e.watch(e.cluster, state.Revision{})
		if err := w.terminal(); err == nil {
			t.Fatal("a watch from the zero revision ended without an error")
		}
	})

	t.Run("CancelClosesChannel", func(t *testing.T) {
		e := setup(t, newHarness)
		snap := e.snapshot(e.cluster)
		ctx, cancel := context.WithCancel(t.Context())
		ch := e.s.Watch(ctx, e.cluster, snap.Revision)
		rec := e.rec(cluster.RoleWorker, "w1", "inc-a", 1)
		e.mustUpsert(rec, longTTL, cluster.DecisionInsert, rec)
		cancel()
		timer := time.NewTimer(watchWait)
		defer timer.Stop()
		for {
			select {
			case b, ok := <-ch:
				if !ok {
					return
				}
				if b.Err != nil {
					t.Logf("watch ended with %v after cancel", b.Err)
				}
			case <-timer.C:
				t.Fatalf("watch channel still open %s after its context was canceled", watchWait)
			}
		}
	})
}

// runSlowWatcher checks the one slow-watcher rule: a watcher that falls
// its store's buffer behind ends with ErrUnavailable after a gapless
// prefix of the changes, and no writer waits for it.
func runSlowWatcher(t *testing.T, newHarness Factory) {
	t.Run("SlowWatcherEndsUnavailable", func(t *testing.T) {
		e := setup(t, newHarness)
		if e.h.SmallWatchBuffer == nil {
			t.Skip("the backend's watch holds its stream back instead of a buffer")
		}
		s, n := e.h.SmallWatchBuffer(t)
		slow := &env{t: t, h: e.h, s: s, cluster: e.cluster}
		start := slow.snapshot(e.cluster)
		w := slow.watch(e.cluster, start.Revision)
		// Nobody reads while more than the buffer is written: every
		// write returns.
		for seq := uint64(1); seq <= uint64(n)+8; seq++ {
			slow.upsert(slow.rec(cluster.RoleWorker, "w1", "inc-a", seq), longTTL)
		}
		w.fill(math.MaxInt, watchWait)
		checkSentinel(t, "slow Watch", w.err, state.ErrUnavailable)
		for i, ev := range w.buf {
			if ev.Record == nil || ev.Record.HeartbeatSeq != uint64(i+1) {
				t.Fatalf("slow watch: event %d is %s: a gap before the slow-watcher error", i, describeEvents([]state.Event{ev}))
			}
		}
	})
}

func runCompaction(t *testing.T, newHarness Factory) {
	t.Run("WatchFromCompactedRevisionFails", func(t *testing.T) {
		e := setup(t, newHarness)
		old := e.snapshot(e.cluster)
		for seq := uint64(1); seq <= 3; seq++ {
			rec := e.rec(cluster.RoleWorker, "w1", "inc-a", seq)
			e.upsert(rec, longTTL)
			rec2 := e.rec(cluster.RoleWorker, "w2", "inc-a", seq)
			e.upsert(rec2, longTTL)
		}
		e.h.Compact(t)
		err := e.watch(e.cluster, old.Revision).terminal()
		checkSentinel(t, "Watch(compacted revision)", err, state.ErrCompacted)
	})

	t.Run("RecoverBySnapshotAndWatch", func(t *testing.T) {
		e := setup(t, newHarness)
		old := e.snapshot(e.cluster)
		var last *cluster.Record
		for seq := uint64(1); seq <= 3; seq++ {
			last = e.rec(cluster.RoleWorker, "w1", "inc-a", seq)
			e.upsert(last, longTTL)
			e.upsert(e.rec(cluster.RoleWorker, "w2", "inc-a", seq), longTTL)
		}
		gone := cluster.Key{ClusterID: e.cluster, Role: cluster.RoleWorker, NodeID: "w2"}
		e.remove(gone, "inc-a")
		e.h.Compact(t)
		checkSentinel(t, "Watch(compacted revision)", e.watch(e.cluster, old.Revision).terminal(), state.ErrCompacted)

		// The documented recovery: a new snapshot has everything the lost
		// events carried, and a watch from its revision works.
		snap := e.snapshot(e.cluster)
		if len(snap.Records) != 1 {
			t.Fatalf("snapshot after compaction holds %d records, want 1", len(snap.Records))
		}
		mustFind(t, snap, last)
		w := e.watch(e.cluster, snap.Revision)
		next := e.rec(cluster.RoleWorker, "w1", "inc-a", 4)
		w.expect(putOf(e.mustUpsert(next, longTTL, cluster.DecisionAdvance, next)))
	})
}
