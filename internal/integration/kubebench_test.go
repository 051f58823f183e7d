package integration

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
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
// the closed-loop writers (default 200), TALON_KUBE_MAX_INFLIGHT and
// TALON_KUBE_ADMISSION_WAIT_MS the stores' write admission (default: the
// backend's defaults).
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
	for _, ns := range []string{"raw", "talon"} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
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
	rawRate, rawLat, rawFail, rawErr := closedLoop(writers, phase, func(w int) error {
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
	if rawFail > 0 {
		t.Logf("raw kube: %d failures, first %v", rawFail, rawErr)
	}
	kubeconfig := k.WriteKubeconfig(t, k.AdminToken())
	addrs := twoCoordinators(t, coordOpts, func() (state.Store, error) {
		o := kube.Options{Kubeconfig: kubeconfig, Namespace: "talon", RequestTimeout: 30 * time.Second, Logger: slog.New(slog.DiscardHandler),
			MaxInflightWrites: envInt(t, "TALON_KUBE_MAX_INFLIGHT", 0), AdmissionWait: time.Duration(envInt(t, "TALON_KUBE_ADMISSION_WAIT_MS", 0)) * time.Millisecond}
		return kube.New(ctx, o)
	})
	rate, lat, fail, ferr := heartbeatThroughCoordinators(t, addrs, "bench", writers, phase)
	if fail > 0 {
		t.Logf("talon kube heartbeats: %d failures (%.0f/s), first %v", fail, float64(fail)/phase.Seconds(), ferr)
	}
	r := rateRow(fmt.Sprintf("Kubernetes Lease heartbeats, %d writers, 2 coordinators", writers), rate, rawRate, lat, rawLat, 0.6, 0, 250*time.Millisecond)
	t.Logf("max inflight %s, admission wait %sms", os.Getenv("TALON_KUBE_MAX_INFLIGHT"), os.Getenv("TALON_KUBE_ADMISSION_WAIT_MS"))
	t.Logf("%s: talon %s | limit %s | ratio %s | goal %s met=%t | load %s", r.path, r.talon, r.limit, r.ratio, r.goal, r.met, loadAverage())
}
