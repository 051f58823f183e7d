package app

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/state/memory"
)

func TestBenchLookups(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a coordinator")
	}
	store := memory.New(memory.Options{})
	defer store.Close()
	cfg, err := devConfig(cluster.RoleCoordinator, "c1", "127.0.0.1", func(*config.Config) {})
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewCoordinator(context.Background(), cfg, store, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() { cancel(); <-done }()
	for _, id := range []string{"w1", "w2", "w3"} {
		_, err := store.UpsertNode(context.Background(), &cluster.Record{
			ClusterID: "dev", NodeID: id, Role: cluster.RoleWorker, IncarnationID: "i", Address: "127.0.0.1:1",
			Health: cluster.HealthHealthy, Ready: true,
		}, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
	}
	opts := BenchOptions{Coordinators: []string{p.C.Addr().String()}, Concurrency: 4, Duration: time.Second, Keys: 100, Replicas: 2}
	if err := opts.validate(); err != nil {
		t.Fatal(err)
	}
	var res BenchResult
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, err = BenchLookups(context.Background(), opts)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond) // the coordinator may still be warming up
	}
	if err != nil {
		t.Fatal(err)
	}
	if res.Lookups == 0 || res.Errors != 0 || res.P50 <= 0 || res.P99 < res.P50 || res.Max < res.P99 {
		t.Fatalf("result %+v", res)
	}
	var out bytes.Buffer
	if err := res.Write(&out, opts); err != nil || !strings.Contains(out.String(), "lookups/s") {
		t.Fatalf("output %q %v", out.String(), err)
	}
	bad := opts
	bad.Replicas = 17
	if err := bad.validate(); err == nil || !strings.Contains(err.Error(), "--replicas 17") {
		t.Fatalf("validate replicas 17: %v", err)
	}
}
