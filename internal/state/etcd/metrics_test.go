package etcd

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/testenv"
	"github.com/talonhq/talon/internal/testsupport"
)

// TestStatsMetrics checks that a store with a Registerer exports its
// counters as talon_state_etcd_* metrics that follow Prometheus naming,
// that they count what the store did, and that Close unregisters them.
func TestStatsMetrics(t *testing.T) {
	testenv.SkipIfShort(t)
	e := testenv.StartEtcd(t, testenv.EtcdOptions{})
	ctx := testCtx(t)
	reg := prometheus.NewRegistry()
	o := optionsFor(e, true)
	o.Registerer = reg
	s, err := New(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	waitCacheReady(t, s)
	cid := uniqueCluster(t)
	rec := record(cid, cluster.RoleWorker, "w", "i", 1)
	if _, err := s.UpsertNode(ctx, rec, time.Minute); err != nil {
		t.Fatal(err)
	}
	rec.HeartbeatSeq = 2
	if _, err := s.UpsertNode(ctx, rec, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Snapshot(ctx, cid); err != nil {
		t.Fatal(err)
	}

	want := `
# HELP talon_state_etcd_lease_requests_total Lease requests sent to etcd, by operation (grant, keepalive, revoke).
# TYPE talon_state_etcd_lease_requests_total counter
talon_state_etcd_lease_requests_total{operation="grant"} 1
talon_state_etcd_lease_requests_total{operation="keepalive"} 1
talon_state_etcd_lease_requests_total{operation="revoke"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "talon_state_etcd_lease_requests_total"); err != nil {
		t.Fatal(err)
	}
	if res, err := s.ProposeTransition(ctx, rec.Key(), "i", 2, state.TransitionLate); err != nil || res.Outcome != state.OutcomeAccepted {
		t.Fatalf("ProposeTransition = %+v, %v", res, err)
	}
	if res, err := s.ProposeTransition(ctx, rec.Key(), "i", 1, state.TransitionExpire); err != nil || res.Outcome != state.OutcomeStale {
		t.Fatalf("ProposeTransition(expire, seq 1) = %+v, %v; want stale", res, err)
	}
	wantTransitions := `
# HELP talon_state_etcd_transitions_total ProposeTransition calls, by operation (the transition: late, expire) and outcome (accepted, stale, not_found, error).
# TYPE talon_state_etcd_transitions_total counter
talon_state_etcd_transitions_total{operation="expire",outcome="accepted"} 0
talon_state_etcd_transitions_total{operation="late",outcome="accepted"} 1
talon_state_etcd_transitions_total{operation="expire",outcome="error"} 0
talon_state_etcd_transitions_total{operation="late",outcome="error"} 0
talon_state_etcd_transitions_total{operation="expire",outcome="not_found"} 0
talon_state_etcd_transitions_total{operation="late",outcome="not_found"} 0
talon_state_etcd_transitions_total{operation="expire",outcome="stale"} 1
talon_state_etcd_transitions_total{operation="late",outcome="stale"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(wantTransitions), "talon_state_etcd_transitions_total"); err != nil {
		t.Fatal(err)
	}
	mfs := testsupport.LintMetrics(t, reg, "talon_state_etcd_", 11)
	cacheSnaps := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "talon_state_etcd_snapshots_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == "cache" {
				cacheSnaps = m.GetCounter().GetValue()
			}
		}
	}
	if cacheSnaps < 1 {
		t.Fatalf("talon_state_etcd_snapshots_total{form=\"cache\"} = %v, want at least 1", cacheSnaps)
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if mfs, _ := reg.Gather(); len(mfs) != 0 {
		t.Fatalf("%d metric families left after Close", len(mfs))
	}
}
