package bench_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/talonhq/talon/internal/bench"
	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/coordinator"
	"github.com/talonhq/talon/internal/protocol"
	"github.com/talonhq/talon/internal/testsupport/coordtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRunCountsSuccessesFailuresAndBackoffs(t *testing.T) {
	var n atomic.Int64
	res := bench.Run(context.Background(), 3, 200*time.Millisecond, func(ctx context.Context, caller int) error {
		if caller < 0 || caller > 2 {
			t.Errorf("caller %d", caller)
		}
		time.Sleep(time.Millisecond)
		switch n.Add(1) % 4 {
		case 1:
			return protocol.NewError(protocol.CodeTimeout, "slow")
		case 2:
			return fmt.Errorf("%w: %v", bench.ErrBackedOff, protocol.NewError(protocol.CodeUnavailable, "busy"))
		}
		return nil
	})
	if res.Ops == 0 || res.Failures["timeout"] == 0 || res.BackedOff == 0 || res.Failures["unavailable"] != 0 {
		t.Fatalf("result %+v", res)
	}
	if res.Ops != len(res.Latencies) || res.PerSecond() <= 0 || res.Elapsed < 200*time.Millisecond {
		t.Fatalf("ops %d, %d latencies, %.0f/s, elapsed %s", res.Ops, len(res.Latencies), res.PerSecond(), res.Elapsed)
	}
	for i := 1; i < len(res.Latencies); i++ {
		if res.Latencies[i] < res.Latencies[i-1] {
			t.Fatal("latencies not sorted")
		}
	}
	if p50, p99, m := res.P50(), res.P99(), res.Max(); p50 < time.Millisecond || p99 < p50 || m < p99 {
		t.Fatalf("p50 %s p99 %s max %s", p50, p99, m)
	}
	if !errors.Is(res.FirstErr, &protocol.Error{Code: protocol.CodeTimeout}) {
		t.Fatalf("first error %v", res.FirstErr)
	}
	s := res.Summary()
	if s.Ops != res.Ops || s.Failures["timeout"] != res.Failures["timeout"] || s.BackedOff != res.BackedOff || s.P50Ms <= 0 {
		t.Fatalf("summary %+v", s)
	}
}

func TestEmptyResult(t *testing.T) {
	var r bench.Result
	if r.PerSecond() != 0 || r.P50() != 0 || r.P99() != 0 || r.Max() != 0 || r.FailureCount() != 0 || r.Summary().Failures == nil {
		t.Fatalf("empty result %+v", r)
	}
}

func TestCode(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{protocol.NewError(protocol.CodeUnavailable, "x"), "unavailable"},
		{fmt.Errorf("call: %w", protocol.NewError(protocol.CodeNotReady, "x")), "not_ready"},
		{client.ErrNoCoordinator, "no_coordinator"},
		{context.DeadlineExceeded, "timeout"},
		{errors.New("boom"), "internal"},
	} {
		if got := bench.Code(tt.err); got != tt.want {
			t.Errorf("Code(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}

func TestRecordIsTypical(t *testing.T) {
	b, err := cluster.Encode(bench.Record("bench", "worker-00001", 7))
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 512 || len(b) > 2048 || len(b) != bench.RecordBytes() {
		t.Fatalf("typical record encodes to %d bytes (RecordBytes %d), want about 1 KB", len(b), bench.RecordBytes())
	}
}

// TestHeartbeatsAndLookups measures both paths through a real coordinator
// on the memory store.
func TestHeartbeatsAndLookups(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a coordinator")
	}
	c := coordtest.Start(t, coordtest.Options{ClusterID: "bench", RequestTimeout: 5 * time.Second, WaitReady: true,
		Limits: coordinator.Limits{NodeWritesPerInterval: -1}, // writers heartbeat back to back
		Timing: cluster.Timing{HeartbeatInterval: 5 * time.Second, UnhealthyAfter: time.Minute, LeaseTTL: 2 * time.Minute}})
	ctx := context.Background()
	registered := 0
	hb, err := bench.Heartbeats(ctx, bench.HeartbeatOptions{Coordinators: []string{c.ControlAddr}, ClusterID: "bench", Writers: 8, Duration: 500 * time.Millisecond,
		Registered: func() { registered++ }})
	if err != nil {
		t.Fatal(err)
	}
	if hb.Ops == 0 || hb.FailureCount() != 0 || registered != 1 {
		t.Fatalf("heartbeats %+v, Registered called %d times", hb, registered)
	}
	lk, err := bench.Lookups(ctx, bench.LookupOptions{Coordinators: []string{c.ControlAddr}, Callers: 4, Duration: 500 * time.Millisecond, Keys: 100, Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	if lk.Ops == 0 || lk.FailureCount() != 0 {
		t.Fatalf("lookups %+v", lk)
	}
	if err := bench.Seed(ctx, c.Store, "bench", 20, time.Minute); err != nil {
		t.Fatal(err)
	}
	snap, err := c.Store.Snapshot(ctx, "bench")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(snap.Records); n < 28 {
		t.Fatalf("%d records after seeding 20 beside 8 simulated workers", n)
	}
}

func TestRunPacedOffersEverySlotOnce(t *testing.T) {
	var slow atomic.Bool
	res := bench.RunPaced(context.Background(), 10, 100*time.Millisecond, 500*time.Millisecond, func(ctx context.Context, slot int) error {
		switch {
		case slot == 0 && slow.CompareAndSwap(false, true):
			time.Sleep(250 * time.Millisecond) // its next two slot times pass meanwhile
		case slot == 1:
			return protocol.NewError(protocol.CodeUnavailable, "busy")
		case slot == 2:
			return fmt.Errorf("%w: %v", bench.ErrBackedOff, protocol.NewError(protocol.CodeUnavailable, "busy"))
		}
		return nil
	})
	// 10 slots, 5 slot times each before the end: every one is either
	// sent or missed.
	if res.Sent+res.Missed != 50 || res.Missed < 2 {
		t.Fatalf("sent %d, missed %d; want 50 in all, at least 2 missed", res.Sent, res.Missed)
	}
	if res.Failures["unavailable"] != 5 || res.BackedOff != 5 || res.Ops != res.Sent-10 || res.Ops != len(res.Latencies) {
		t.Fatalf("result %+v", res.Result)
	}
	if res.Elapsed != 500*time.Millisecond || res.Max() < 250*time.Millisecond {
		t.Fatalf("elapsed %s, max %s; want the window, 500ms, and the slow call", res.Elapsed, res.Max())
	}
}

func TestRunPacedEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	res := bench.RunPaced(ctx, 4, 100*time.Millisecond, time.Hour, func(ctx context.Context, _ int) error { return nil })
	if res.Elapsed >= time.Hour || res.Sent < 4 || res.FailureCount() != 0 {
		t.Fatalf("result %+v", res)
	}
}
