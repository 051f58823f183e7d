package state_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/state/memory"
)

func instrumentedRecord(node string, seq uint64) *cluster.Record {
	return &cluster.Record{
		ClusterID: "c", NodeID: node, Role: cluster.RoleWorker, IncarnationID: "inc-" + node,
		Address: "10.1.2.3:7070", Version: "v1", StartTimeUnixMs: 1_784_800_000_000,
		HeartbeatSeq: seq, Health: cluster.HealthHealthy, Ready: true,
	}
}

// TestInstrumentedStore: every operation is timed under its name, spans
// nest under the caller's, a failure is counted by its code (a cancelled
// call is not), and an open watch shows in the gauge until it ends.
func TestInstrumentedStore(t *testing.T) {
	mem := memory.New(memory.Options{Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { mem.Close() })
	reg := prometheus.NewRegistry()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	s, err := state.Instrument(mem, reg, tp, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := state.Instrument(mem, reg, tp, time.Now); err == nil {
		t.Fatal("a second Instrument on one registry registered its metrics twice")
	}
	ctx, parent := tp.Tracer("test").Start(context.Background(), "caller")
	if _, err := s.UpsertNode(ctx, instrumentedRecord("w1", 1), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	snap, err := s.Snapshot(ctx, "c")
	if err != nil || len(snap.Records) != 1 {
		t.Fatalf("snapshot: %v, %v", snap, err)
	}
	if _, err := s.SetMarks(ctx, instrumentedRecord("w1", 1).Key(), "", state.MarkChange{SetCordon: true, Cordon: state.Cordon{By: "op"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RemoveNode(ctx, instrumentedRecord("w1", 1).Key(), "inc-w1"); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckReady(ctx); err != nil {
		t.Fatal(err)
	}
	parent.End()

	wctx, cancel := context.WithCancel(context.Background())
	ch := s.Watch(wctx, "c", snap.Revision)
	if g := watchesOpen(t, reg); g != 1 {
		t.Fatalf("watches gauge %v with one open, want 1", g)
	}
	if _, err := s.UpsertNode(context.Background(), instrumentedRecord("w2", 1), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	select {
	case b := <-ch:
		if b.Err != nil || len(b.Events) == 0 {
			t.Fatalf("first watch batch: %+v", b)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no watch batch within 10s")
	}
	cancel()
	for range ch {
	}
	waitGauge(t, reg, 0)

	counts := map[string]uint64{}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "talon_coordinator_store_operation_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			counts[m.GetLabel()[1].GetValue()] = m.GetHistogram().GetSampleCount()
		}
	}
	for op, want := range map[string]uint64{"upsert": 2, "snapshot": 1, "marks": 1, "remove": 1, "check_ready": 1, "watch": 1, "transition": 0} {
		if counts[op] != want {
			t.Errorf("operation %s timed %d times, want %d (all: %v)", op, counts[op], want, counts)
		}
	}
	names := map[string]bool{}
	for _, sp := range rec.Ended() {
		names[sp.Name()] = true
		if sp.Name() == "store.upsert" && sp.Parent().SpanID() == parent.SpanContext().SpanID() {
			names["nested"] = true
		}
	}
	for _, n := range []string{"store.upsert", "store.snapshot", "store.marks", "store.remove", "store.check_ready", "store.watch", "nested"} {
		if !names[n] {
			t.Errorf("no %s span (ended: %v)", n, names)
		}
	}

	// Failures by code; a cancelled call is not one.
	mem.Close()
	if _, err := s.Snapshot(context.Background(), "c"); err == nil {
		t.Fatal("snapshot of a closed store succeeded")
	} else if got := testutil.ToFloat64(s.Failures().WithLabelValues("snapshot", state.Code(err))); got != 1 {
		t.Errorf("failed snapshot counted %v times under %q, want 1", got, state.Code(err))
	}
	cctx, ccancel := context.WithCancel(context.Background())
	ccancel()
	_, err = s.UpsertNode(cctx, instrumentedRecord("w3", 1), time.Second)
	if errors.Is(err, context.Canceled) && testutil.ToFloat64(s.Failures().WithLabelValues("upsert", state.Code(err))) != 0 {
		t.Error("a cancelled upsert counted as a failure")
	}
}

// watchesOpen reads talon_coordinator_store_watches from reg.
func watchesOpen(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "talon_coordinator_store_watches" {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("no talon_coordinator_store_watches")
	return 0
}

func waitGauge(t *testing.T, reg *prometheus.Registry, want float64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for watchesOpen(t, reg) != want {
		if time.Now().After(deadline) {
			t.Fatalf("watches gauge %v, want %v", watchesOpen(t, reg), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
