package coordinator_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state/memory"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/coordtest"
)

// gaugeValue returns the value of the unlabelled gauge name in reg, or -1
// when reg has no such series.
func gaugeValue(t *testing.T, reg prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}

// TestEligibleWorkersGauge: talon_placement_eligible_workers follows the
// placement: it counts live, healthy and ready workers, drops when a
// worker turns unready or stops heartbeating (marked late, long before its
// record expires), and is what the membership alerts read.
func TestEligibleWorkersGauge(t *testing.T) {
	clock := testsupport.NewFakeClock(time.Now())
	store := memory.New(memory.Options{Clock: clock.Now})
	t.Cleanup(func() { store.Close() })
	timing := cluster.Timing{HeartbeatInterval: 100 * time.Millisecond, UnhealthyAfter: time.Second, LeaseTTL: 2 * time.Second}
	c := coordtest.Start(t, coordtest.Options{Store: store, Timing: timing, WaitReady: true, StoreClock: clock.Now})
	waitEligible := func(want float64) {
		t.Helper()
		testsupport.WaitFor(t, 5*time.Second, "eligible workers", func() bool {
			_, _, _ = c.Lookup(context.Background(), "k#0", 1) // a lookup reads a fresh view
			return gaugeValue(t, c.Registry, "talon_placement_eligible_workers") == want
		})
	}
	waitEligible(0)
	// Fewer eligible workers than placement-replicas (default 2).
	under := func() float64 { return gaugeValue(t, c.Registry, "talon_placement_under_replicated") }
	if under() != 1 {
		t.Fatalf("under-replicated %v with no workers, want 1", under())
	}
	var seq uint64
	upsert := func(id string, ready bool) {
		t.Helper()
		seq++ // the ordering rule accepts only a newer heartbeat
		rec := &cluster.Record{ClusterID: "test", NodeID: id, Role: cluster.RoleWorker, IncarnationID: "i", HeartbeatSeq: seq,
			Address: "10.0.0.1:75" + id[1:] + "0", Version: "v", Health: cluster.HealthHealthy, Ready: ready}
		if _, err := store.UpsertNode(context.Background(), rec, timing.LeaseTTL); err != nil {
			t.Fatal(err)
		}
	}
	upsert("w1", true)
	upsert("w2", true)
	upsert("w3", false)
	waitEligible(2) // w3 is live but not ready
	if under() != 0 {
		t.Fatalf("under-replicated %v with 2 eligible workers, want 0", under())
	}
	upsert("w3", true)
	waitEligible(3)
	// Only w1 still heartbeats: the coordinator watches w2 and w3 go
	// unchanged for unhealthy-after and the store marks them late. The
	// store's clock stands still: no lease expires, only the marks count.
	stop := make(chan struct{})
	beats := make(chan struct{})
	go func() {
		defer close(beats)
		for seq := uint64(1000); ; seq++ {
			select {
			case <-stop:
				return
			case <-time.After(timing.HeartbeatInterval):
				rec := &cluster.Record{ClusterID: "test", NodeID: "w1", Role: cluster.RoleWorker, IncarnationID: "i", HeartbeatSeq: seq,
					Address: "10.0.0.1:7510", Version: "v", Health: cluster.HealthHealthy, Ready: true}
				_, _ = store.UpsertNode(context.Background(), rec, timing.LeaseTTL)
			}
		}
	}()
	waitEligible(1)
	close(stop)
	<-beats
	if under() != 1 {
		t.Fatalf("under-replicated %v with 1 eligible worker, want 1", under())
	}
}

// TestErrorSeriesFromStart: the store-error series of an outage and the
// limit-refusal series exist at zero before any error, so the first one
// counts in rate() and the alert rules and dashboard find the series on a
// healthy cluster.
func TestErrorSeriesFromStart(t *testing.T) {
	c := coordtest.Start(t, coordtest.Options{WaitReady: true})
	for name, want := range map[string]int{
		"talon_coordinator_store_errors_total":   8,  // snapshot, upsert, remove, watch x unavailable, timeout
		"talon_coordinator_limit_refusals_total": 14, // every limit
	} {
		n, err := testutil.GatherAndCount(c.Registry, name)
		if err != nil {
			t.Fatal(err)
		}
		if n != want {
			t.Errorf("%d %s series before any error, want %d", n, name, want)
		}
	}
}
