package worker_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state/memory"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/coordtest"
	"github.com/talonhq/talon/internal/worker"
)

// TestHungCoordinatorCostsNoHeartbeat: a worker whose first coordinator
// accepts and never answers loses no heartbeat over 20 intervals, whether
// it fails over from it once (the preference moves) or meets it first on
// every other heartbeat (Rotate): every stored record carries the next
// sequence number (a failed attempt would skip one), each lands within
// interval + the heartbeat budget of the last, no attempt fails, and the
// record is never marked late.
func TestHungCoordinatorCostsNoHeartbeat(t *testing.T) {
	if testing.Short() {
		t.Skip("20 heartbeat intervals")
	}
	const interval = 500 * time.Millisecond
	const requestTimeout = time.Second
	tm := cluster.Timing{HeartbeatInterval: interval, UnhealthyAfter: 2*interval + requestTimeout, LeaseTTL: 4 * time.Second}
	for _, rotate := range []bool{false, true} {
		t.Run(map[bool]string{false: "failover", true: "rotate"}[rotate], func(t *testing.T) {
			t.Parallel()
			store := memory.New(memory.Options{})
			t.Cleanup(func() { store.Close() })
			live := coordtest.Start(t, coordtest.Options{
				ClusterID: "test", NodeID: "coord-a", Timing: tm, RequestTimeout: requestTimeout,
				ShutdownTimeout: time.Second, Store: store, Logger: discard(), WaitReady: true,
			}).ControlAddr
			reg := prometheus.NewRegistry()
			w := newWorkerOpts(t, []string{hungAddr(t), live}, rotate, 0, func(*worker.Worker) http.Handler { return http.NotFoundHandler() }, func(o *worker.Options) {
				o.Timing, o.RequestTimeout, o.Registerer = tm, requestTimeout, reg
			})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- w.Run(ctx) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("Run: %v", err)
				}
			}()

			// Poll the store far more often than the interval and note
			// when each sequence number first appears.
			type seen struct {
				seq uint64
				at  time.Time
			}
			var beats []seen
			deadline := time.Now().Add(20*interval + 5*time.Second)
			for len(beats) < 21 && time.Now().Before(deadline) {
				if r := find(t, store); r != nil {
					if r.Late {
						t.Fatalf("record marked late at sequence %d", r.HeartbeatSeq)
					}
					if len(beats) == 0 || r.HeartbeatSeq != beats[len(beats)-1].seq {
						beats = append(beats, seen{r.HeartbeatSeq, time.Now()})
					}
				}
				time.Sleep(10 * time.Millisecond)
			}
			if len(beats) < 21 {
				t.Fatalf("%d records stored in %s, want 21", len(beats), 20*interval+5*time.Second)
			}
			budget := min(requestTimeout, max(interval/2, 500*time.Millisecond))
			var maxGap time.Duration
			for i := 1; i < len(beats); i++ {
				if beats[i].seq != beats[i-1].seq+1 {
					t.Errorf("sequence %d followed by %d: a heartbeat was lost", beats[i-1].seq, beats[i].seq)
				}
				gap := beats[i].at.Sub(beats[i-1].at)
				maxGap = max(maxGap, gap)
				if gap > interval+budget {
					t.Errorf("sequence %d stored %s after %d, over interval + budget %s", beats[i].seq, gap.Round(time.Millisecond), beats[i-1].seq, interval+budget)
				}
			}
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			for _, mf := range mfs {
				if mf.GetName() != "talon_worker_heartbeats_total" {
					continue
				}
				for _, m := range mf.GetMetric() {
					for _, l := range m.GetLabel() {
						if l.GetName() == "outcome" && l.GetValue() != "accepted" && l.GetValue() != "duplicate" {
							t.Errorf("%v attempts with outcome %s", m.GetCounter().GetValue(), l.GetValue())
						}
					}
				}
			}
			t.Logf("%d heartbeats, sequences %d..%d, largest gap between stored records %s (interval %s)",
				len(beats), beats[0].seq, beats[len(beats)-1].seq, maxGap.Round(time.Millisecond), interval)
		})
	}
}

// hungAddr is a coordinator address that accepts and never answers.
func hungAddr(t *testing.T) string {
	addr, _ := testsupport.HungListener(t, "127.0.0.7")
	return addr
}
