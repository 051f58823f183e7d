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
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
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
	"github.com/talonhq/talon/internal/testsupport/talontest"
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

// rateRow compares Talon's result with the raw ceiling's from the same
// run: both pooled over their phases, and the ratios as the median (with
// its range) of interleaved raw/Talon pairs; the goal is judged on the
// medians.
func rateRow(path string, talon, raw bench.Result, ratio, p99Ratio bench.Spread, goalRatio float64, p99Factor float64, p99Cap time.Duration) reportRow {
	t50, t99 := talon.P50(), talon.P99()
	r50, r99 := raw.P50(), raw.P99()
	met := ratio.Median >= goalRatio
	goal := fmt.Sprintf(">=%.0f%% of raw", goalRatio*100)
	shown := ratio.String()
	if p99Factor > 0 {
		met = met && p99Ratio.Median <= p99Factor
		goal += fmt.Sprintf(", p99 <=%.1fx raw", p99Factor)
		shown += ", p99 " + p99Ratio.Format("%.2fx")
	}
	if p99Cap > 0 {
		met = met && t99 <= p99Cap
		goal += fmt.Sprintf(", p99 <=%s", p99Cap)
	}
	return reportRow{
		path:  path,
		talon: fmt.Sprintf("%.0f/s p50 %s p99 %s", talon.PerSecond(), t50.Round(time.Millisecond), t99.Round(time.Millisecond)),
		limit: fmt.Sprintf("%.0f/s p50 %s p99 %s", raw.PerSecond(), r50.Round(time.Millisecond), r99.Round(time.Millisecond)),
		ratio: shown,
		goal:  goal, met: met,
	}
}

// heartbeatRows returns a row per raw ceiling of a heartbeat report
// (--mix both measures two), the path naming what the ceiling's writers
// send.
func heartbeatRows(t *testing.T, path string, hb harness.HeartbeatReport, goalRatio, p99Factor float64, p99Cap time.Duration) []reportRow {
	t.Helper()
	logFailures(t, path+": talon", hb.TalonResult)
	var rows []reportRow
	for _, c := range hb.Ceilings {
		logFailures(t, path+": raw "+string(c.Mix), c.RawResult)
		name := fmt.Sprintf("%s (raw: %s)", path, ceilingName(hb.Backend, c))
		rows = append(rows, rateRow(name, hb.TalonResult, c.RawResult, c.Ratio, c.P99Ratio, goalRatio, p99Factor, p99Cap))
	}
	return rows
}

// ceilingName is the short form of what ceiling c's raw writers send per
// heartbeat, for the report's path column.
func ceilingName(backend string, c harness.Ceiling) string {
	switch {
	case c.Mix == bench.MixWrite && backend == config.BackendKubernetes:
		return "a Lease UPDATE per heartbeat"
	case c.Mix == bench.MixWrite, c.StatusEvery == 0:
		return "a record write per heartbeat"
	case backend == config.BackendKubernetes:
		return fmt.Sprintf("%d renewal patches : 1 status patch", c.StatusEvery-1)
	}
	return fmt.Sprintf("%d lease keepalives : 1 compare-and-swap put", c.StatusEvery-1)
}

// reportPairs returns TALON_BENCH_PAIRS, the raw/Talon pairs behind each
// ratio of the report (default harness.DefaultPairs).
func reportPairs(t *testing.T) int {
	t.Helper()
	v := os.Getenv("TALON_BENCH_PAIRS")
	if v == "" {
		return harness.DefaultPairs
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > harness.MaxPairs {
		t.Fatalf("TALON_BENCH_PAIRS %q: must be from 1 to %d", v, harness.MaxPairs)
	}
	return n
}

// reportMix returns TALON_BENCH_MIX, the raw heartbeat ceilings to
// measure: renew (default), write or both.
func reportMix() string {
	if v := os.Getenv("TALON_BENCH_MIX"); v != "" {
		return v
	}
	return string(bench.MixRenew)
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
// (TALON_BENCH_REPORT=1; TALON_BENCH_SECONDS sets each phase's length,
// TALON_BENCH_PAIRS the interleaved raw/Talon pairs behind each ratio,
// default 3, and TALON_BENCH_MIX the heartbeat ceilings: renew, write or
// both). Every ratio is the median of the pairs with its range; the
// figures against a fixed limit (HRW, the codec) are the median of as many
// runs. The heartbeat and lookup rows are talon bench heartbeats and talon
// bench lookups --backend, called as functions: the report and the CLI
// measure the same thing.
func TestBenchReport(t *testing.T) {
	if os.Getenv(benchReportEnv) == "" {
		t.Skipf("measurement: set %s=1 (make bench-report)", benchReportEnv)
	}
	phase := 10 * time.Second
	if s, err := strconv.Atoi(os.Getenv("TALON_BENCH_SECONDS")); err == nil && s > 0 {
		phase = time.Duration(s) * time.Second
	}
	pairs := reportPairs(t)
	var rows []reportRow
	add := func(r reportRow) {
		rows = append(rows, r)
		t.Logf("%s: talon %s | limit %s | ratio %s | goal %s met=%t", r.path, r.talon, r.limit, r.ratio, r.goal, r.met)
	}
	ctx := context.Background()
	progress := func(format string, a ...any) { t.Logf(format, a...) }
	log := slog.New(slog.DiscardHandler)

	// etcd: the raw ceiling of what a heartbeat costs the store (at the
	// default status interval 11 lease keepalives to 1 compare-and-swap
	// put of the record, with TALON_BENCH_MIX=write or both a put per
	// heartbeat) vs heartbeats end to end through two coordinators over
	// the protocol, 1,000 writers each, in interleaved pairs.
	e := testenv.StartEtcd(t, testenv.EtcdOptions{})
	conn := harness.Conn{RequestTimeout: 30 * time.Second}
	conn.Etcd.Endpoints, conn.Etcd.Prefix, conn.Etcd.DialTimeout = e.Endpoints(), "/bench", 5*time.Second
	hbOpts := harness.HeartbeatOptions{Backend: "etcd", Conn: conn, Writers: harness.DefaultEtcdWriters, Coordinators: 2, Duration: phase,
		Pairs: pairs, Mix: reportMix(), StatusInterval: cluster.DefaultStatusInterval, Output: "text",
		TalonPhase: func() func() { return profile(t, "etcd-heartbeats") }}
	if err := hbOpts.Validate(func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	hb, err := harness.Heartbeats(ctx, app.BenchRoles(), hbOpts, progress, log)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range heartbeatRows(t, "etcd heartbeats, 1,000 writers, 2 coordinators", hb, 0.7, 1.3, 0) {
		add(r)
	}

	// Kubernetes: the raw ceiling (11 renewal patches of renewTime and
	// talon.io/renew-seq to 1 merge patch of the status, on
	// resourceVersion; with TALON_BENCH_MIX=write a Lease UPDATE per
	// heartbeat) vs heartbeats through two coordinators, 200 writers each.
	k := testenv.StartKubeAPIServer(t, testenv.KubeOptions{})
	conn.Kube.Kubeconfig, conn.Kube.Namespace, conn.Kube.QPS, conn.Kube.Burst = k.WriteKubeconfig(t, k.AdminToken()), "bench", 400, 800
	hbOpts.Backend, hbOpts.Conn, hbOpts.Writers, hbOpts.TalonPhase = "kubernetes", conn, harness.DefaultKubeWriters, nil
	hb, err = harness.Heartbeats(ctx, app.BenchRoles(), hbOpts, progress, log)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range heartbeatRows(t, "Kubernetes Lease heartbeats, 200 writers, 2 coordinators", hb, 0.8, 0, 250*time.Millisecond) {
		add(r)
	}
	for _, r := range kubeStoreBytesRows(t, k) { // issue 36: store bytes per worker per hour (kubestorebytes_test.go)
		add(r)
	}

	// Lookups with 1,000 workers on memory, etcd and Kubernetes, from 32
	// and from 128 callers over pooled connections: a coordinator's
	// revision probe is shared by the lookups that arrive while one is in
	// flight, so more callers share each probe. Memory, the limit, runs
	// before, between and after the pairs' etcd and Kubernetes phases.
	for _, callers := range []int{32, 128} {
		lk, err := harness.LookupBackends(ctx, app.BenchRoles(), harness.LookupOptions{Backends: []string{"memory", "etcd", "kubernetes"}, Workers: 1000, Conn: conn,
			Concurrency: callers, Duration: phase / 2, Keys: 100000, Replicas: 3, Pairs: pairs}, progress, log)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range lk.Backends {
			logFailures(t, "lookups on "+b.Backend, b.Result)
		}
		add(lookupRow(lk, 1, callers, "etcd", 0.6, callers == 32))
		add(lookupRow(lk, 2, callers, "Kubernetes", 0.5, true))
	}
	for _, r := range dataPathRows(t, pairs) { // issue 40 (benchreport_data_test.go)
		add(r)
	}
	for _, r := range shapedRows(t, pairs) { // issue 51 (benchreport_shaped_test.go)
		add(r)
	}
	for _, r := range fleetRows(t, e, k) { // issue 51: the fleet out of process (fleet_test.go)
		add(r)
	}
	finishReport(t, rows, e, pairs)
}

// lookupRow is the row of backend i of lk (memory is backend 0, the
// limit): pooled rates, the ratio as the median of the pairs.
func lookupRow(lk harness.LookupsReport, i, callers int, name string, goal float64, hasGoal bool) reportRow {
	ml, b := lk.Backends[0].Result, lk.Backends[i]
	var ratio bench.Spread
	if b.RatioToMemory != nil {
		ratio = *b.RatioToMemory
	}
	r := reportRow{path: fmt.Sprintf("lookups over the protocol, 1,000 workers, %d callers: %s (memory as the limit)", callers, name),
		talon: fmt.Sprintf("%.0f/s", b.Result.PerSecond()), limit: fmt.Sprintf("%.0f/s", ml.PerSecond()), ratio: ratio.String(),
		goal: "(no goal)", met: true}
	if hasGoal {
		r.goal, r.met = fmt.Sprintf(">=%.1fx memory", goal), ratio.Median >= goal
	}
	return r
}

// finishReport adds the rows that need no backend and prints the table.
// The figures measured against a fixed limit (HRW, the codec) are the
// median of pairs runs, with their range.
func finishReport(t *testing.T, rows []reportRow, e *testenv.Etcd, pairs int) {
	add := func(r reportRow) {
		rows = append(rows, r)
		t.Logf("%s: talon %s | limit %s | ratio %s | goal %s met=%t", r.path, r.talon, r.limit, r.ratio, r.goal, r.met)
	}
	add(hrwRow(t, pairs))
	add(codecRow(t, pairs))
	add(cacheHitRow(t, pairs))
	add(rssRow(t, e))
	for _, r := range scaleRows(t, e) { // issue 30's scale rows (scale_test.go)
		add(r)
	}
	writeTable(t, rows)
}

// writeTable prints rows as the report's table with the machine it ran
// on, and writes it to TALON_BENCH_REPORT_FILE when set.
func writeTable(t *testing.T, rows []reportRow) {
	t.Helper()
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

// hrwRow measures HRW per candidate, 1,000 workers, 3 owners, pairs
// times.
func hrwRow(t *testing.T, pairs int) reportRow {
	t.Helper()
	nodes := make([]placement.Node, 1000)
	for i := range nodes {
		nodes[i] = placement.Node{ID: fmt.Sprintf("worker-%04d", i), Address: "a"}
	}
	tbl, err := placement.New(nodes)
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprintf("bench/object-%d#0", i)
	}
	var wall, cpu []float64
	for range pairs {
		var lastCPU time.Duration
		res := testing.Benchmark(func(b *testing.B) {
			dst := make([]placement.Owner, 0, 3)
			b.ResetTimer()
			c0 := cpuTime()
			for i := range b.N {
				dst = tbl.LookupInto(keys[i&1023], 3, dst)
			}
			lastCPU = cpuTime() - c0
		})
		// CPU time of the last (sized) run, per candidate: less sensitive
		// to other load on the machine than wall time (it includes the
		// process's idle background goroutines, hence "~").
		cpu = append(cpu, float64(lastCPU.Nanoseconds())/float64(res.N)/1000)
		wall = append(wall, float64(res.NsPerOp())/1000)
	}
	perCand := bench.SpreadOf(wall)
	return reportRow{path: "HRW lookup, per candidate (1,000 workers, 3 owners)", talon: fmt.Sprintf("%s wall, ~%s CPU", perCand.Format("%.2f ns"), bench.SpreadOf(cpu).Format("%.2f ns")),
		limit: "1.5 ns", ratio: limitRatio(1.5, wall).String(), goal: "<=1.5 ns", met: perCand.Median <= 1.5}
}

// codecRow measures the record codec per heartbeat on the coordinator,
// pairs times: decode the frame's record, validate, encode it for the
// store. The payloads of 4,096 workers in turn, as a coordinator serving
// many workers sees them (the decoder caches short strings). CPU time
// too, as for HRW.
func codecRow(t *testing.T, pairs int) reportRow {
	t.Helper()
	payloads := make([][]byte, 4096)
	for i := range payloads {
		payloads[i], _ = cluster.Encode(reportRecord("bench", fmt.Sprintf("hb-%05d", i), 7))
	}
	var wall, cpu []float64
	var allocs int64
	for range pairs {
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
		wall = append(wall, float64(codec.NsPerOp())/1000)
		cpu = append(cpu, float64(codecCPU.Nanoseconds())/float64(codec.N)/1000)
		allocs = max(allocs, codec.AllocsPerOp())
	}
	us := bench.SpreadOf(wall)
	return reportRow{path: fmt.Sprintf("record decode+encode per heartbeat (coordinator, %d-byte record)", len(payloads[0])),
		talon: fmt.Sprintf("%s wall, ~%s CPU, %d allocs", us.Format("%.1f µs"), bench.SpreadOf(cpu).Format("%.1f µs"), allocs),
		limit: "5 µs, 10 allocs", ratio: limitRatio(5, wall).String(), goal: "<=5 µs, <=10 allocs", met: us.Median <= 5 && allocs <= 10}
}

// limitRatio is the spread of limit over each of figures (smaller is
// better: the ratio is at least 1 when the goal is met).
func limitRatio(limit float64, figures []float64) bench.Spread {
	r := make([]float64, 0, len(figures))
	for _, f := range figures {
		if f > 0 {
			r = append(r, limit/f)
		}
	}
	return bench.SpreadOf(r)
}

// cacheHitRow reads a cached block through a real worker's data listener
// (keep-alive, one block per request), the same bytes sent with sendfile
// over a plain loopback TCP connection (the network ceiling, see
// testsupport.Loopback) and the same bytes read from the file, the two
// network paths through one 256 KiB buffer into a reused one. The two
// network paths take turns (bench.Interleave), and the ratio is the median
// of the pairs, so a burst of background load on a shared machine does not
// fall on one of them only.
func cacheHitRow(t *testing.T, pairs int) reportRow {
	t.Helper()
	blobs := t.TempDir()
	const size = 8 << 20
	talontest.WriteBlob(t, blobs, "hot.bin", size, 11)
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
	// The raw loopback and the hits in interleaved pairs (loopback first
	// and last), the file read once beside them.
	var served, ceiling []float64
	err = bench.Interleave(context.Background(), pairs,
		func(context.Context, int) error { ceiling = append(ceiling, throughput(loopback)); return nil },
		func(context.Context, int) error { served = append(served, throughput(fetch)); return nil })
	if err != nil {
		t.Fatal(err)
	}
	file := throughput(readFile)
	ratio := bench.SpreadOf(bench.PairRatios(ceiling, served))
	return reportRow{path: "cache hits through the data listener (4 MiB blocks, keep-alive, plain)", talon: fmt.Sprintf("%.0f MB/s", mean(served)/1e6),
		limit: fmt.Sprintf("%.0f MB/s raw loopback TCP with sendfile (reading the file: %.0f MB/s)", mean(ceiling)/1e6, file/1e6),
		ratio: ratio.String(), goal: ">=0.95x raw sendfile", met: ratio.Median >= 0.95}
}

// mean returns the mean of xs, 0 for none.
func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
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
	ctl, admin := talontest.FreeAddr(t), talontest.FreeAddr(t)
	p := talontest.Start(t, "coordinator-rss", "coordinator", "--cluster-id", "rss", "--node-id", "rss", "--listen", ctl, "--admin-listen", admin,
		"--state-backend", "etcd", "--etcd-endpoints", strings.Join(e.Endpoints(), ","), "--etcd-prefix", "/rss", "--insecure-control-plane", "--log-level", "warn", "--max-records", "20000")
	testsupport.WaitFor(t, 60*time.Second, "coordinator ready with 10,000 workers", func() bool {
		c, err := p.API(t).Cluster(context.Background())
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
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Cmd.Process.Pid))
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
