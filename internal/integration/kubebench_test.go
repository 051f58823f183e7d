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

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/state/kube"
	"github.com/talonhq/talon/internal/testenv"
	"github.com/talonhq/talon/internal/testsupport/coordtest"
)

// kubeBenchEnv turns TestKubeHeartbeatBench on: the Kubernetes heartbeat
// row of TestBenchReport alone, for tuning the Lease backend's write
// admission. TALON_BENCH_SECONDS sets the phase length, TALON_KUBE_BENCH_WRITERS
// the closed-loop writers (default 200), TALON_KUBE_BENCH_CONFIGS the write
// admission settings to compare (see benchConfigs).
const kubeBenchEnv = "TALON_KUBE_BENCH"

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s %q: %v", name, v, err)
	}
	return n
}

// TestKubeHeartbeatBench measures raw Lease updates and heartbeats through
// two coordinators on the Lease backend against one real kube-apiserver in
// the same run, and logs the report row. It asserts nothing about speed.
func TestKubeHeartbeatBench(t *testing.T) {
	if os.Getenv(kubeBenchEnv) == "" {
		t.Skipf("measurement: set %s=1", kubeBenchEnv)
	}
	phase := time.Duration(envInt(t, "TALON_BENCH_SECONDS", 10)) * time.Second
	writers := envInt(t, "TALON_KUBE_BENCH_WRITERS", 200)
	configs := benchConfigs(t)
	ctx := context.Background()
	timing := cluster.Timing{HeartbeatInterval: 5 * time.Second, UnhealthyAfter: time.Minute, LeaseTTL: 2 * time.Minute}
	coordOpts := func(store state.Store) coordtest.Options {
		return coordtest.Options{ClusterID: "bench", Timing: timing, RequestTimeout: 30 * time.Second, ShutdownTimeout: 5 * time.Second, Store: store, WaitReady: true}
	}

	k := testenv.StartKubeAPIServer(t, testenv.KubeOptions{})
	cfg := k.RestConfig(k.AdminToken())
	cfg.QPS, cfg.Burst = -1, 0
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "raw"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	payload, _ := cluster.Encode(reportRecord("raw", "w", 1))
	leases := make([]*coordinationv1.Lease, writers)
	for w := range writers {
		l, err := cs.CoordinationV1().Leases("raw").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("w%05d", w), Annotations: map[string]string{"talon.io/record": string(payload)}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		leases[w] = l
	}
	rawLoop := func() (float64, []time.Duration) {
		rate, lat, fail, err := closedLoop(writers, phase, func(w int) error {
			l := leases[w].DeepCopy()
			now := metav1.NewMicroTime(time.Now())
			l.Spec.RenewTime = &now
			nl, err := cs.CoordinationV1().Leases("raw").Update(ctx, l, metav1.UpdateOptions{})
			if err != nil {
				return err
			}
			leases[w] = nl
			return nil
		})
		if fail > 0 {
			t.Logf("raw kube: %d failures, first %v", fail, err)
		}
		return rate, lat
	}
	kubeconfig := k.WriteKubeconfig(t, k.AdminToken())
	// Each configuration runs on its own namespace and pair of
	// coordinators, between two raw phases: the ratio is to their mean, so
	// a machine whose load changes during the run skews it less.
	rawRate, rawLat := rawLoop()
	type result struct {
		name      string
		rate      float64
		lat       []time.Duration
		fail      int
		firstFail error
	}
	var results []result
	for i, c := range configs {
		ns := fmt.Sprintf("talon-%d", i)
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		addrs := twoCoordinators(t, coordOpts, func() (state.Store, error) {
			return kube.New(ctx, kube.Options{Kubeconfig: kubeconfig, Namespace: ns, RequestTimeout: 30 * time.Second, Logger: slog.New(slog.DiscardHandler),
				MaxInflightWrites: c.inflight, AdmissionWait: c.wait})
		})
		rate, lat, fail, ferr := heartbeatThroughCoordinators(t, addrs, "bench", writers, phase)
		results = append(results, result{fmt.Sprintf("max inflight %d, admission wait %s", c.inflight, c.wait), rate, lat, fail, ferr})
	}
	rawRate2, rawLat2 := rawLoop()
	t.Logf("raw before %.0f/s, after %.0f/s", rawRate, rawRate2)
	rawMean := (rawRate + rawRate2) / 2
	rawLat = append(rawLat, rawLat2...)
	for _, r := range results {
		if r.fail > 0 {
			t.Logf("%s: %d heartbeats refused or failed (%.0f/s), first %v", r.name, r.fail, float64(r.fail)/phase.Seconds(), r.firstFail)
		}
		row := rateRow(fmt.Sprintf("Kubernetes Lease heartbeats, %d writers, 2 coordinators, %s", writers, r.name), r.rate, rawMean, r.lat, rawLat, 0.6, 0, 250*time.Millisecond)
		t.Logf("%s: talon %s | limit %s | ratio %s | goal %s met=%t", row.path, row.talon, row.limit, row.ratio, row.goal, row.met)
	}
	t.Logf("%s", loadAverage())
}

// benchConfig is one write admission setting of TestKubeHeartbeatBench.
type benchConfig struct {
	inflight int
	wait     time.Duration
}

// benchConfigs parses TALON_KUBE_BENCH_CONFIGS: comma-separated
// inflight:waitMs pairs, inflight -1 for no limit and 0 for the default;
// unset means the default only.
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
		out = append(out, benchConfig{n, time.Duration(ms) * time.Millisecond})
	}
	return out
}
