package integration

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/talonhq/talon/internal/bench"
	"github.com/talonhq/talon/internal/bench/harness"
	"github.com/talonhq/talon/internal/testenv"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// textRate returns the ops/s column of the row of a bench table that
// starts with name, or -1.
func textRate(out, name string) float64 {
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				v, err := strconv.ParseFloat(f[0], 64)
				if err == nil {
					return v
				}
			}
		}
	}
	return -1
}

// checkHeartbeatReport parses -o json output of talon bench heartbeats and
// checks both phases measured something.
func checkHeartbeatReport(t *testing.T, out, backend string, writers int) harness.HeartbeatReport {
	t.Helper()
	var rep harness.HeartbeatReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	c, ok := rep.Ceiling(bench.MixRenew)
	if rep.Backend != backend || rep.Writers != writers || rep.Coordinators != 2 || !ok || rep.Pairs != 1 || len(c.Phases) != 2 || len(rep.TalonPhases) != 1 ||
		c.Raw.PerSecond <= 0 || rep.Talon.PerSecond <= 0 || c.Raw.Ops <= 0 || rep.Talon.Ops <= 0 ||
		c.Raw.P50Ms <= 0 || rep.Talon.P99Ms < rep.Talon.P50Ms || c.Ratio.Median <= 0 || c.Ratio.N != 1 ||
		c.Raw.Renewals <= 0 || rep.Talon.Renewals <= 0 || c.StatusEvery != 12 ||
		rep.RawCreated <= 0 || rep.TalonCreated < writers {
		t.Fatalf("report %+v", rep)
	}
	return rep
}

// TestBenchCommandsOnEtcd runs talon bench heartbeats and talon bench
// lookups --backend against a real etcd over TLS with client certificates,
// and checks that they leave nothing behind.
func TestBenchCommandsOnEtcd(t *testing.T) {
	talontest.SkipShort(t)
	e := testenv.StartEtcd(t, testenv.EtcdOptions{ClientCertAuth: true})
	f := e.TLSFiles()
	conn := []string{"--etcd-endpoints", strings.Join(e.Endpoints(), ","), "--etcd-prefix", "/it-bench",
		"--etcd-ca-file", f.CAFile, "--etcd-cert-file", f.CertFile, "--etcd-key-file", f.KeyFile}

	r := talontest.RunTalon(t, nil, append([]string{"bench", "heartbeats", "--backend", "etcd", "--duration", "1s", "--writers", "20", "--pairs", "2", "--mix", "both"}, conn...)...)
	if r.Code != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", r.Code, r.Stdout, r.Stderr)
	}
	t.Logf("%s", r.Stdout)
	if raw, write, talon := textRate(r.Stdout, "raw renew all"), textRate(r.Stdout, "raw write 3"), textRate(r.Stdout, "talon 2"); raw <= 0 || write <= 0 || talon <= 0 ||
		!strings.Contains(r.Stdout, "leases granted: raw 20") || !strings.Contains(r.Stdout, "ratio talon/raw renew: ") || !strings.Contains(r.Stdout, "ratio talon/raw write: ") {
		t.Fatalf("raw %v talon %v in\n%s", raw, talon, r.Stdout)
	}
	if !strings.Contains(r.Stderr, "cleanup: deleted") {
		t.Fatalf("no cleanup reported: %s", r.Stderr)
	}

	prof := filepath.Join(t.TempDir(), "talon.pprof")
	r = talontest.RunTalon(t, nil, append([]string{"bench", "heartbeats", "--backend", "etcd", "--duration", "1s", "--writers", "20", "--pairs", "1", "-o", "json", "--cpuprofile", prof}, conn...)...)
	if r.Code != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", r.Code, r.Stdout, r.Stderr)
	}
	t.Logf("%s", r.Stdout)
	checkHeartbeatReport(t, r.Stdout, "etcd", 20)
	// A CPU profile is a gzipped protocol buffer (go tool pprof reads it).
	if b, err := os.ReadFile(prof); err != nil || len(b) < 64 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("--cpuprofile wrote %d bytes, not a gzipped profile: %v", len(b), err)
	}
	if r := talontest.RunTalon(t, nil, append([]string{"bench", "heartbeats", "--backend", "etcd", "--duration", "1s", "--cpuprofile", filepath.Join(t.TempDir(), "no", "such", "dir", "p")}, conn...)...); r.Code == 0 || !strings.Contains(r.Stderr, "--cpuprofile") {
		t.Fatalf("--cpuprofile into a missing directory: exit %d, stderr %s", r.Code, r.Stderr)
	}

	r = talontest.RunTalon(t, nil, append([]string{"bench", "lookups", "--backend", "memory", "--backend", "etcd", "--duration", "1s", "--workers", "200", "--pairs", "1", "-o", "json"}, conn...)...)
	if r.Code != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", r.Code, r.Stdout, r.Stderr)
	}
	t.Logf("%s", r.Stdout)
	var lr harness.LookupsReport
	if err := json.Unmarshal([]byte(r.Stdout), &lr); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, r.Stdout)
	}
	if len(lr.Backends) != 2 || lr.Backends[0].Backend != "memory" || lr.Backends[1].Backend != "etcd" ||
		lr.Backends[0].Lookups.PerSecond <= 0 || lr.Backends[1].Lookups.PerSecond <= 0 || lr.Backends[1].RatioToMemory == nil || lr.Backends[1].RatioToMemory.Median <= 0 || len(lr.Backends[0].Phases) != 2 {
		t.Fatalf("report %+v", lr)
	}

	// Every run removed its keys and leases.
	cli := e.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	left, err := cli.Get(ctx, "/it-bench/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if left.Count != 0 {
		t.Fatalf("%d keys left under /it-bench/", left.Count)
	}
}

// TestBenchCommandsOnKubernetes runs talon bench heartbeats and talon
// bench lookups --backend against a real kube-apiserver.
func TestBenchCommandsOnKubernetes(t *testing.T) {
	talontest.SkipShort(t)
	k := testenv.StartKubeAPIServer(t, testenv.KubeOptions{})
	kubeconfig := k.WriteKubeconfig(t, k.AdminToken())
	conn := []string{"--kubeconfig", kubeconfig, "--kube-namespace", "it-bench"}

	r := talontest.RunTalon(t, nil, append([]string{"bench", "heartbeats", "--backend", "kubernetes", "--duration", "1s", "--writers", "20", "--pairs", "1", "-o", "json"}, conn...)...)
	if r.Code != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", r.Code, r.Stdout, r.Stderr)
	}
	t.Logf("%s", r.Stdout)
	rep := checkHeartbeatReport(t, r.Stdout, "kubernetes", 20)
	if rep.Created != "Lease objects" || rep.RawCreated != 20 {
		t.Fatalf("created %q raw %d", rep.Created, rep.RawCreated)
	}

	r = talontest.RunTalon(t, nil, append([]string{"bench", "lookups", "--backend", "memory", "--backend", "kubernetes", "--duration", "1s", "--workers", "100", "--pairs", "1"}, conn...)...)
	if r.Code != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", r.Code, r.Stdout, r.Stderr)
	}
	t.Logf("%s", r.Stdout)
	if m, kr := textRate(r.Stdout, "memory"), textRate(r.Stdout, "kubernetes"); m <= 0 || kr <= 0 {
		t.Fatalf("memory %v kubernetes %v in\n%s", m, kr, r.Stdout)
	}

	// Every run deleted its Leases and its namespace (without a namespace
	// controller the namespace may stay Terminating, but empty).
	cs, err := kubernetes.NewForConfig(k.RestConfig(k.AdminToken()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	leases, err := cs.CoordinationV1().Leases(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leases.Items {
		if strings.HasPrefix(l.Namespace, "it-bench-") {
			t.Errorf("Lease %s/%s left behind", l.Namespace, l.Name)
		}
	}
	nss, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range nss.Items {
		if strings.HasPrefix(ns.Name, "it-bench-") && ns.DeletionTimestamp == nil {
			t.Errorf("namespace %s not deleted", ns.Name)
		}
	}
}
