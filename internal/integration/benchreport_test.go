package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/app"
	"github.com/talonhq/talon/internal/bench"
	"github.com/talonhq/talon/internal/bench/harness"
	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/datav1"
	"github.com/talonhq/talon/internal/placement"
	"github.com/talonhq/talon/internal/protocol"
	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/state/etcd"
	"github.com/talonhq/talon/internal/testenv"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/coordtest"
)

// benchReportEnv turns TestBenchReport on (make bench-report sets it).
const benchReportEnv = "TALON_BENCH_REPORT"

// reportRow is one line of the report: Talon's figure, the raw ceiling or
// the limit measured in the same run, their ratio and the goal.
type reportRow struct {
	path  string
	talon string
	limit string
	ratio string
	goal  string
	met   bool
}

// closedLoop runs op from writers goroutines back to back for d and
// returns the successful operations per second and their latencies (the
// runner of talon bench, bench.Run).
func closedLoop(writers int, d time.Duration, op func(w int) error) (perSec float64, lat []time.Duration, failures int, firstErr error) {
	r := bench.Run(context.Background(), writers, d, func(_ context.Context, w int) error { return op(w) })
	return r.PerSecond(), r.Latencies, r.FailureCount() + r.BackedOff, r.FirstErr
}

// rateRow compares Talon's result with the raw ceiling's from the same run.
func rateRow(path string, talon, raw bench.Result, goalRatio float64, p99Factor float64, p99Cap time.Duration) reportRow {
	t50, t99 := talon.P50(), talon.P99()
	r50, r99 := raw.P50(), raw.P99()
	ratio := talon.PerSecond() / raw.PerSecond()
	met := ratio >= goalRatio
	goal := fmt.Sprintf(">=%.0f%% of raw", goalRatio*100)
	if p99Factor > 0 {
		met = met && float64(t99) <= p99Factor*float64(r99)
		goal += fmt.Sprintf(", p99 <=%.1fx raw", p99Factor)
	}
	if p99Cap > 0 {
		met = met && t99 <= p99Cap
		goal += fmt.Sprintf(", p99 <=%s", p99Cap)
	}
	return reportRow{
		path:  path,
		talon: fmt.Sprintf("%.0f/s p50 %s p99 %s", talon.PerSecond(), t50.Round(time.Millisecond), t99.Round(time.Millisecond)),
		limit: fmt.Sprintf("%.0f/s p50 %s p99 %s", raw.PerSecond(), r50.Round(time.Millisecond), r99.Round(time.Millisecond)),
		ratio: fmt.Sprintf("%.2f", ratio),
		goal:  goal, met: met,
	}
}

// reportRecord is a typical worker record (bench.Record).
func reportRecord(clusterID, node string, seq uint64) *cluster.Record {
	return bench.Record(clusterID, node, seq)
}

// logFailures logs what a phase of talon bench counted apart from its
// successes.
func logFailures(t *testing.T, phase string, r bench.Result) {
	t.Helper()
	if n := r.FailureCount(); n > 0 || r.BackedOff > 0 {
		t.Logf("%s: %d failures %v (first %v), %d backed off after unavailable", phase, n, r.Failures, r.FirstErr, r.BackedOff)
	}
}

// TestBenchReport measures every row of issue 18's table in one run and
// prints it. It asserts nothing about speed. Run it with make bench-report
// (TALON_BENCH_REPORT=1; TALON_BENCH_SECONDS sets each phase's length).
// The heartbeat and lookup rows are talon bench heartbeats and talon bench
// lookups --backend, called as functions: the report and the CLI measure
// the same thing.
func TestBenchReport(t *testing.T) {
	if os.Getenv(benchReportEnv) == "" {
		t.Skipf("measurement: set %s=1 (make bench-report)", benchReportEnv)
	}
	phase := 10 * time.Second
	if s, err := strconv.Atoi(os.Getenv("TALON_BENCH_SECONDS")); err == nil && s > 0 {
		phase = time.Duration(s) * time.Second
	}
	var rows []reportRow
	add := func(r reportRow) {
		rows = append(rows, r)
		t.Logf("%s: talon %s | limit %s | ratio %s | goal %s met=%t", r.path, r.talon, r.limit, r.ratio, r.goal, r.met)
	}
	ctx := context.Background()
	progress := func(format string, a ...any) { t.Logf(format, a...) }
	log := slog.New(slog.DiscardHandler)

	// etcd: raw ordered upsert (a compare-and-swap on the key's revision,
	// with a lease, the record JSON as value) vs heartbeats end to end
	// through two coordinators over the protocol, 1,000 writers each.
	e := testenv.StartEtcd(t, testenv.EtcdOptions{})
	conn := harness.Conn{RequestTimeout: 30 * time.Second}
	conn.Etcd.Endpoints, conn.Etcd.Prefix, conn.Etcd.DialTimeout = e.Endpoints(), "/bench", 5*time.Second
	pairs := benchPairs(t)
	add(pairedRow(t, "etcd heartbeats, 1,000 writers, 2 coordinators", pairs, 0.7, 1.3, 0, func(i int) (harness.HeartbeatReport, error) {
		o := harness.HeartbeatOptions{Backend: "etcd", Conn: conn, Writers: harness.DefaultEtcdWriters, Coordinators: 2, Duration: phase}
		if i == 0 {
			o.TalonPhase = func() func() { return profile(t, "etcd-heartbeats") }
		}
		return harness.Heartbeats(ctx, app.BenchRoles(), o, progress, log)
	}))

	// Kubernetes: raw Lease update (optimistic concurrency on
	// resourceVersion, the record in an annotation) vs heartbeats through
	// two coordinators, 200 writers each.
	k := testenv.StartKubeAPIServer(t, testenv.KubeOptions{})
	conn.Kube.Kubeconfig, conn.Kube.Namespace, conn.Kube.QPS, conn.Kube.Burst = k.WriteKubeconfig(t, k.AdminToken()), "bench", 400, 800
	add(pairedRow(t, "Kubernetes Lease heartbeats, 200 writers, 2 coordinators", pairs, 0.8, 0, 250*time.Millisecond, func(int) (harness.HeartbeatReport, error) {
		return harness.Heartbeats(ctx, app.BenchRoles(), harness.HeartbeatOptions{Backend: "kubernetes", Conn: conn, Writers: harness.DefaultKubeWriters, Coordinators: 2, Duration: phase}, progress, log)
	}))
	for _, r := range kubeStoreBytesRows(t, k) { // issue 36: store bytes per worker per hour (kubestorebytes_test.go)
		add(r)
	}

	// Lookups with 1,000 workers on memory, etcd and Kubernetes, from 32
	// and from 128 callers over pooled connections: a coordinator's
	// revision probe is shared by the lookups that arrive while one is in
	// flight, so more callers share each probe.
	for _, callers := range []int{32, 128} {
		lk, err := harness.LookupBackends(ctx, app.BenchRoles(), harness.LookupOptions{Backends: []string{"memory", "etcd", "kubernetes"}, Workers: 1000, Conn: conn,
			Concurrency: callers, Duration: phase / 2, Keys: 100000, Replicas: 3}, progress, log)
		if err != nil {
			t.Fatal(err)
		}
		ml, el, kl := lk.Backends[0].Result, lk.Backends[1].Result, lk.Backends[2].Result
		etcdGoal := ">=0.6x memory"
		if callers != 32 {
			etcdGoal = "(no goal)"
		}
		for _, b := range lk.Backends {
			logFailures(t, "lookups on "+b.Backend, b.Result)
		}
		add(reportRow{path: fmt.Sprintf("lookups over the protocol, 1,000 workers, %d callers: etcd (memory as the limit)", callers), talon: fmt.Sprintf("%.0f/s", el.PerSecond()), limit: fmt.Sprintf("%.0f/s", ml.PerSecond()),
			ratio: fmt.Sprintf("%.2f", el.PerSecond()/ml.PerSecond()), goal: etcdGoal, met: callers != 32 || el.PerSecond() >= 0.6*ml.PerSecond()})
		add(reportRow{path: fmt.Sprintf("lookups over the protocol, 1,000 workers, %d callers: Kubernetes (memory as the limit)", callers), talon: fmt.Sprintf("%.0f/s", kl.PerSecond()), limit: fmt.Sprintf("%.0f/s", ml.PerSecond()),
			ratio: fmt.Sprintf("%.2f", kl.PerSecond()/ml.PerSecond()), goal: ">=0.5x memory", met: kl.PerSecond() >= 0.5*ml.PerSecond()})
	}
	finishReport(t, rows, e)
}

// finishReport adds the rows that need no backend and prints the table.
func finishReport(t *testing.T, rows []reportRow, e *testenv.Etcd) {
	add := func(r reportRow) {
		rows = append(rows, r)
		t.Logf("%s: talon %s | limit %s | ratio %s | goal %s met=%t", r.path, r.talon, r.limit, r.ratio, r.goal, r.met)
	}
	// HRW per candidate, 1,000 workers, 3 owners.
	nodes := make([]placement.Node, 1000)
	for i := range nodes {
		nodes[i] = placement.Node{ID: fmt.Sprintf("worker-%04d", i), Address: "a"}
	}
	tbl, err := placement.New(nodes)
	if err != nil {
		t.Fatal(err)
	}
	var lastCPU time.Duration
	res := testing.Benchmark(func(b *testing.B) {
		dst := make([]placement.Owner, 0, 3)
		keys := make([]string, 1024)
		for i := range keys {
			keys[i] = fmt.Sprintf("bench/object-%d#0", i)
		}
		b.ResetTimer()
		c0 := cpuTime()
		for i := range b.N {
			dst = tbl.LookupInto(keys[i&1023], 3, dst)
		}
		lastCPU = cpuTime() - c0
	})
	// CPU time of the last (sized) run, per candidate: less sensitive to
	// other load on the machine than wall time (it includes the process's
	// idle background goroutines, hence "~").
	cpuPerCand := float64(lastCPU.Nanoseconds()) / float64(res.N) / 1000
	perCand := float64(res.NsPerOp()) / 1000
	add(reportRow{path: "HRW lookup, per candidate (1,000 workers, 3 owners)", talon: fmt.Sprintf("%.2f ns wall, ~%.2f ns CPU", perCand, cpuPerCand), limit: "1.5 ns", ratio: fmt.Sprintf("%.2f", 1.5/perCand), goal: "<=1.5 ns", met: perCand <= 1.5})

	// Record codec per heartbeat on the coordinator: decode the frame's
	// record, validate, encode it for the store. The payloads of 4,096
	// workers in turn, as a coordinator serving many workers sees them
	// (the decoder caches short strings). CPU time too, as for HRW.
	payloads := make([][]byte, 4096)
	for i := range payloads {
		payloads[i], _ = cluster.Encode(reportRecord("bench", fmt.Sprintf("hb-%05d", i), 7))
	}
	var codecCPU time.Duration
	codec := testing.Benchmark(func(b *testing.B) {
		c0 := cpuTime()
		for i := range b.N {
			rec, err := protocol.DecodeRecordPayload(payloads[i&4095])
			if err != nil {
				b.Fatal(err)
			}
			if _, err := state.EncodeRecord(rec); err != nil {
				b.Fatal(err)
			}
		}
		codecCPU = cpuTime() - c0
	})
	us := float64(codec.NsPerOp()) / 1000
	cpuUs := float64(codecCPU.Nanoseconds()) / float64(codec.N) / 1000
	add(reportRow{path: fmt.Sprintf("record decode+encode per heartbeat (coordinator, %d-byte record)", len(payloads[0])), talon: fmt.Sprintf("%.1f µs wall, ~%.1f µs CPU, %d allocs", us, cpuUs, codec.AllocsPerOp()),
		limit: "5 µs, 10 allocs", ratio: fmt.Sprintf("%.2f", 5/us), goal: "<=5 µs, <=10 allocs", met: us <= 5 && codec.AllocsPerOp() <= 10})

	add(cacheHitRow(t))
	add(rssRow(t, e))
	for _, r := range scaleRows(t, e) { // issue 30's scale rows (scale_test.go)
		add(r)
	}

	var b strings.Builder
	fmt.Fprintf(&b, "\n| path | Talon | raw ceiling / limit (same run) | ratio | goal | met |\n|---|---|---|---|---|---|\n")
	for _, r := range rows {
		met := "yes"
		if !r.met {
			met = "**no**"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", r.path, r.talon, r.limit, r.ratio, r.goal, met)
	}
	fmt.Fprintf(&b, "\nMachine: %d CPUs (GOMAXPROCS %d), %s/%s, %s; %s\n", runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, runtime.Version(), loadAverage())
	fmt.Print(b.String())
	if f := os.Getenv("TALON_BENCH_REPORT_FILE"); f != "" {
		if err := os.WriteFile(f, []byte(b.String()), 0o644); err != nil {
			t.Error(err)
		}
	}
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "load average unknown"
	}
	f := strings.Fields(string(b))
	return "load average " + strings.Join(f[:3], " ")
}

// cacheHitRow reads a cached block through a real worker's data listener
// (keep-alive, one block per request), the same bytes sent with sendfile
// over a plain loopback TCP connection (the network ceiling, see
// testsupport.Loopback) and the same bytes read from the file, the two
// network paths through one 256 KiB buffer into a reused one,
// in two rounds, so a burst of background load on a shared machine does
// not fall on one of them only.
func cacheHitRow(t *testing.T) reportRow {
	t.Helper()
	blobs := t.TempDir()
	const size = 8 << 20
	writeBlob(t, blobs, "hot.bin", size, 11)
	c := coordtest.Start(t, coordtest.Options{ClusterID: "it", Timing: cluster.Timing{HeartbeatInterval: time.Second, UnhealthyAfter: 10 * time.Second, LeaseTTL: 20 * time.Second},
		RequestTimeout: 2 * time.Second, ShutdownTimeout: time.Second, WaitReady: true})
	l, err := config.Load(cluster.RoleWorker, config.Options{Environ: []string{"TALON_INSECURE_CONTROL_PLANE=true"}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := l.Config
	cfg.ClusterID, cfg.NodeID, cfg.Coordinators = "it", "hot", []string{c.ControlAddr}
	cfg.Listen, cfg.AdminListen = "127.0.0.1:0", ""
	cfg.BlobStore, cfg.CacheDir, cfg.CacheCapacity, cfg.BlockSize = "file://"+blobs, t.TempDir(), 64<<20, 4<<20
	cfg.HeartbeatInterval, cfg.UnhealthyAfter, cfg.LeaseTTL = time.Second, 10*time.Second, 20*time.Second
	w, err := app.NewWorker(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	t.Cleanup(func() { cancel(); <-done })
	testsupport.WaitFor(t, 10*time.Second, "worker serving", func() bool { return w.Worker().Serving() })
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	req := datav1.Request{Addr: w.Worker().DataAddress(), Object: "hot.bin", Offset: 0, Length: 4 << 20, Replicas: 1}
	var buf bytes.Buffer
	// Both network paths copy through a CopyBufferSize buffer into buf,
	// as testsupport.Loopback does: the same client work on each side.
	req.Buffer = make([]byte, datav1.CopyBufferSize)
	fetch := func() int64 {
		buf.Reset()
		res, err := datav1.FetchTo(context.Background(), hc, req, struct{ io.Writer }{&buf})
		if err != nil {
			t.Fatal(err)
		}
		return res.N
	}
	fetch() // load into the cache
	f, err := os.Open(filepath.Join(blobs, "hot.bin"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	readFile := func() int64 {
		buf.Reset()
		n, err := io.Copy(&buf, io.NewSectionReader(f, 0, 4<<20))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	lb := testsupport.NewLoopback(t, filepath.Join(blobs, "hot.bin"), 4<<20, datav1.CopyBufferSize)
	loopback := func() int64 {
		buf.Reset()
		n, err := lb.Next(&buf)
		if err != nil {
			t.Fatalf("loopback: %d bytes: %v", n, err)
		}
		return n
	}
	var served, ceiling, file float64
	for range 2 {
		served += throughput(fetch) / 2
		ceiling += throughput(loopback) / 2
		file += throughput(readFile) / 2
	}
	ratio := served / ceiling
	return reportRow{path: "cache hits through the data listener (4 MiB blocks, keep-alive, plain)", talon: fmt.Sprintf("%.0f MB/s", served/1e6),
		limit: fmt.Sprintf("%.0f MB/s raw loopback TCP with sendfile (reading the file: %.0f MB/s)", ceiling/1e6, file/1e6),
		ratio: fmt.Sprintf("%.2f", ratio), goal: ">=0.95x raw sendfile", met: ratio >= 0.95}
}

// throughput runs read for about two seconds and returns bytes/s.
func throughput(read func() int64) float64 {
	var n int64
	start := time.Now()
	for time.Since(start) < 2*time.Second {
		n += read()
	}
	return float64(n) / time.Since(start).Seconds()
}

// rssRow runs a real coordinator process on etcd holding 10,000 worker
// records, serves lookups for a few seconds and reads its peak RSS.
func rssRow(t *testing.T, e *testenv.Etcd) reportRow {
	t.Helper()
	o := etcd.DefaultOptions()
	o.Endpoints, o.Prefix = e.Endpoints(), "/rss"
	s, err := etcd.New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 100)
	for i := range 10000 {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			rec := reportRecord("rss", fmt.Sprintf("worker-%05d", i), 1)
			if _, err := s.UpsertNode(context.Background(), rec, 10*time.Minute); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	ctl, admin := freeAddr(t), freeAddr(t)
	p := start(t, "coordinator-rss", "coordinator", "--cluster-id", "rss", "--node-id", "rss", "--listen", ctl, "--admin-listen", admin,
		"--state-backend", "etcd", "--etcd-endpoints", strings.Join(e.Endpoints(), ","), "--etcd-prefix", "/rss", "--insecure-control-plane", "--log-level", "warn", "--max-records", "20000")
	testsupport.WaitFor(t, 60*time.Second, "coordinator ready with 10,000 workers", func() bool {
		c, err := p.api(t).Cluster(context.Background())
		return err == nil && c.EligibleWorkers == 10000
	})
	cl, err := client.New(client.Options{Coordinators: []string{ctl}, MaxIdleConns: 16, Retries: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	closedLoop(16, 5*time.Second, func(int) error {
		_, err := cl.Lookup(context.Background(), fmt.Sprintf("k-%d#0", rand.Int()), 3)
		return err
	})
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	hwm := 0
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			hwm, _ = strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		}
	}
	mib := float64(hwm) / 1024
	return reportRow{path: "coordinator peak RSS, 10,000 workers on etcd, under lookups", talon: fmt.Sprintf("%.0f MiB", mib), limit: "256 MiB", ratio: fmt.Sprintf("%.2f", 256/mib), goal: "<=256 MiB", met: mib > 0 && mib <= 256}
}

// cpuTime returns the process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// profile records a CPU profile of this process (the in-process
// coordinators and clients) until the returned function is called, then
// prints its top entries: the bottleneck the README explains.
func profile(t *testing.T, name string) func() {
	t.Helper()
	path := filepath.Join(os.TempDir(), "talon-bench-"+name+".pprof")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		t.Logf("no profile: %v", err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
		out, err := exec.Command("go", "tool", "pprof", "-top", "-nodecount=25", path).CombinedOutput()
		if err != nil {
			t.Logf("pprof: %v", err)
			return
		}
		t.Logf("CPU profile of %s (%s):\n%s", name, path, out)
	}
}
