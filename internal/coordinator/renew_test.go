package coordinator

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state/memory"
)

// TestQuietWorkerRenewsAndStaysLive runs a worker whose heartbeats change
// nothing but counters, with a status interval much longer than
// unhealthy-after: its record's version stays put, yet it must never be
// marked late (the coordinator's late proposals are refused by the store's
// clock of the lease renewals), while its heartbeats write nothing; once
// it stops, the store's clock lets the mark through.
func TestQuietWorkerRenewsAndStaysLive(t *testing.T) {
	store := memory.New(memory.Options{})
	t.Cleanup(func() { store.Close() })
	timing := testTiming
	timing.StatusInterval = time.Hour
	f := startTimed(t, store, 0, Limits{}, timing)
	cn := dial(t, f.addr)
	if _, err := register(t, cn, workerRecord("w1", "inc", 0)); err != nil {
		t.Fatal(err)
	}
	key := workerRecord("w1", "inc", 0).Key()
	record := func() *cluster.Record {
		snap, err := store.Snapshot(context.Background(), "test")
		if err != nil {
			t.Fatal(err)
		}
		return snap.Find(key)
	}

	var seq atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(timing.HeartbeatInterval)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				r := workerRecord("w1", "inc", seq.Add(1))
				r.Counters.HitsTotal = r.HeartbeatSeq
				if _, err := heartbeat(t, cn, r); err != nil {
					t.Errorf("heartbeat: %v", err)
					return
				}
			}
		}
	}()
	// Five times unhealthy-after of quiet heartbeats.
	deadline := time.Now().Add(5 * timing.UnhealthyAfter)
	for time.Now().Before(deadline) {
		if r := record(); r == nil || r.Late {
			close(stop)
			<-done
			t.Fatalf("a worker heartbeating every %s was marked late or dropped: %v", timing.HeartbeatInterval, r)
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	<-done
	if r := record(); r.HeartbeatSeq != 0 {
		t.Fatalf("quiet heartbeats wrote the record (stored seq %d); want only lease renewals (seq 0)", r.HeartbeatSeq)
	}
	if n := testutil.ToFloat64(f.c.m.renewals); n < float64(seq.Load())-1 {
		t.Fatalf("talon_coordinator_heartbeat_renewals_total = %v after %d quiet heartbeats", n, seq.Load())
	}
	if n := testutil.ToFloat64(f.c.m.transitions.WithLabelValues("late", "renewed")); n == 0 {
		t.Fatal("no late proposal was refused as renewed: the coordinator never checked the quiet record")
	}
	// Silent now: late within unhealthy-after plus a few refresh periods.
	waitFor(t, "the silent worker marked late", func() bool { r := record(); return r != nil && r.Late })
}
