package app

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/state/kube"
)

// TestOpenStoreKubeAdmission checks that the kube-max-inflight-writes and
// kube-admission-wait settings reach the Kubernetes backend and that its
// metrics land in the coordinator's registry. The store is built without
// contacting the API server.
func TestOpenStoreKubeAdmission(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	const kc = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`
	if err := os.WriteFile(kubeconfig, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	var cfg *config.Config
	var out, errb bytes.Buffer
	env := Env{Stdout: &out, Stderr: &errb, Runners: Runners{
		Coordinator: func(_ context.Context, c *config.Config, _ *slog.Logger) error { cfg = c; return nil },
	}}
	code := Main(context.Background(), []string{"coordinator", "--node-id", "c1", "--insecure-control-plane",
		"--state-backend", "kubernetes", "--kubeconfig", kubeconfig, "--kube-max-inflight-writes", "7", "--kube-admission-wait", "80ms"}, env)
	if code != 0 || cfg == nil {
		t.Fatalf("coordinator exited %d: %s", code, errb.String())
	}
	reg := prometheus.NewRegistry()
	s, err := openStore(context.Background(), cfg, slog.New(slog.DiscardHandler), reg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ks, ok := s.(*kube.Store)
	if !ok {
		t.Fatalf("OpenStore returned %T, want *kube.Store", s)
	}
	if n, wait := ks.WriteLimit(); n != 7 || wait != 80*time.Millisecond {
		t.Fatalf("write limit = %d, %s; want 7, 80ms", n, wait)
	}
	// Snapshots come from the watch-fed cache, fenced under the node ID.
	if on, fence := ks.CachesSnapshots(); !on || fence != kube.FenceName("c1") {
		t.Fatalf("snapshot cache %t, fence %q; want on, %q", on, fence, kube.FenceName("c1"))
	}
	if n, err := testutil.GatherAndCount(reg, "talon_state_kube_write_refusals_total", "talon_state_kube_writes_inflight"); err != nil || n != 2 {
		t.Fatalf("kube metrics in the registry: %d series, %v; want 2", n, err)
	}
}

// TestKubeAdmissionDefaultsMatch keeps the configuration's defaults equal
// to the backend's own.
func TestKubeAdmissionDefaultsMatch(t *testing.T) {
	var cfg *config.Config
	var out, errb bytes.Buffer
	env := Env{Stdout: &out, Stderr: &errb, Runners: Runners{
		Coordinator: func(_ context.Context, c *config.Config, _ *slog.Logger) error { cfg = c; return nil },
	}}
	if code := Main(context.Background(), []string{"coordinator", "--node-id", "c1", "--insecure-control-plane"}, env); code != 0 || cfg == nil {
		t.Fatalf("coordinator exited %d: %s", code, errb.String())
	}
	if cfg.Kube.MaxInflightWrites != kube.DefaultMaxInflightWrites || cfg.Kube.AdmissionWait != kube.DefaultAdmissionWait {
		t.Fatalf("config defaults %d, %s; kube defaults %d, %s", cfg.Kube.MaxInflightWrites, cfg.Kube.AdmissionWait, kube.DefaultMaxInflightWrites, kube.DefaultAdmissionWait)
	}
}
