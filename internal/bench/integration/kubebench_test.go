package integration

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/app"
	"github.com/talonhq/talon/internal/bench/harness"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/testenv"
)

// kubeBenchEnv turns TestKubeHeartbeatBench on: the Kubernetes heartbeat
// row of TestBenchReport alone, once per write admission setting, for
// tuning the Lease backend's kube-max-inflight-writes and
// kube-admission-wait. TALON_BENCH_SECONDS sets each phase's length and
// TALON_KUBE_BENCH_CONFIGS the settings (see benchConfigs).
const kubeBenchEnv = "TALON_KUBE_BENCH"

// TestKubeHeartbeatBench runs talon bench heartbeats on one real
// kube-apiserver for each setting in turn: the raw Lease ceiling and
// heartbeats through two coordinators, in interleaved pairs
// (TALON_BENCH_PAIRS, default 3; TALON_BENCH_MIX picks the raw ceiling) so
// the ratio holds while the machine's load drifts. It asserts nothing about
// speed.
func TestKubeHeartbeatBench(t *testing.T) {
	if os.Getenv(kubeBenchEnv) == "" {
		t.Skipf("measurement: set %s=1", kubeBenchEnv)
	}
	phase := 10 * time.Second
	if s, err := strconv.Atoi(os.Getenv("TALON_BENCH_SECONDS")); err == nil && s > 0 {
		phase = time.Duration(s) * time.Second
	}
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	k := testenv.StartKubeAPIServer(t, testenv.KubeOptions{})
	conn := harness.Conn{RequestTimeout: 30 * time.Second}
	conn.Kube.Kubeconfig, conn.Kube.Namespace, conn.Kube.QPS, conn.Kube.Burst = k.WriteKubeconfig(t, k.AdminToken()), "bench", 400, 800
	for _, c := range benchConfigs(t) {
		conn.Kube.MaxInflightWrites, conn.Kube.AdmissionWait = c.inflight, c.wait
		hb, err := harness.Heartbeats(ctx, app.BenchRoles(), harness.HeartbeatOptions{Backend: "kubernetes", Conn: conn, Writers: harness.DefaultKubeWriters, Coordinators: 2, Duration: phase,
			Pairs: reportPairs(t), Mix: reportMix(), StatusInterval: cluster.DefaultStatusInterval}, func(string, ...any) {}, log)
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("max inflight %d, admission wait %s", c.inflight, c.wait)
		for _, r := range heartbeatRows(t, "Kubernetes Lease heartbeats, 200 writers, 2 coordinators, "+name, hb, 0.6, 0, 250*time.Millisecond) {
			t.Logf("%s: talon %s | limit %s | ratio %s | goal %s met=%t | %s", r.path, r.talon, r.limit, r.ratio, r.goal, r.met, loadAverage())
		}
	}
}

// benchConfig is one write admission setting of TestKubeHeartbeatBench.
type benchConfig struct {
	inflight int
	wait     time.Duration
}

// benchConfigs parses TALON_KUBE_BENCH_CONFIGS: comma-separated
// inflight:waitMs pairs, inflight -1 for no practical limit
// (config.MaxKubeInflightWrites) and 0 for the defaults; unset means the
// defaults only.
func benchConfigs(t *testing.T) []benchConfig {
	t.Helper()
	v := os.Getenv("TALON_KUBE_BENCH_CONFIGS")
	if v == "" {
		return []benchConfig{{}}
	}
	var out []benchConfig
	for _, p := range strings.Split(v, ",") {
		a, b, ok := strings.Cut(p, ":")
		n, err1 := strconv.Atoi(a)
		ms, err2 := strconv.Atoi(b)
		if !ok || err1 != nil || err2 != nil {
			t.Fatalf("TALON_KUBE_BENCH_CONFIGS entry %q: want inflight:waitMs", p)
		}
		if n < 0 {
			n = config.MaxKubeInflightWrites
		}
		out = append(out, benchConfig{n, time.Duration(ms) * time.Millisecond})
	}
	return out
}
