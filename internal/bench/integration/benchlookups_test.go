package integration

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/app"
	"github.com/talonhq/talon/internal/bench/harness"
	"github.com/talonhq/talon/internal/testenv"
)

// benchLookupsEnv turns TestBenchLookups on.
const benchLookupsEnv = "TALON_BENCH_LOOKUPS"

// TestBenchLookups measures only the Kubernetes lookup rows of
// TestBenchReport (memory as the limit, 1,000 workers, 32 and 128
// callers), for iterating on the Kubernetes snapshot path without the
// whole report. It asserts nothing about speed. Run it with
// TALON_BENCH_LOOKUPS=1 (TALON_BENCH_SECONDS sets each phase's length,
// TALON_BENCH_PAIRS the pairs behind each ratio).
func TestBenchLookups(t *testing.T) {
	if os.Getenv(benchLookupsEnv) == "" {
		t.Skipf("measurement: set %s=1", benchLookupsEnv)
	}
	phase := 6 * time.Second
	if s, err := strconv.Atoi(os.Getenv("TALON_BENCH_SECONDS")); err == nil && s > 0 {
		phase = time.Duration(s) * time.Second
	}
	ctx := context.Background()
	progress := func(format string, a ...any) { t.Logf(format, a...) }
	log := slog.New(slog.DiscardHandler)
	k := testenv.StartKubeAPIServer(t, testenv.KubeOptions{})
	conn := harness.Conn{RequestTimeout: 30 * time.Second}
	conn.Kube.Kubeconfig, conn.Kube.Namespace, conn.Kube.QPS, conn.Kube.Burst = k.WriteKubeconfig(t, k.AdminToken()), "bench", 400, 800
	for _, callers := range []int{32, 128} {
		lk, err := harness.LookupBackends(ctx, app.BenchRoles(), harness.LookupOptions{Backends: []string{"memory", "kubernetes"}, Workers: 1000, Conn: conn,
			Concurrency: callers, Duration: phase / 2, Keys: 100000, Replicas: 3, Pairs: reportPairs(t)}, progress, log)
		if err != nil {
			t.Fatal(err)
		}
		ml, kl := lk.Backends[0].Result, lk.Backends[1].Result
		for _, b := range lk.Backends {
			logFailures(t, "lookups on "+b.Backend, b.Result)
		}
		t.Logf("RESULT lookups, 1,000 workers, %d callers: kubernetes %.0f/s (p99 %s) memory %.0f/s ratio %s (median (min–max) of %d pairs)",
			callers, kl.PerSecond(), kl.P99(), ml.PerSecond(), lk.Backends[1].RatioToMemory.Format("%.3f"), lk.Pairs)
	}
}
