package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/bench"
	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/state/etcd"
	"github.com/talonhq/talon/internal/testenv"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// benchScaleEnv turns the scale rows on: make bench-report sets it beside
// benchReportEnv, and TestBenchScale runs them alone. make test never
// does (the 50,000-worker simulation takes minutes). "1" runs every scale
// row; a comma-separated list of etcd, top, ui and kube runs those.
const benchScaleEnv = "TALON_BENCH_SCALE"

// scaleWorkers is the simulated cluster of the scale rows.
const scaleWorkers = 50_000

// scaleHost is the loopback address the scale rows bind their own
// listeners on, apart from other tests' 127.0.0.1.
const scaleHost = "127.0.0.14"

// TestBenchScale prints the scale rows alone (make bench-scale): a
// coordinator process on etcd with 50,000 simulated workers, talonctl top
// at 20,000 nodes and the web UI at 10,000 nodes in Chromium. It asserts
// what can be wrong at any speed (every node listed once, the views
// showing one window), never a duration.
func TestBenchScale(t *testing.T) {
	if os.Getenv(benchScaleEnv) == "" || os.Getenv(benchReportEnv) != "" {
		t.Skipf("measurement: set %s=1 (make bench-scale; make bench-report runs these rows in its table)", benchScaleEnv)
	}
	e := testenv.StartEtcd(t, testenv.EtcdOptions{})
	rows := scaleRows(t, e)
	var b strings.Builder
	fmt.Fprintf(&b, "\n| path | Talon | raw ceiling / limit (same run) | ratio | goal | met |\n|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", r.path, r.talon, r.limit, r.ratio, r.goal, map[bool]string{true: "yes", false: "**no**"}[r.met])
	}
	fmt.Fprintf(&b, "\n%s\n", machine())
	fmt.Print(b.String())
	if f := os.Getenv("TALON_BENCH_REPORT_FILE"); f != "" {
		if err := os.WriteFile(f, []byte(b.String()), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// scaleRows measures issue 30's scale rows; nil unless benchScaleEnv is
// set.
func scaleRows(t *testing.T, e *testenv.Etcd) []reportRow {
	t.Helper()
	if os.Getenv(benchScaleEnv) == "" {
		t.Logf("scale rows skipped: set %s=1", benchScaleEnv)
		return nil
	}
	var rows []reportRow
	if scalePart("etcd") {
		rows = append(rows, etcdScaleRows(t, e)...)
	}
	if scalePart("top") {
		rows = append(rows, topScaleRow(t))
	}
	if scalePart("ui") {
		rows = append(rows, uiScaleRow(t, e))
	}
	if scalePart("kube") {
		rows = append(rows, kubeListRow(t))
	}
	return rows
}

// scaleTiming keeps the seeded workers, which never heartbeat, live and
// healthy through a scale row: a heartbeat interval of a minute, late
// after five (the coordinator would otherwise mark them late after the
// default 15 s and remove them), the records' leases as seeded.
var scaleTiming = []string{"--heartbeat-interval", "1m", "--unhealthy-after", "5m", "--lease-ttl", "30m"}

// scalePart reports whether benchScaleEnv selects the part name.
func scalePart(name string) bool {
	v := os.Getenv(benchScaleEnv)
	return v == "1" || slices.Contains(strings.Split(v, ","), name)
}

// scaleAddr returns a free address on scaleHost.
func scaleAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", scaleHost+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// seedWorkers writes n worker records of cluster clusterID (bench.Record,
// about 1.5 KB each) as rssRow does: the records a coordinator serving n
// workers holds, without n heartbeating processes.
func seedWorkers(t *testing.T, s *etcd.Store, clusterID string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 100)
	var mu sync.Mutex
	var firstErr error
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			rec := reportRecord(clusterID, fmt.Sprintf("worker-%05d", i), 1)
			if _, err := s.UpsertNode(context.Background(), rec, 30*time.Minute); err != nil {
				mu.Lock()
				firstErr = cmpErr(firstErr, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatalf("seeding %d workers: %v", n, firstErr)
	}
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// vmHWM returns a process's peak resident set in MiB.
func vmHWM(t *testing.T, pid int) float64 { return procStatusMiB(t, pid, "VmHWM") }

// procStatusMiB returns a kB field of /proc/<pid>/status in MiB.
func procStatusMiB(t *testing.T, pid int, field string) float64 {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return float64(kb) / 1024
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// etcdScaleRows runs a real coordinator process on etcd holding 50,000
// worker records and measures its peak RSS, snapshots from the store's
// watch-fed cache, lookups over the protocol and talonctl nodes list
// through the API's pagination.
func etcdScaleRows(t *testing.T, e *testenv.Etcd) []reportRow {
	t.Helper()
	const clusterID, prefix = "scale", "/scale"
	o := etcd.DefaultOptions()
	o.Endpoints, o.Prefix, o.RequestTimeout = e.Endpoints(), prefix, 30*time.Second
	s, err := etcd.New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	seedStart := time.Now()
	seedWorkers(t, s, clusterID, scaleWorkers)
	seedTook := time.Since(seedStart)
	t.Logf("scale: seeded %d workers of %d bytes in %s", scaleWorkers, bench.RecordBytes(), seedTook.Round(time.Millisecond))

	control, admin := scaleAddr(t), scaleAddr(t)
	// With a heap profile asked for, the coordinator is profiledtalon
	// (talon that writes its heap profile at SIGUSR2).
	bin, env, heapBase := "", []string(nil), ""
	if os.Getenv(scaleHeapProfileEnv) != "" {
		bin = filepath.Join(t.TempDir(), "profiledtalon")
		if out, err := testsupport.GoBuild("", bin, "github.com/talonhq/talon/internal/tools/profiledtalon").CombinedOutput(); err != nil {
			t.Fatalf("build profiledtalon: %v\n%s", err, out)
		}
		heapBase = filepath.Join(t.TempDir(), "heap")
		env = []string{"TALON_HEAPPROFILE=" + heapBase}
	}
	p := talontest.StartBin(t, bin, "coordinator-scale", env, append([]string{"coordinator", "--cluster-id", clusterID, "--node-id", "scale", "--listen", control, "--admin-listen", admin,
		"--state-backend", "etcd", "--etcd-endpoints", strings.Join(e.Endpoints(), ","), "--etcd-prefix", prefix, "--insecure-control-plane",
		"--log-level", "warn", "--max-records", strconv.Itoa(scaleWorkers + 10_000), "--admin-rate-limit", "0"}, scaleTiming...)...)
	readyStart := time.Now()
	testsupport.WaitFor(t, 5*time.Minute, "coordinator ready with 50,000 workers", func() bool {
		c, err := p.API(t).Cluster(context.Background())
		return err == nil && c.EligibleWorkers == scaleWorkers
	})
	// The peak so far is start-up's: the listing, the first view and
	// placement. The row says how much of the final peak it is.
	readyHWM := vmHWM(t, p.Cmd.Process.Pid)
	if f := os.Getenv(scaleHeapProfileEnv); f != "" {
		writeHeapProfile(t, p.Cmd.Process, fmt.Sprintf("%s.%d.pprof", heapBase, p.Cmd.Process.Pid), f+".ready")
	}
	t.Logf("scale: coordinator ready with %d workers %s after start, peak RSS %.0f MiB", scaleWorkers, time.Since(readyStart).Round(time.Millisecond), readyHWM)

	// Snapshots of the 50,000 records from this process's store: its
	// watch-fed cache (a count-only revision probe, then the cached
	// records), beside one prefix range read per snapshot (the same store
	// without the cache), the limit the cache removes.
	snap := func(st *etcd.Store, callers int, d time.Duration) bench.Result {
		return bench.Run(context.Background(), callers, d, func(ctx context.Context, _ int) error {
			sn, err := st.Snapshot(ctx, clusterID)
			if err == nil && len(sn.Records) != scaleWorkers+1 {
				err = fmt.Errorf("snapshot has %d records, want %d workers and the coordinator", len(sn.Records), scaleWorkers)
			}
			return err
		})
	}
	testsupport.WaitFor(t, 2*time.Minute, "the store's cache serving snapshots", func() bool {
		before := s.Stats().CacheSnapshots
		_, err := s.Snapshot(context.Background(), clusterID)
		return err == nil && s.Stats().CacheSnapshots > before
	})
	before := s.Stats()
	cached := snap(s, 4, 5*time.Second)
	after := s.Stats()
	if n := cached.FailureCount(); n > 0 {
		t.Errorf("cached snapshots: %d failures, first %v", n, cached.FirstErr)
	}
	if after.RangeSnapshots != before.RangeSnapshots {
		t.Errorf("%d of the snapshots were range reads, not served from the cache", after.RangeSnapshots-before.RangeSnapshots)
	}
	ro := o
	ro.CacheSnapshots = false
	rs, err := etcd.New(context.Background(), ro)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	ranged := snap(rs, 1, 5*time.Second)
	if n := ranged.FailureCount(); n > 0 {
		t.Errorf("range snapshots: %d failures, first %v", n, ranged.FirstErr)
	}
	snapRow := reportRow{path: "snapshot of 50,000 workers on etcd from the watch-fed cache (4 callers)",
		talon: fmt.Sprintf("p50 %s p99 %s, %.0f/s", cached.P50().Round(time.Microsecond), cached.P99().Round(time.Microsecond), cached.PerSecond()),
		limit: fmt.Sprintf("prefix range read per snapshot: p50 %s p99 %s, %.1f/s (%d records, ~%d MB per read)", ranged.P50().Round(time.Millisecond), ranged.P99().Round(time.Millisecond), ranged.PerSecond(), scaleWorkers, scaleWorkers*bench.RecordBytes()/1e6),
		ratio: fmt.Sprintf("%.0fx", float64(ranged.P99())/float64(max(cached.P99(), 1))), goal: "(measured)", met: true}

	// Lookups over the protocol from 16 callers, as rssRow.
	cl, err := client.New(client.Options{Coordinators: []string{control}, MaxIdleConns: 16, Retries: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	lk := bench.Run(context.Background(), 16, 5*time.Second, func(ctx context.Context, _ int) error {
		pl, err := cl.Lookup(ctx, fmt.Sprintf("k-%d#0", rand.Int()), 3)
		if err == nil && len(pl.Owners) != 3 {
			err = fmt.Errorf("%d owners, want 3", len(pl.Owners))
		}
		return err
	})
	if n := lk.FailureCount(); n > 0 {
		t.Errorf("lookups: %d failures, first %v", n, lk.FirstErr)
	}
	lookupRow := reportRow{path: "lookups over the protocol, 50,000 workers on etcd, 16 callers",
		talon: fmt.Sprintf("%.0f/s p50 %s p99 %s", lk.PerSecond(), lk.P50().Round(time.Microsecond), lk.P99().Round(time.Microsecond)),
		limit: "—", ratio: "—", goal: "(measured)", met: true}
	rss, now := vmHWM(t, p.Cmd.Process.Pid), procStatusMiB(t, p.Cmd.Process.Pid, "VmRSS")
	if f := os.Getenv(scaleHeapProfileEnv); f != "" {
		writeHeapProfile(t, p.Cmd.Process, fmt.Sprintf("%s.%d.pprof", heapBase, p.Cmd.Process.Pid), f)
	}
	memRow := reportRow{path: "coordinator peak RSS, 50,000 workers on etcd, under lookups", talon: fmt.Sprintf("%.0f MiB peak (%.1f KiB per worker; %.0f MiB by the time it was ready), %.0f MiB after the lookups", rss, rss*1024/scaleWorkers, readyHWM, now),
		ratio: "—", goal: "(measured)", met: rss > 0}

	// talonctl nodes list, as typed: every page of the API (1,000 nodes
	// each) into one table. Three runs; every node exactly once each time.
	var took []time.Duration
	for range 3 {
		t0 := time.Now()
		code, stdout, stderr := talontest.Ctl(t, []string{"http://" + admin}, "nodes", "list")
		took = append(took, time.Since(t0))
		if code != 0 {
			t.Fatalf("talonctl nodes list: exit %d: %s", code, talontest.Tail(stderr, 2000))
		}
		checkListedOnce(t, stdout, scaleWorkers)
	}
	slices.Sort(took)
	listRow := reportRow{path: "talonctl nodes list, 50,000 workers on etcd (50 API pages of 1,000, table output)",
		talon: fmt.Sprintf("median %s of 3 (min %s)", took[1].Round(time.Millisecond), took[0].Round(time.Millisecond)),
		limit: "—", ratio: "—", goal: "(measured)", met: true}
	t.Logf("scale: coordinator peak RSS after the listings %.0f MiB", vmHWM(t, p.Cmd.Process.Pid))
	// The same coordinator again with GOMEMLIMIT (last: its record stays
	// after the kill): how much of the peak is garbage the collector had
	// not yet returned.
	limitPeak, limitReady := scaleMemLimitHWM(t, e, prefix, clusterID)
	memRow.limit = fmt.Sprintf("with GOMEMLIMIT=%s: %.0f MiB peak (%.0f MiB by the time it was ready)", scaleMemLimit, limitPeak, limitReady)
	return []reportRow{memRow, snapRow, lookupRow, listRow}
}

// checkListedOnce fails t unless the table lists worker-00000 to
// worker-<n-1> exactly once each (and the coordinator), under one header.
func checkListedOnce(t *testing.T, table string, n int) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(table, "\n"), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "NODE") {
		t.Fatalf("no header: %q", talontest.Tail(table, 200))
	}
	seen := make([]int, n)
	coords := 0
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) < 2 {
			t.Fatalf("short row %q", l)
		}
		switch {
		case f[1] == "coordinator":
			coords++
		case f[1] == "worker" && strings.HasPrefix(f[0], "worker-"):
			i, err := strconv.Atoi(strings.TrimPrefix(f[0], "worker-"))
			if err != nil || i < 0 || i >= n {
				t.Fatalf("unexpected row %q", l)
			}
			seen[i]++
		default:
			t.Fatalf("unexpected row %q", l)
		}
	}
	for i, c := range seen {
		if c != 1 {
			t.Fatalf("worker-%05d listed %d times, want once (%d rows)", i, c, len(lines)-1)
		}
	}
	if coords != 1 {
		t.Fatalf("%d coordinator rows, want 1", coords)
	}
}

// machine describes the machine a measurement ran on.
func machine() string {
	return fmt.Sprintf("Machine: %d CPUs (GOMAXPROCS %d), %s/%s, %s; %s", runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, runtime.Version(), loadAverage())
}

// scaleHeapProfileEnv names a file for the 50,000-worker coordinator's
// heap profile, taken after the lookups (where the RSS row is read):
// make bench-scale SCALE=etcd HEAP_PROFILE=FILE, then go tool pprof FILE.
const scaleHeapProfileEnv = "TALON_BENCH_HEAP_PROFILE"

// writeHeapProfile has the coordinator proc (profiledtalon) write its
// heap profile to written and copies it to file, for go tool pprof.
func writeHeapProfile(t *testing.T, proc *os.Process, written, file string) {
	t.Helper()
	_ = os.Remove(written) // an earlier profile: wait for this one
	if err := proc.Signal(syscall.SIGUSR2); err != nil {
		t.Fatalf("heap profile: %v", err)
	}
	var body []byte
	testsupport.WaitFor(t, time.Minute, "the coordinator's heap profile in "+written, func() bool {
		var err error
		body, err = os.ReadFile(written)
		return err == nil && len(body) > 0
	})
	if err := os.WriteFile(file, body, 0o644); err != nil {
		t.Fatal(err)
	}
}

// scaleMemLimit is the GOMEMLIMIT of the second coordinator of the RSS
// row: the soft limit a coordinator sets itself in a container limited to
// the goal's 256 MiB (90% of it, internal/app's memoryLimitRatio).
const scaleMemLimit = "230MiB"

// scaleMemLimitHWM starts a second coordinator on the same records with
// GOMEMLIMIT=scaleMemLimit, waits until it serves them, runs lookups for
// a few seconds and returns its peak RSS in MiB, at the end and when it
// became ready.
func scaleMemLimitHWM(t *testing.T, e *testenv.Etcd, prefix, clusterID string) (peak, ready float64) {
	t.Helper()
	control, admin := scaleAddr(t), scaleAddr(t)
	p := talontest.StartWithEnv(t, "coordinator-scale-memlimit", []string{"GOMEMLIMIT=" + scaleMemLimit}, append([]string{"coordinator", "--cluster-id", clusterID, "--node-id", "scale-b",
		"--listen", control, "--admin-listen", admin, "--state-backend", "etcd", "--etcd-endpoints", strings.Join(e.Endpoints(), ","), "--etcd-prefix", prefix,
		"--insecure-control-plane", "--log-level", "warn", "--max-records", strconv.Itoa(scaleWorkers + 10_000), "--admin-rate-limit", "0"}, scaleTiming...)...)
	testsupport.WaitFor(t, 5*time.Minute, "the GOMEMLIMIT coordinator ready", func() bool {
		c, err := p.API(t).Cluster(context.Background())
		return err == nil && c.EligibleWorkers == scaleWorkers
	})
	ready = vmHWM(t, p.Cmd.Process.Pid)
	cl, err := client.New(client.Options{Coordinators: []string{control}, MaxIdleConns: 16, Retries: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	bench.Run(context.Background(), 16, 5*time.Second, func(ctx context.Context, _ int) error {
		_, err := cl.Lookup(ctx, fmt.Sprintf("k-%d#0", rand.Int()), 3)
		return err
	})
	peak = vmHWM(t, p.Cmd.Process.Pid)
	p.Kill()
	return peak, ready
}
