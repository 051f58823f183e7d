package integration

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/bench/harness"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/testenv"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// The fleet rows (issue 51): coordinator processes and simulated workers
// in processes of their own (talon bench fleet) heartbeating at the
// default interval, open loop, as talon bench heartbeats --fleet runs
// them.

// benchFleetEnv turns the fleet rows on: make bench-report sets it beside
// benchReportEnv, make bench-fleet runs them alone (TestBenchFleet).
// Its value is the fleet sizes, comma separated, or 1 for
// defaultFleetSizes.
const benchFleetEnv = "TALON_BENCH_FLEET"

// defaultFleetSizes are the fleets issue 51 asks for.
var defaultFleetSizes = []int{1000, 5000, 20000}

// fleetHost is the loopback address the fleet rows' coordinators listen
// on, apart from other tests' 127.0.0.1.
const fleetHost = "127.0.0.15"

// TestFleetHeartbeatsEtcd runs a small fleet out of process against two
// coordinator processes on a real etcd: every heartbeat is accepted and
// the fleet offers the load it was asked for, open loop.
func TestFleetHeartbeatsEtcd(t *testing.T) {
	talontest.SkipShort(t)
	e := testenv.StartEtcd(t, testenv.EtcdOptions{})
	o := fleetOptions(t, "etcd", e.Endpoints(), "")
	o.Sizes, o.Interval, o.Duration, o.Writers, o.LookupRate = []int{200}, time.Second, 6*time.Second, 50, 20
	o.StatusInterval, o.StorePIDs = 12*time.Second, []int{e.PID()}
	if err := o.ValidateFleet(func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	rep, err := harness.Fleet(context.Background(), o, func(format string, a ...any) { t.Logf(format, a...) }, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 1 || len(rep.Ceilings) != 1 || rep.Ceilings[0].Raw.Ops == 0 {
		t.Fatalf("report %+v", rep)
	}
	row := rep.Rows[0]
	t.Logf("row %+v", row)
	if n := failed(row); n > 0 || row.Heartbeats.BackedOff > 0 {
		t.Errorf("%d heartbeats failed %v, %d backed off; want none", n, row.Heartbeats.Failures, row.Heartbeats.BackedOff)
	}
	// Open loop: the fleet offers workers/interval whatever the answers'
	// latency; the band leaves room for heartbeats a loaded machine
	// delays past their worker's next one (missed), never for more.
	if row.ExpectedPerSecond != 200 || row.AcceptedPerSecond < 0.7*row.ExpectedPerSecond || row.AcceptedPerSecond > 1.05*row.ExpectedPerSecond {
		t.Errorf("accepted %.1f/s, expected %.0f/s: want from 0.7 to 1.05 of it", row.AcceptedPerSecond, row.ExpectedPerSecond)
	}
	if row.Sent != row.Heartbeats.Ops || row.Fleets != 1 {
		t.Errorf("sent %d, accepted %d, fleets %d", row.Sent, row.Heartbeats.Ops, row.Fleets)
	}
	if len(row.Coordinators) != 2 || row.CoordinatorCPUPer1000 <= 0 || row.Coordinators[0].RSSMiB <= 0 || row.StoreCPUPer1000 == nil {
		t.Errorf("coordinator figures %+v, CPU %.3f s per 1,000", row.Coordinators, row.CoordinatorCPUPer1000)
	}
	if row.Lookups.Ops == 0 || len(row.Lookups.Failures) > 0 {
		t.Errorf("lookups %+v", row.Lookups)
	}
}

// failed counts a row's failed heartbeats.
func failed(row harness.FleetRow) int {
	n := 0
	for _, v := range row.Heartbeats.Failures {
		n += v
	}
	return n
}

// fleetOptions returns the fleet mode's options on backend, the talon
// binary of this test run running coordinators and fleets.
func fleetOptions(t *testing.T, backend string, endpoints []string, kubeconfig string) harness.FleetOptions {
	t.Helper()
	conn := harness.Conn{RequestTimeout: 30 * time.Second}
	conn.Etcd.Endpoints, conn.Etcd.Prefix, conn.Etcd.DialTimeout = endpoints, "/fleet", 5*time.Second
	conn.Kube.Kubeconfig, conn.Kube.Namespace, conn.Kube.QPS, conn.Kube.Burst = kubeconfig, "fleet", 400, 800
	return harness.FleetOptions{
		HeartbeatOptions: harness.HeartbeatOptions{Backend: backend, Conn: conn, Coordinators: 2, Pairs: 1, Mix: reportMix(),
			StatusInterval: cluster.DefaultStatusInterval, Output: "text"},
		Interval: harness.HeartbeatInterval, LookupRate: harness.DefaultLookupRate, Talon: talontest.Binary(t), Host: fleetHost,
	}
}

// TestBenchFleet prints the fleet rows alone (make bench-fleet). It
// asserts nothing about speed.
func TestBenchFleet(t *testing.T) {
	if os.Getenv(benchFleetEnv) == "" || os.Getenv(benchReportEnv) != "" {
		t.Skipf("measurement: set %s=1 or sizes (make bench-fleet; make bench-report runs these rows in its table)", benchFleetEnv)
	}
	writeTable(t, fleetRows(t, nil, nil))
}

// fleetRows measures the fleet rows on etcd and Kubernetes (each, unless
// TALON_BENCH_FLEET_BACKENDS names only one), on e and k when given and
// else on servers of their own; nil unless benchFleetEnv is set.
func fleetRows(t *testing.T, e *testenv.Etcd, k *testenv.KubeAPIServer) []reportRow {
	t.Helper()
	sizes := fleetSizes(t)
	if sizes == nil {
		t.Logf("fleet rows skipped: set %s=1", benchFleetEnv)
		return nil
	}
	var rows []reportRow
	for _, backend := range fleetBackends() {
		var o harness.FleetOptions
		switch backend {
		case "etcd":
			if e == nil {
				e = testenv.StartEtcd(t, testenv.EtcdOptions{})
			}
			o = fleetOptions(t, backend, e.Endpoints(), "")
			o.StorePIDs = []int{e.PID()}
		case "kubernetes":
			if k == nil {
				k = testenv.StartKubeAPIServer(t, testenv.KubeOptions{})
			}
			o = fleetOptions(t, backend, nil, k.WriteKubeconfig(t, k.AdminToken()))
			o.StorePIDs = []int{k.PID()}
			if ke := k.Etcd(); ke != nil {
				o.StorePIDs = append(o.StorePIDs, ke.PID())
			}
		default:
			t.Fatalf("TALON_BENCH_FLEET_BACKENDS: %q: must be etcd or kubernetes", backend)
		}
		o.Sizes, o.Duration = sizes, fleetSeconds(t)
		if backend == "etcd" {
			profileFleet(t, &o)
		}
		if err := o.ValidateFleet(func(string) string { return "" }); err != nil {
			t.Fatal(err)
		}
		rep, err := harness.Fleet(context.Background(), o, func(format string, a ...any) { t.Logf(format, a...) }, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Errorf("fleet on %s: %v", backend, err) // the rows measured are still reported
		}
		var b strings.Builder
		if err := rep.Write(&b, "text"); err != nil {
			t.Fatal(err)
		}
		t.Logf("fleet on %s:\n%s", backend, b.String())
		for _, row := range rep.Rows {
			rows = append(rows, fleetRow(rep, row))
		}
	}
	return rows
}

// fleetRow is a report row of a fleet row: the heartbeats accepted of
// those expected, against the raw ceiling; met when every heartbeat the
// fleet offered was accepted (at least 0.99 of the expected rate, none
// failed).
func fleetRow(rep harness.FleetReport, row harness.FleetRow) reportRow {
	if row.Error != "" {
		msg, _, _ := strings.Cut(row.Error, "\n") // a table cell: the first line
		return reportRow{path: fmt.Sprintf("fleet out of process on %s, %s workers", rep.Backend, thousands(row.Workers)), talon: "not measured: " + strings.ReplaceAll(msg, "|", "/"),
			goal: ">=0.99 of expected accepted, none failed"}
	}
	store := ""
	if row.StoreCPUPer1000 != nil {
		store = fmt.Sprintf(", store %.3f", *row.StoreCPUPer1000)
	}
	r := reportRow{
		path: fmt.Sprintf("fleet out of process on %s, %s workers every %s, %d coordinator processes", rep.Backend, thousands(row.Workers), secs(rep.IntervalSeconds), rep.Coordinators),
		talon: fmt.Sprintf("%.0f/s accepted of %.0f/s, %d failed; CPU s per 1,000: coordinators %.3f, fleet %.3f%s; coordinator RSS %.1f KiB/worker; lookup p99 %.1f ms",
			row.AcceptedPerSecond, row.ExpectedPerSecond, failed(row)+row.Heartbeats.BackedOff, row.CoordinatorCPUPer1000, row.FleetCPUPer1000, store, row.RSSPerWorkerKiB, row.Lookups.P99Ms),
		goal: ">=0.99 of expected accepted, none failed",
		met:  row.AcceptedPerSecond >= 0.99*row.ExpectedPerSecond && failed(row)+row.Heartbeats.BackedOff == 0,
	}
	var limits, ratios []string
	for i, c := range rep.Ceilings {
		limits = append(limits, fmt.Sprintf("raw %s %.0f/s (%d writers back to back)", c.Mix, c.Raw.PerSecond, c.Writers))
		if i < len(row.OfCeiling) {
			ratios = append(ratios, fmt.Sprintf("%.3f of ceiling", row.OfCeiling[i]))
		}
	}
	r.limit, r.ratio = strings.Join(limits, "; "), strings.Join(ratios, "; ")
	return r
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// thousands renders n with thousands separators.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// fleetSizes returns the sizes benchFleetEnv asks for, nil when unset.
func fleetSizes(t *testing.T) []int {
	t.Helper()
	v := os.Getenv(benchFleetEnv)
	switch v {
	case "":
		return nil
	case "1":
		return defaultFleetSizes
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > harness.MaxFleetSize {
			t.Fatalf("%s %q: %q must be a fleet size from 1 to %d", benchFleetEnv, v, f, harness.MaxFleetSize)
		}
		out = append(out, n)
	}
	return out
}

// fleetSeconds returns TALON_BENCH_FLEET_SECONDS, each row's duration
// after the registrations (default 60 s).
func fleetSeconds(t *testing.T) time.Duration {
	t.Helper()
	v := os.Getenv("TALON_BENCH_FLEET_SECONDS")
	if v == "" {
		return time.Minute
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 10 || n > 3600 {
		t.Fatalf("TALON_BENCH_FLEET_SECONDS %q: must be from 10 to 3600", v)
	}
	return time.Duration(n) * time.Second
}

// fleetBackends returns TALON_BENCH_FLEET_BACKENDS (default etcd and
// kubernetes).
func fleetBackends() []string {
	if v := os.Getenv("TALON_BENCH_FLEET_BACKENDS"); v != "" {
		return strings.Split(v, ",")
	}
	return []string{"etcd", "kubernetes"}
}

// profileFleet profiles the coordinator processes of the etcd row of
// TALON_BENCH_FLEET_PROFILE workers (default 5000; 0 for none) over the
// row's first half, heartbeats alone: they run internal/tools/
// profiledtalon, which profiles from SIGUSR1 to SIGUSR2, and the merged
// profile's top entries are logged when the window ends.
func profileFleet(t *testing.T, o *harness.FleetOptions) {
	t.Helper()
	size := 5000
	if v := os.Getenv("TALON_BENCH_FLEET_PROFILE"); v != "" {
		var err error
		if size, err = strconv.Atoi(v); err != nil {
			t.Fatalf("TALON_BENCH_FLEET_PROFILE %q: must be a fleet size or 0", v)
		}
	}
	if size == 0 || !slices.Contains(o.Sizes, size) {
		return
	}
	dir := t.TempDir()
	exe := filepath.Join(dir, "profiledtalon")
	if out, err := testsupport.GoBuild("", exe, "github.com/talonhq/talon/internal/tools/profiledtalon").CombinedOutput(); err != nil {
		t.Fatalf("build profiledtalon: %v\n%s", err, out)
	}
	base := filepath.Join(os.TempDir(), fmt.Sprintf("talon-fleet-coordinator-%d", size))
	o.CoordinatorExe, o.CoordinatorEnv = exe, []string{"TALON_CPUPROFILE=" + base}
	o.Window = func(workers int, pids []int) func() {
		if workers != size {
			return func() {}
		}
		signalAll(t, pids, syscall.SIGUSR1)
		return func() {
			signalAll(t, pids, syscall.SIGUSR2)
			time.Sleep(time.Second) // the profiles are written
			var files []string
			for _, pid := range pids {
				files = append(files, fmt.Sprintf("%s.%d.pprof", base, pid))
			}
			top, err := exec.Command("go", append([]string{"tool", "pprof", "-top", "-nodecount=30"}, files...)...).CombinedOutput()
			if err != nil {
				t.Logf("pprof: %v", err)
			}
			cum, err := exec.Command("go", append([]string{"tool", "pprof", "-top", "-cum", "-nodecount=40"}, files...)...).CombinedOutput()
			if err != nil {
				t.Logf("pprof -cum: %v", err)
			}
			text := fmt.Sprintf("CPU profile of the %d coordinator processes at %d workers on etcd, heartbeats alone (%s):\n%s\ncumulative:\n%s",
				len(pids), workers, strings.Join(files, " "), top, cum)
			t.Log(text)
			if f := os.Getenv("TALON_BENCH_FLEET_PROFILE_FILE"); f != "" {
				if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
					t.Error(err)
				}
			}
		}
	}
}

func signalAll(t *testing.T, pids []int, sig syscall.Signal) {
	t.Helper()
	for _, pid := range pids {
		if err := syscall.Kill(pid, sig); err != nil {
			t.Logf("signal %v to %d: %v", sig, pid, err)
		}
	}
}
