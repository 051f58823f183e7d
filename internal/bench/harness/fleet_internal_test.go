package harness

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/bench"
	"github.com/talonhq/talon/internal/config"
)

func TestReadUsageOfThisProcess(t *testing.T) {
	u, err := readUsage(os.Getpid())
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	if u.RSS < 1<<20 || u.CPU < 0 {
		t.Fatalf("usage %+v: want a resident set of at least 1 MiB", u)
	}
	// CPU time only grows: work until it does (a tick is 10 ms).
	var v ProcUsage
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if v, err = readUsage(os.Getpid()); err != nil || v.CPU > u.CPU {
			break
		}
	}
	if err != nil || v.CPU <= u.CPU {
		t.Fatalf("after 5 s of work: %+v (was %+v), %v", v, u, err)
	}
}

func TestRowFigures(t *testing.T) {
	const mb = 1 << 20
	tests := []struct {
		name                          string
		workers, ops                  int
		elapsed                       float64
		empty, before, after, last    []ProcUsage
		wantExpected, wantAccepted    float64
		wantCPUPer1000, wantRSSPerWkr float64
	}{
		{
			// 5,000 workers at 5 s: 1,000/s expected; 60 s accepted at
			// 1,000/s, so 30,000 in the 30 s half; the coordinators spent
			// 6 s and 9 s of CPU there: 0.5 s per 1,000. RSS grew 50 MiB
			// and 150 MiB: 100 MiB a coordinator on average, 20.48 KiB
			// a worker.
			name: "two coordinators", workers: 5000, ops: 60000, elapsed: 60,
			empty:        []ProcUsage{{RSS: 100 * mb}, {RSS: 100 * mb}},
			before:       []ProcUsage{{CPU: 10 * time.Second}, {CPU: 20 * time.Second}},
			after:        []ProcUsage{{CPU: 16 * time.Second}, {CPU: 29 * time.Second}},
			last:         []ProcUsage{{RSS: 150 * mb}, {RSS: 250 * mb}},
			wantExpected: 1000, wantAccepted: 1000, wantCPUPer1000: 0.5, wantRSSPerWkr: 20.48,
		},
		{
			name: "nothing accepted", workers: 100, ops: 0, elapsed: 60,
			empty: []ProcUsage{{RSS: mb}}, before: []ProcUsage{{}}, after: []ProcUsage{{CPU: time.Second}}, last: []ProcUsage{{RSS: mb}},
			wantExpected: 20, wantAccepted: 0, wantCPUPer1000: 0, wantRSSPerWkr: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			row := FleetRow{Workers: tt.workers, Heartbeats: bench.Summary{Ops: tt.ops, ElapsedS: tt.elapsed}}
			rowFigures(&row, 5*time.Second, 30*time.Second, tt.empty, tt.before, tt.after, tt.last)
			if !near(row.ExpectedPerSecond, tt.wantExpected) || !near(row.AcceptedPerSecond, tt.wantAccepted) ||
				!near(row.CoordinatorCPUPer1000, tt.wantCPUPer1000) || !near(row.RSSPerWorkerKiB, tt.wantRSSPerWkr) {
				t.Fatalf("expected %.3f/s accepted %.3f/s CPU %.4f s/1k RSS %.3f KiB/worker; want %.3f %.3f %.4f %.3f",
					row.ExpectedPerSecond, row.AcceptedPerSecond, row.CoordinatorCPUPer1000, row.RSSPerWorkerKiB,
					tt.wantExpected, tt.wantAccepted, tt.wantCPUPer1000, tt.wantRSSPerWkr)
			}
			if len(row.Coordinators) != len(tt.after) {
				t.Fatalf("coordinators %+v", row.Coordinators)
			}
		})
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

func TestMergeFleets(t *testing.T) {
	s, sent, missed := mergeFleets([]bench.FleetReport{
		{Heartbeats: bench.Summary{Ops: 10, PerSecond: 1, ElapsedS: 10, P50Ms: 1, P99Ms: 5, MaxMs: 9, Failures: map[string]int{"unavailable": 2}}, Sent: 12, Missed: 1},
		{Heartbeats: bench.Summary{Ops: 20, PerSecond: 2, ElapsedS: 10.5, P50Ms: 2, P99Ms: 4, MaxMs: 20, Failures: map[string]int{"unavailable": 1, "timeout": 3}, BackedOff: 4}, Sent: 24},
	})
	if s.Ops != 30 || s.PerSecond != 3 || s.ElapsedS != 10.5 || s.P50Ms != 2 || s.P99Ms != 5 || s.MaxMs != 20 || s.BackedOff != 4 ||
		s.Failures["unavailable"] != 3 || s.Failures["timeout"] != 3 || sent != 36 || missed != 1 {
		t.Fatalf("merged %+v, sent %d, missed %d", s, sent, missed)
	}
}

func TestKubeQPS(t *testing.T) {
	c := config.KubeConfig{QPS: 400, Burst: 800}
	tests := []struct {
		workers        int
		qps, wantBurst int
	}{
		{1000, 400, 800},    // 100/s a coordinator: the configured limits
		{5000, 750, 1500},   // 500/s a coordinator, half as much again
		{20000, 3000, 6000}, // 2,000/s a coordinator
	}
	for _, tt := range tests {
		qps, burst := kubeQPS(c, tt.workers, 2, 5*time.Second)
		if qps != tt.qps || burst != tt.wantBurst {
			t.Errorf("%d workers: qps %d burst %d; want %d %d", tt.workers, qps, burst, tt.qps, tt.wantBurst)
		}
	}
}

func TestCoordinatorArgs(t *testing.T) {
	env := newRunEnv(Conn{}, nil)
	o := FleetOptions{HeartbeatOptions: HeartbeatOptions{Backend: config.BackendEtcd, StatusInterval: time.Minute,
		Conn: Conn{RequestTimeout: 30 * time.Second, Etcd: config.EtcdConfig{Endpoints: []string{"127.0.0.1:2379"}, DialTimeout: 5 * time.Second, Username: "bench", Password: "secret"}}},
		Interval: 5 * time.Second}
	args := coordinatorArgs(o, env, 1, 5000, "127.0.0.1:1", "127.0.0.1:2", 0, 0)
	line := strings.Join(args, " ")
	for _, want := range []string{"coordinator ", "--node-id fleet-coordinator-2", "--listen 127.0.0.1:1", "--admin-listen 127.0.0.1:2", "--state-backend etcd",
		"--insecure-control-plane", "--heartbeat-interval 5s", "--status-interval 1m0s", "--max-records 5064", "--max-connections 10512",
		"--etcd-prefix " + env.etcdPrefix + "/talon", "--etcd-compaction-interval 0s", "--etcd-username bench"} {
		if !strings.Contains(line, want) {
			t.Errorf("%q lacks %q", line, want)
		}
	}
	if strings.Contains(line, "secret") || slices.Contains(args, "--kube-namespace") {
		t.Errorf("%q: the password goes in the environment, and no Kubernetes flag on etcd", line)
	}
	o.Backend = config.BackendKubernetes
	o.Conn.Kube.Kubeconfig = "/k.yaml"
	line = strings.Join(coordinatorArgs(o, env, 0, 100, "a:1", "a:2", 750, 1500), " ")
	for _, want := range []string{"--state-backend kubernetes", "--kube-namespace " + env.namespace, "--kube-qps 750", "--kube-burst 1500", "--kubeconfig /k.yaml"} {
		if !strings.Contains(line, want) {
			t.Errorf("%q lacks %q", line, want)
		}
	}
}

func TestFleetReportWrite(t *testing.T) {
	rep := FleetReport{Backend: "etcd", Coordinators: 2, IntervalSeconds: 5, RowSeconds: 60, LookupRate: 100, RecordBytes: 1456,
		Ceilings: []FleetCeiling{{Mix: bench.MixRenew, Writers: 1000, Raw: bench.Summary{PerSecond: 40000, P99Ms: 50}, ClientCPUPer1000: 0.015, StoreCPUPer1000: ptr(0.024)}},
		Rows: []FleetRow{
			{Workers: 5000, ExpectedPerSecond: 1000, AcceptedPerSecond: 999.5, OfCeiling: []float64{0.025}, CoordinatorCPUPer1000: 0.4,
				Heartbeats: bench.Summary{Ops: 59970, P99Ms: 4.5, Failures: map[string]int{"unavailable": 3}}, Missed: 1, RSSPerWorkerKiB: 40.2,
				StoreCPUPer1000: ptr(0.3), StoreBaselineCores: ptr(0.01), Lookups: bench.Summary{P99Ms: 3.1}},
			{Workers: 20000, Error: "fleet of 20000 workers: coordinator 1 exited"},
		}}
	var b strings.Builder
	if err := rep.Write(&b, "text"); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"raw ceiling renew: 1000 writers back to back: 40000/s", "client 0.015, store 0.024",
		"5000", "1000", "999.5", "0.025", "0.400", "40.2 KiB", "4.50ms", "3.10ms", "failures (5000 workers): unavailable 3",
		"20000  not measured (below)", "not measured (20000 workers): fleet of 20000 workers: coordinator 1 exited"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
