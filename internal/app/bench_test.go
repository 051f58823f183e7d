package app

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/devcluster"
	"github.com/talonhq/talon/internal/state/memory"
)

func TestBenchLookups(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a coordinator")
	}
	store := memory.New(memory.Options{})
	defer store.Close()
	cfg, err := devcluster.Config(cluster.RoleCoordinator, "c1", "127.0.0.1", func(*config.Config) {})
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
	opts := BenchOptions{Coordinators: []string{p.Coordinator().Addr().String()}, Concurrency: 4, Duration: time.Second, Keys: 100, Replicas: 2}
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

func TestBenchFlagsAreUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no backend", []string{"bench", "heartbeats"}, "--backend is required: etcd or kubernetes"},
		{"memory backend", []string{"bench", "heartbeats", "--backend", "memory"}, `--backend "memory": must be etcd or kubernetes`},
		{"writers negative", []string{"bench", "heartbeats", "--backend", "etcd", "--writers", "-1"}, "--writers -1: must be from 1 to 10000"},
		{"writers too many", []string{"bench", "heartbeats", "--backend", "kubernetes", "--writers", "10001"}, "--writers 10001: must be from 1 to 10000"},
		{"writers not a number", []string{"bench", "heartbeats", "--backend", "etcd", "--writers", "many"}, `invalid argument "many" for "--writers"`},
		{"no coordinators", []string{"bench", "heartbeats", "--backend", "etcd", "--coordinators-count", "0"}, "--coordinators-count 0: must be from 1 to 16"},
		{"too many coordinators", []string{"bench", "heartbeats", "--backend", "etcd", "--coordinators-count", "17"}, "--coordinators-count 17: must be from 1 to 16"},
		{"short duration", []string{"bench", "heartbeats", "--backend", "etcd", "--duration", "500ms"}, "--duration 500ms: must be from 1s to 1h"},
		{"output", []string{"bench", "heartbeats", "--backend", "etcd", "-o", "yaml"}, `--output "yaml": must be text or json`},
		{"etcd prefix", []string{"bench", "heartbeats", "--backend", "etcd", "--etcd-prefix", "talon/"}, `--etcd-prefix "talon/": must start with "/"`},
		{"etcd endpoint", []string{"bench", "heartbeats", "--backend", "etcd", "--etcd-endpoints", "localhost"}, `--etcd-endpoints "localhost": must be host:port or a URL`},
		{"etcd cert without key", []string{"bench", "heartbeats", "--backend", "etcd", "--etcd-cert-file", "c.pem"}, `--etcd-cert-file "c.pem" and --etcd-key-file "": set both or neither`},
		{"etcd user without password", []string{"bench", "heartbeats", "--backend", "etcd", "--etcd-username", "u"}, `--etcd-username "u": needs a password from TALON_ETCD_PASSWORD or --etcd-password-file`},
		{"kube namespace", []string{"bench", "heartbeats", "--backend", "kubernetes", "--kube-namespace", "Bench_NS"}, `--kube-namespace "Bench_NS": must be a DNS-1123 label of at most 54 characters`},
		{"kube burst", []string{"bench", "heartbeats", "--backend", "kubernetes", "--kube-qps", "100", "--kube-burst", "10"}, "--kube-burst 10: must be at least --kube-qps 100"},
		{"request timeout", []string{"bench", "heartbeats", "--backend", "etcd", "--request-timeout", "10ms"}, "--request-timeout 10ms: must be from 100ms to 1m"},
		{"lookups backend", []string{"bench", "lookups", "--backend", "consul"}, `--backend "consul": must be memory, etcd or kubernetes`},
		{"lookups backend twice", []string{"bench", "lookups", "--backend", "memory", "--backend", "memory"}, `--backend "memory": given twice`},
		{"lookups backend and coordinators", []string{"bench", "lookups", "--backend", "memory", "--coordinators", "127.0.0.1:7400"}, "--coordinators and --backend: --backend starts its own coordinators; give one or the other"},
		{"lookups backend and dir", []string{"bench", "lookups", "--backend", "memory", "--dir", "/tmp"}, "--dir and --backend"},
		{"lookups workers", []string{"bench", "lookups", "--backend", "memory", "--workers", "0"}, "--workers 0: must be from 1 to 10000"},
		{"lookups replicas over workers", []string{"bench", "lookups", "--backend", "memory", "--workers", "2", "--replicas", "3"}, "--replicas 3: must be at most --workers 2"},
		{"lookups concurrency", []string{"bench", "lookups", "--backend", "memory", "--concurrency", "0"}, "--concurrency 0: must be from 1 to 1024"},
		{"lookups output", []string{"bench", "lookups", "--insecure-control-plane", "-o", "csv"}, `--output "csv": must be text or json`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := run(t, nil, tt.args...)
			if code != ExitUsage || stdout != "" || !strings.Contains(stderr, tt.want) || !strings.Contains(stderr, "--help' for usage") {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2 and %q", code, stdout, stderr, tt.want)
			}
		})
	}
}

// TestBenchLookupsMemoryBackend runs the self-contained mode end to end on
// the memory backend (the etcd and Kubernetes runs are integration tests).
func TestBenchLookupsMemoryBackend(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a coordinator")
	}
	code, stdout, stderr := run(t, nil, "bench", "lookups", "--backend", "memory", "--workers", "50", "--duration", "1s", "--concurrency", "4", "-o", "json")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep LookupsReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("output %q: %v", stdout, err)
	}
	if len(rep.Backends) != 1 || rep.Backends[0].Backend != "memory" || rep.Backends[0].Lookups.PerSecond <= 0 || rep.Backends[0].RatioToMemory != 1 || rep.Workers != 50 {
		t.Fatalf("report %+v", rep)
	}
	if !strings.Contains(stderr, "lookups on memory: seeding 50 worker records") {
		t.Fatalf("progress %q", stderr)
	}
}
