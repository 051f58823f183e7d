package etcd

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/testenv"
)

// collect reads n events from ch, failing the test on an error or after
// 30 seconds without them.
func collect(t *testing.T, ch <-chan state.WatchBatch, n int) []state.Event {
	t.Helper()
	var got []state.Event
	timeout := time.After(30 * time.Second)
	for len(got) < n {
		select {
		case b, ok := <-ch:
			if !ok {
				t.Fatalf("watch closed after %d of %d events", len(got), n)
			}
			if b.Err != nil {
				t.Fatalf("watch failed after %d of %d events: %v", len(got), n, b.Err)
			}
			got = append(got, b.Events...)
		case <-timeout:
			t.Fatalf("watch delivered %d of %d events in 30s", len(got), n)
		}
	}
	if len(got) != n {
		t.Fatalf("watch delivered %d events, want %d", len(got), n)
	}
	return got
}

// describe is an event as the comparison sees it.
func describe(ev state.Event) string {
	seq := uint64(0)
	if ev.Record != nil {
		seq = ev.Record.HeartbeatSeq
	}
	return fmt.Sprintf("%s %s/%s seq %d at %s", ev.Type, ev.Key.Role, ev.Key.NodeID, seq, ev.Revision)
}

// sameEvents fails unless got and want are the same events in the same
// order.
func sameEvents(t *testing.T, what string, got, want []state.Event) {
	t.Helper()
	for i := range want {
		if describe(got[i]) != describe(want[i]) {
			t.Fatalf("%s: event %d is %s, the etcd watch's is %s", what, i, describe(got[i]), describe(want[i]))
		}
	}
}

// writeVersions writes versions heartbeats of each of nodes new workers
// (named prefix00, prefix01, ...) through s, the workers in parallel, then
// removes the first; it returns the number of changes.
func writeVersions(t *testing.T, s *Store, cid, prefix string, nodes, versions int) int {
	t.Helper()
	ctx := testCtx(t)
	var wg sync.WaitGroup
	for n := range nodes {
		wg.Go(func() {
			rec := record(cid, cluster.RoleWorker, fmt.Sprintf("%s%02d", prefix, n), "i", 0)
			for v := range versions {
				rec.HeartbeatSeq = uint64(v + 1)
				if _, err := s.UpsertNode(ctx, rec, time.Minute); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if _, err := s.RemoveNode(ctx, cluster.Key{ClusterID: cid, Role: cluster.RoleWorker, NodeID: prefix + "00"}, "i"); err != nil {
		t.Fatal(err)
	}
	return nodes*versions + 1
}

// TestWatchFromCache checks that a store with the snapshot cache serves
// Watch from the cache's log, without an etcd watch of its own, and
// delivers exactly what an etcd watch from the same revision delivers, in
// the same order: the puts and the removal, written through another
// store and through this one.
func TestWatchFromCache(t *testing.T) {
	testenv.SkipIfShort(t)
	e := testenv.StartEtcd(t, testenv.EtcdOptions{})
	ctx := testCtx(t)
	s := newStore(t, optionsFor(e, true))
	ref := newStore(t, optionsFor(e, false)) // its Watch is an etcd watch
	other := newStore(t, optionsFor(e, true))
	waitCacheReady(t, s)
	cid := uniqueCluster(t)
	snap, err := s.Snapshot(ctx, cid)
	if err != nil {
		t.Fatal(err)
	}
	got := s.Watch(ctx, cid, snap.Revision)
	want := ref.Watch(ctx, cid, snap.Revision)
	n := writeVersions(t, other, cid, "w", 4, 10)
	own := record(cid, cluster.RoleWorker, "own", "i", 1)
	if _, err := s.UpsertNode(ctx, own, time.Minute); err != nil {
		t.Fatal(err)
	}
	n++
	sameEvents(t, "cached watch", collect(t, got, n), collect(t, want, n))
	if st := s.Stats(); st.CachedWatches != 1 || st.WatchCatchUps != 0 {
		t.Fatalf("stats %+v: want one watch served from the cache, without catching up from etcd", st)
	}
}

// TestWatchCatchesUpFromEtcd checks a watch that starts further behind than
// the cache's log holds: it catches up with an etcd watch, then goes on
// from the log, without a gap or a duplicate at either switch.
func TestWatchCatchesUpFromEtcd(t *testing.T) {
	testenv.SkipIfShort(t)
	e := testenv.StartEtcd(t, testenv.EtcdOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := newStore(t, optionsFor(e, true))
	ref := newStore(t, optionsFor(e, false))
	waitCacheReady(t, s)
	cid := uniqueCluster(t)
	snap, err := s.Snapshot(ctx, cid)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	n := writeVersions(t, ref, cid, "w", 64, logSize/64+2)
	t.Logf("%d changes written in %s", n, time.Since(start))
	if _, err := s.Snapshot(ctx, cid); err != nil { // the cache has applied them all
		t.Fatal(err)
	}
	got := s.Watch(ctx, cid, snap.Revision)
	want := ref.Watch(ctx, cid, snap.Revision)
	sameEvents(t, "watch from behind the log", collect(t, got, n), collect(t, want, n))
	// Live changes after the catch-up, served from the log again.
	m := writeVersions(t, ref, cid, "later-", 2, 3)
	sameEvents(t, "watch after catching up", collect(t, got, m), collect(t, want, m))
	if st := s.Stats(); st.CachedWatches != 1 || st.WatchCatchUps != 1 {
		t.Fatalf("stats %+v: want one watch, which caught up from etcd once", st)
	}
}
