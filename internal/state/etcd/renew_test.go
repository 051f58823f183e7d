package etcd

import (
	"testing"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/testenv"
)

// TestRenewalsWriteNothing checks what a quiet heartbeat costs etcd with
// StatusEvery: one keepalive, no revision (so nothing in etcd's history),
// while a change of status, the status interval and a lease too short to
// renew each write the record; for both snapshot paths.
func TestRenewalsWriteNothing(t *testing.T) {
	testenv.SkipIfShort(t)
	e := testenv.StartEtcd(t, testenv.EtcdOptions{})
	raw := e.Client(t)
	for _, cache := range []bool{false, true} {
		t.Run(map[bool]string{false: "range", true: "cache"}[cache], func(t *testing.T) {
			ctx := testCtx(t)
			s := newStore(t, optionsFor(e, cache))
			cid := uniqueCluster(t)
			const ttl, every = 30 * time.Second, 12
			rev := func() int64 {
				t.Helper()
				r, err := raw.Get(ctx, "/never-written")
				if err != nil {
					t.Fatal(err)
				}
				return r.Header.Revision
			}
			beat := func(rec *cluster.Record, ttl time.Duration) state.WriteResult {
				t.Helper()
				res, err := s.UpsertNode(ctx, rec, ttl, state.Heartbeat(), state.StatusEvery(every))
				if err != nil || res.Outcome != state.OutcomeAccepted || res.Decision != cluster.DecisionAdvance {
					t.Fatalf("heartbeat seq %d: %+v, %v", rec.HeartbeatSeq, res, err)
				}
				return res
			}
			reg := record(cid, cluster.RoleWorker, "w1", "inc-a", 0)
			if _, err := s.UpsertNode(ctx, reg, ttl); err != nil {
				t.Fatal(err)
			}
			waitCacheCaughtUp(t, s, cid)
			before, renewals := rev(), s.Stats().Renewals
			for seq := uint64(1); seq < every; seq++ {
				if res := beat(record(cid, cluster.RoleWorker, "w1", "inc-a", seq), ttl); !res.Renewed || res.Record.HeartbeatSeq != 0 {
					t.Fatalf("quiet heartbeat seq %d: renewed %v, record seq %d; want a renewal of the stored record (seq 0)", seq, res.Renewed, res.Record.HeartbeatSeq)
				}
			}
			if got := rev(); got != before {
				t.Fatalf("%d quiet heartbeats moved etcd's revision from %d to %d: they wrote", every-1, before, got)
			}
			if n := s.Stats().Renewals - renewals; n != every-1 {
				t.Fatalf("Stats.Renewals grew by %d, want %d", n, every-1)
			}

			// The status interval: heartbeat `every` after the stored one writes.
			if res := beat(record(cid, cluster.RoleWorker, "w1", "inc-a", every), ttl); res.Renewed {
				t.Fatal("the heartbeat a status interval after the stored record only renewed")
			}
			// A status change writes.
			changed := record(cid, cluster.RoleWorker, "w1", "inc-a", every+1)
			changed.Ready, changed.NotReadyReason = false, "cordoned"
			if res := beat(changed, ttl); res.Renewed {
				t.Fatal("a readiness change only renewed")
			}
			if got := rev(); got != before+2 {
				t.Fatalf("revision %d after two writes from %d, want %d", got, before, before+2)
			}
			// A lease shorter than minRenewTTL is refreshed by writes.
			short := record(cid, cluster.RoleWorker, "w2", "inc-a", 0)
			if _, err := s.UpsertNode(ctx, short, 3*time.Second); err != nil {
				t.Fatal(err)
			}
			next := record(cid, cluster.RoleWorker, "w2", "inc-a", 1)
			if res := beat(next, 3*time.Second); res.Renewed {
				t.Fatal("a 3s lease was renewed without a write: its silence cannot be checked to the second")
			}
		})
	}
}

// waitCacheCaughtUp takes snapshots until the store's view of the
// cluster is current (a cache store applies its watch asynchronously).
func waitCacheCaughtUp(t *testing.T, s *Store, cid string) {
	t.Helper()
	if _, err := s.Snapshot(testCtx(t), cid); err != nil {
		t.Fatal(err)
	}
}
