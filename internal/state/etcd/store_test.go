package etcd

import (
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/testenv"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestWritePath walks one slot through every ordering decision and checks
// what etcd holds after each, for both snapshot paths.
func TestWritePath(t *testing.T) {
	testenv.SkipIfShort(t)
	e := testenv.StartEtcd(t, testenv.EtcdOptions{})
	raw := e.Client(t)
	for _, cache := range []bool{false, true} {
		t.Run(map[bool]string{false: "range", true: "cache"}[cache], func(t *testing.T) {
			ctx := testCtx(t)
			s := newStore(t, optionsFor(e, cache))
			cid := uniqueCluster(t)
			const ttl = 30 * time.Second

			steps := []struct {
				name    string
				rec     *cluster.Record
				outcome state.Outcome
				dec     cluster.Decision
				wantSeq uint64
				wantInc string
			}{
				{"insert", record(cid, cluster.RoleWorker, "w1", "inc-a", 1), state.OutcomeAccepted, cluster.DecisionInsert, 1, "inc-a"},
				{"advance", record(cid, cluster.RoleWorker, "w1", "inc-a", 2), state.OutcomeAccepted, cluster.DecisionAdvance, 2, "inc-a"},
				{"duplicate", record(cid, cluster.RoleWorker, "w1", "inc-a", 2), state.OutcomeDuplicate, cluster.DecisionDuplicate, 2, "inc-a"},
				{"stale", record(cid, cluster.RoleWorker, "w1", "inc-a", 1), state.OutcomeStale, cluster.DecisionStale, 2, "inc-a"},
				{"restart", record(cid, cluster.RoleWorker, "w1", "inc-b", 0), state.OutcomeAccepted, cluster.DecisionRestart, 0, "inc-b"},
				{"advance after restart", record(cid, cluster.RoleWorker, "w1", "inc-b", 1), state.OutcomeAccepted, cluster.DecisionAdvance, 1, "inc-b"},
			}
			for _, st := range steps {
				res, err := s.UpsertNode(ctx, st.rec, ttl)
				if err != nil {
					t.Fatalf("%s: %v", st.name, err)
				}
				if res.Outcome != st.outcome || res.Decision != st.dec {
					t.Fatalf("%s: outcome %s decision %s, want %s %s", st.name, res.Outcome, res.Decision, st.outcome, st.dec)
				}
				if res.Record == nil || res.Record.HeartbeatSeq != st.wantSeq || res.Record.IncarnationID != st.wantInc {
					t.Fatalf("%s: result record %+v, want seq %d inc %s", st.name, res.Record, st.wantSeq, st.wantInc)
				}
				gr, err := raw.Get(ctx, s.keys.slot(st.rec.Key()))
				if err != nil || len(gr.Kvs) != 1 {
					t.Fatalf("%s: get: %v %v", st.name, gr, err)
				}
				stored, err := cluster.Decode(gr.Kvs[0].Value)
				if err != nil {
					t.Fatalf("%s: decode stored: %v", st.name, err)
				}
				if stored.HeartbeatSeq != st.wantSeq || stored.IncarnationID != st.wantInc {
					t.Fatalf("%s: stored seq %d inc %s, want %d %s", st.name, stored.HeartbeatSeq, stored.IncarnationID, st.wantSeq, st.wantInc)
				}
				if gr.Kvs[0].Lease == 0 {
					t.Fatalf("%s: stored key has no lease", st.name)
				}
				if res.Revision.String() == "" {
					t.Fatalf("%s: empty revision", st.name)
				}
			}

			// Two leases were granted (one per incarnation); the first is
			// left to expire, not revoked (a revoke could take a record
			// the old incarnation put on it after the slot was emptied).
			st := s.Stats()
			if st.LeaseGrants != 2 || st.LeaseRevokes != 0 {
				t.Fatalf("stats %+v: want 2 grants and no revoke", st)
			}

			if cache {
				waitCacheReady(t, s)
			}
			snap, err := s.Snapshot(ctx, cid)
			if err != nil {
				t.Fatal(err)
			}
			if len(snap.Records) != 1 || snap.Records[0].IncarnationID != "inc-b" {
				t.Fatalf("snapshot records %+v", snap.Records)
			}
			if cache && s.Stats().CacheSnapshots != 1 || !cache && s.Stats().RangeSnapshots != 1 {
				t.Fatalf("snapshot path: stats %+v", s.Stats())
			}

			// Removal checks the incarnation.
			key := cluster.Key{ClusterID: cid, Role: cluster.RoleWorker, NodeID: "w1"}
			res, err := s.RemoveNode(ctx, key, "inc-a")
			if err != nil || res.Outcome != state.OutcomeStale || res.Record == nil || res.Record.IncarnationID != "inc-b" {
				t.Fatalf("remove other incarnation: %+v %v", res, err)
			}
			res, err = s.RemoveNode(ctx, key, "inc-b")
			if err != nil || res.Outcome != state.OutcomeAccepted {
				t.Fatalf("remove: %+v %v", res, err)
			}
			res, err = s.RemoveNode(ctx, key, "inc-b")
			if err != nil || res.Outcome != state.OutcomeNotFound {
				t.Fatalf("remove again: %+v %v", res, err)
			}
			snap, err = s.Snapshot(ctx, cid)
			if err != nil || len(snap.Records) != 0 {
				t.Fatalf("snapshot after removal: %+v %v", snap, err)
			}
			// Insert after removal, same incarnation: a new lease.
			res, err = s.UpsertNode(ctx, record(cid, cluster.RoleWorker, "w1", "inc-b", 5), ttl)
			if err != nil || res.Decision != cluster.DecisionInsert {
				t.Fatalf("re-insert: %+v %v", res, err)
			}
		})
	}
}

// TestSnapshotOrderAndSkips checks order by role then node ID, and that
// unreadable values are skipped, counted, and do not fail the snapshot.
func TestSnapshotOrderAndSkips(t *testing.T) {
	testenv.SkipIfShort(t)
	e := testenv.StartEtcd(t, testenv.EtcdOptions{})
	raw := e.Client(t)
	for _, cache := range []bool{false, true} {
		t.Run(map[bool]string{false: "range", true: "cache"}[cache], func(t *testing.T) {
			ctx := testCtx(t)
			s := newStore(t, optionsFor(e, cache))
			cid := uniqueCluster(t)
			for _, n := range []struct {
				role cluster.Role
				node string
			}{{cluster.RoleWorker, "b"}, {cluster.RoleCoordinator, "z"}, {cluster.RoleWorker, "a"}, {cluster.RoleCoordinator, "c"}} {
				if _, err := s.UpsertNode(ctx, record(cid, n.role, n.node, "i", 1), time.Minute); err != nil {
					t.Fatal(err)
				}
			}
			prefix := s.keys.cluster(cid)
			if _, err := raw.Put(ctx, prefix+"worker/future", `{"schemaVersion":2,"whatever":true}`); err != nil {
				t.Fatal(err)
			}
			if _, err := raw.Put(ctx, prefix+"worker/junk", `not json`); err != nil {
				t.Fatal(err)
			}
			before := s.Stats()
			snap, err := s.Snapshot(ctx, cid)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range snap.Records {
				got = append(got, string(r.Role)+"/"+r.NodeID)
			}
			want := []string{"coordinator/c", "coordinator/z", "worker/a", "worker/b"}
			if len(got) != len(want) {
				t.Fatalf("records %v, want %v", got, want)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("records %v, want %v", got, want)
				}
			}
			after := s.Stats()
			if after.UnsupportedSkipped-before.UnsupportedSkipped != 1 || after.MalformedSkipped-before.MalformedSkipped != 1 {
				t.Fatalf("skips: before %+v after %+v", before, after)
			}
			// An upsert into the slot of a newer schema leaves it alone.
			_, err = s.UpsertNode(ctx, record(cid, cluster.RoleWorker, "future", "i", 1), time.Minute)
			if !errors.Is(err, state.ErrUnsupportedVersion) {
				t.Fatalf("upsert over newer schema: %v", err)
			}
			// One into a slot holding junk replaces it.
			res, err := s.UpsertNode(ctx, record(cid, cluster.RoleWorker, "junk", "i", 1), time.Minute)
			if err != nil || res.Outcome != state.OutcomeAccepted {
				t.Fatalf("upsert over junk: %+v %v", res, err)
			}
		})
	}
}

// TestCacheConsistentAfterForeignWrites checks that a cached snapshot sees a
// write made through another client just before it, and one whose revision
// was advanced by writes outside the prefix (progress notification path).
func TestCacheConsistentAfterForeignWrites(t *testing.T) {
	testenv.SkipIfShort(t)
	e := testenv.StartEtcd(t, testenv.EtcdOptions{})
	raw := e.Client(t)
	ctx := testCtx(t)
	s := newStore(t, optionsFor(e, true))
	other := newStore(t, optionsFor(e, false))
	cid := uniqueCluster(t)
	// The cache lists the prefix in the background after New; until it has,
	// snapshots are range reads by design.
	waitCacheReady(t, s)
	for i := range 20 {
		res, err := other.UpsertNode(ctx, record(cid, cluster.RoleWorker, "w", "i", uint64(i+1)), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		// Unrelated keys move etcd's revision past the cache's last event.
		if _, err := raw.Put(ctx, "/elsewhere/key", "x"); err != nil {
			t.Fatal(err)
		}
		snap, err := s.Snapshot(ctx, cid)
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Records) != 1 || snap.Records[0].HeartbeatSeq != uint64(i+1) {
			t.Fatalf("round %d: snapshot %+v, want seq %d (write at %s)", i, snap.Records, i+1, res.Revision)
		}
	}
	if st := s.Stats(); st.CacheSnapshots != 20 || st.RangeSnapshots != 0 {
		t.Fatalf("stats %+v: want every snapshot from the cache", st)
	}
}

// TestSnapshotWaitsForFirstListing checks that a snapshot taken right after
// New, while the cache's first listing is in flight, waits for that listing
// and is answered from the cache instead of reading the prefix a second
// time (two copies of a large listing at once are most of a coordinator's
// peak memory at start).
func TestSnapshotWaitsForFirstListing(t *testing.T) {
	testenv.SkipIfShort(t)
	e := testenv.StartEtcd(t, testenv.EtcdOptions{})
	ctx := testCtx(t)
	cid := uniqueCluster(t)
	writer := newStore(t, optionsFor(e, false))
	rec := record(cid, cluster.RoleWorker, "w", "i", 1)
	if _, err := writer.UpsertNode(ctx, rec, time.Minute); err != nil {
		t.Fatal(err)
	}
	s := newStore(t, optionsFor(e, true))
	snap, err := s.Snapshot(ctx, cid)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Records) != 1 || snap.Records[0].NodeID != "w" {
		t.Fatalf("snapshot %+v, want the one record", snap.Records)
	}
	if st := s.Stats(); st.CacheSnapshots != 1 || st.RangeSnapshots != 0 || st.CacheResyncs != 1 {
		t.Fatalf("stats %+v: want one listing and the snapshot from the cache", st)
	}
}
