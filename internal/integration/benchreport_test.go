package integration

import (
	"bytes"
	"context"
	"errors"
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
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/talonhq/talon/internal/app"
	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/datav1"
	"github.com/talonhq/talon/internal/placement"
	"github.com/talonhq/talon/internal/protocol"
	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/state/etcd"
	"github.com/talonhq/talon/internal/state/kube"
	"github.com/talonhq/talon/internal/state/memory"
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

// latencies returns p50 and p99 of ds.
func latencies(ds []time.Duration) (p50, p99 time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	slices.Sort(ds)
	return ds[len(ds)/2], ds[len(ds)*99/100]
}

// closedLoop runs op from writers goroutines back to back for d and
// returns the successful operations per second and their latencies.
func closedLoop(writers int, d time.Duration, op func(w int) error) (perSec float64, lat []time.Duration, failures int, firstErr error) {
	stop := time.Now().Add(d)
	var mu sync.Mutex
	var wg sync.WaitGroup
	var ok, failed atomic.Int64
	start := time.Now()
	for w := range writers {
		wg.Go(func() {
			var mine []time.Duration
			for time.Now().Before(stop) {
				t0 := time.Now()
				if err := op(w); err != nil {
					if failed.Add(1) == 1 {
						mu.Lock()
						firstErr = err
						mu.Unlock()
					}
					continue
				}
				mine = append(mine, time.Since(t0))
				ok.Add(1)
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return float64(ok.Load()) / time.Since(start).Seconds(), lat, int(failed.Load()), firstErr
}

func rateRow(path string, talon, raw float64, tl, rl []time.Duration, goalRatio float64, p99Factor float64, p99Cap time.Duration) reportRow {
	t50, t99 := latencies(tl)
	r50, r99 := latencies(rl)
	ratio := talon / raw
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
		talon: fmt.Sprintf("%.0f/s p50 %s p99 %s", talon, t50.Round(time.Millisecond), t99.Round(time.Millisecond)),
		limit: fmt.Sprintf("%.0f/s p50 %s p99 %s", raw, r50.Round(time.Millisecond), r99.Round(time.Millisecond)),
		ratio: fmt.Sprintf("%.2f", ratio),
		goal:  goal, met: met,
	}
}

// reportRecord is a typical worker record (about 1.5 KB encoded).
func reportRecord(clusterID, node string, seq uint64) *cluster.Record {
	return &cluster.Record{
		ClusterID: clusterID, NodeID: node, Role: cluster.RoleWorker, IncarnationID: "0f8e5c1a-6b7d-4c1e-9a53-" + node,
		Address: "10.42.17.203:7500", AdminAddress: "10.42.17.203:7501", Version: "v1.4.2 (go1.26.8, 3f2c9ab)",
		StartTimeUnixMs: 1_784_800_000_000, HeartbeatSeq: seq, Health: cluster.HealthHealthy, Ready: true,
		Capacity: cluster.Capacity{CapacityBytes: 2 << 40, ResidentBytes: 1_873_412_300_800, Blocks: 447_000, Pages: 114_000_000, InflightLoads: 12},
		Counters: cluster.Counters{RequestsTotal: 9_812_345_678, ErrorsTotal: 1_234, HitsTotal: 8_700_000_000, MissesTotal: 1_112_345_678,
			BytesServedTotal: 431_000_000_000_000, BackendFetchesTotal: 1_112_345_678, BackendErrorsTotal: 17, EvictionsTotal: 98_000_000},
		Labels: map[string]string{"region": "eu-west-1", "zone": "eu-west-1b", "pod": "talon-worker-7d9f8b6c5-x2x9q",
			"host": "ip-10-42-17-203.eu-west-1.compute.internal", "rack": "r17", "pool": "nvme-large"},
	}
}

// heartbeatThroughCoordinators registers writers simulated workers through
// addrs (worker w uses addrs[w%len]) and then heartbeats back to back for d.
func heartbeatThroughCoordinators(t *testing.T, addrs []string, clusterID string, writers int, d time.Duration) (float64, []time.Duration, int, error) {
	t.Helper()
	clients := make([]*client.Client, writers)
	recs := make([]*cluster.Record, writers)
	for w := range writers {
		cl, err := client.New(client.Options{Coordinators: []string{addrs[w%len(addrs)]}, Retries: -1, MaxIdleConns: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
		clients[w] = cl
		recs[w] = reportRecord(clusterID, fmt.Sprintf("hb-%05d", w), 0)
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	var regErr atomic.Pointer[error]
	for w := range writers {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			msg, _ := protocol.NewRegister(recs[w])
			if _, err := clients[w].Call(context.Background(), msg); err != nil {
				regErr.CompareAndSwap(nil, &err)
			}
		})
	}
	wg.Wait()
	if p := regErr.Load(); p != nil {
		t.Fatalf("register simulated workers: %v", *p)
	}
	return closedLoop(writers, d, func(w int) error {
		recs[w].HeartbeatSeq++
		msg, err := protocol.NewHeartbeat(recs[w])
		if err != nil {
			return err
		}
		resp, err := clients[w].Call(context.Background(), msg)
		if err != nil {
			return err
		}
		if a, ok := resp.(*protocol.Ack); !ok || a.Outcome != protocol.OutcomeAccepted {
			return fmt.Errorf("heartbeat not accepted: %v", resp)
		}
		return nil
	})
}

// TestBenchReport measures every row of issue 18's table in one run and
// prints it. It asserts nothing about speed. Run it with make bench-report
// (TALON_BENCH_REPORT=1; TALON_BENCH_SECONDS sets each phase's length).
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
	timing := cluster.Timing{HeartbeatInterval: 5 * time.Second, UnhealthyAfter: time.Minute, LeaseTTL: 2 * time.Minute}
	coordOpts := func(store state.Store) coordtest.Options {
		return coordtest.Options{ClusterID: "bench", Timing: timing, RequestTimeout: 30 * time.Second, ShutdownTimeout: 5 * time.Second, Store: store, WaitReady: true}
	}

	// etcd: raw ordered upsert (a compare-and-swap on the key's revision,
	// with a lease, the record JSON as value) vs heartbeats end to end
	// through two coordinators over the protocol, 1,000 writers each.
	e := testenv.StartEtcd(t, testenv.EtcdOptions{})
	{
		const writers = 1000
		raw, err := clientv3.New(clientv3.Config{Endpoints: e.Endpoints(), DialTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		lease, err := raw.Grant(ctx, 600)
		if err != nil {
			t.Fatal(err)
		}
		revs := make([]int64, writers)
		payload, _ := cluster.Encode(reportRecord("raw", "w", 1))
		for w := range writers {
			r, err := raw.Put(ctx, fmt.Sprintf("/raw/w%05d", w), string(payload), clientv3.WithLease(lease.ID))
			if err != nil {
				t.Fatal(err)
			}
			revs[w] = r.Header.Revision
		}
		rawRate, rawLat, rawFail, rawErr := closedLoop(writers, phase, func(w int) error {
			key := fmt.Sprintf("/raw/w%05d", w)
			r, err := raw.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", revs[w])).
				Then(clientv3.OpPut(key, string(payload), clientv3.WithLease(lease.ID))).Commit()
			if err != nil {
				return err
			}
			if !r.Succeeded {
				return errors.New("raw compare failed")
			}
			revs[w] = r.Header.Revision
			return nil
		})
		if rawFail > 0 {
			t.Logf("raw etcd: %d failures, first %v", rawFail, rawErr)
		}
		addrs := twoCoordinators(t, coordOpts, func() (state.Store, error) {
			o := etcd.DefaultOptions()
			o.Endpoints, o.RequestTimeout = e.Endpoints(), 30*time.Second
			return etcd.New(ctx, o)
		})
		stopProfile := profile(t, "etcd-heartbeats")
		rate, lat, fail, ferr := heartbeatThroughCoordinators(t, addrs, "bench", writers, phase)
		stopProfile()
		if fail > 0 {
			t.Logf("talon etcd heartbeats: %d failures, first %v", fail, ferr)
		}
		add(rateRow("etcd heartbeats, 1,000 writers, 2 coordinators", rate, rawRate, lat, rawLat, 0.6, 1.5, 0))
	}

	// Kubernetes: raw Lease update (optimistic concurrency on
	// resourceVersion, the record in an annotation) vs heartbeats through
	// two coordinators, 200 writers each.
	{
		const writers = 200
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
			return kube.New(ctx, kube.Options{Kubeconfig: kubeconfig, Namespace: "talon", RequestTimeout: 30 * time.Second, Logger: slog.New(slog.DiscardHandler)})
		})
		rate, lat, fail, ferr := heartbeatThroughCoordinators(t, addrs, "bench", writers, phase)
		if fail > 0 {
			t.Logf("talon kube heartbeats: %d failures, first %v", fail, ferr)
		}
		add(rateRow("Kubernetes Lease heartbeats, 200 writers, 2 coordinators", rate, rawRate, lat, rawLat, 0.6, 0, 250*time.Millisecond))

		// Lookups on Kubernetes, with 1,000 workers.
		kl := lookupsOn(t, func() state.Store {
			s, err := kube.New(ctx, kube.Options{Kubeconfig: kubeconfig, Namespace: "lookups", RequestTimeout: 30 * time.Second, QPS: -1, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "lookups"}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			return s
		}, coordOpts, phase/2)
		ml := lookupsOn(t, func() state.Store { return memory.New(memory.Options{}) }, coordOpts, phase/2)
		el := lookupsOn(t, func() state.Store {
			o := etcd.DefaultOptions()
			o.Endpoints, o.Prefix = e.Endpoints(), "/lookups"
			s, err := etcd.New(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}, coordOpts, phase/2)
		add(reportRow{path: "lookups over the protocol, 1,000 workers: etcd (memory as the limit)", talon: fmt.Sprintf("%.0f/s", el), limit: fmt.Sprintf("%.0f/s", ml),
			ratio: fmt.Sprintf("%.2f", el/ml), goal: ">=30000/s on etcd", met: el >= 30000})
		add(reportRow{path: "lookups over the protocol, 1,000 workers: Kubernetes (memory as the limit)", talon: fmt.Sprintf("%.0f/s", kl), limit: fmt.Sprintf("%.0f/s", ml),
			ratio: fmt.Sprintf("%.2f", kl/ml), goal: "(no goal)", met: true})
	}
	finishReport(t, rows, e)
}

// lookupsOn seeds 1,000 workers into a store, runs a coordinator on it and
// measures lookups/s from 32 concurrent callers over pooled connections.
func lookupsOn(t *testing.T, open func() state.Store, coordOpts func(state.Store) coordtest.Options, d time.Duration) float64 {
	t.Helper()
	s := open()
	t.Cleanup(func() { s.Close() })
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i := range 1000 {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			rec := reportRecord("bench", fmt.Sprintf("worker-%04d", i), 1)
			rec.Address = fmt.Sprintf("10.%d.%d.%d:7500", i/65536, i/256%256, i%256)
			if _, err := s.UpsertNode(context.Background(), rec, 10*time.Minute); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	co := coordOpts(s)
	co.NodeID = "lookups"
	addr := coordtest.Start(t, co).ControlAddr
	cl, err := client.New(client.Options{Coordinators: []string{addr}, MaxIdleConns: 64, Retries: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	testsupport.WaitFor(t, 30*time.Second, "lookups answered", func() bool {
		p, err := cl.Lookup(context.Background(), "warm#0", 3)
		return err == nil && len(p.Owners) == 3
	})
	var n atomic.Int64
	rate, _, fail, ferr := closedLoop(32, d, func(w int) error {
		_, err := cl.Lookup(context.Background(), fmt.Sprintf("bench/object-%d#0", n.Add(1)), 3)
		return err
	})
	if fail > 0 {
		t.Logf("lookups: %d failures, first %v", fail, ferr)
	}
	return rate
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
	// record, validate, encode it for the store.
	payload, _ := cluster.Encode(reportRecord("bench", "w", 7))
	codec := testing.Benchmark(func(b *testing.B) {
		for range b.N {
			rec, err := protocol.DecodeRecordPayload(payload)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := state.EncodeRecord(rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	us := float64(codec.NsPerOp()) / 1000
	add(reportRow{path: "record decode+encode per heartbeat (coordinator)", talon: fmt.Sprintf("%.1f µs, %d allocs", us, codec.AllocsPerOp()), limit: "10 µs", ratio: fmt.Sprintf("%.2f", 10/us), goal: "<=10 µs", met: us <= 10})

	add(cacheHitRow(t))
	add(rssRow(t, e))

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
// loopbackCeiling) and the same bytes read from the file, all three into
// one reused buffer with ReadFrom (so each is read(2)s straight into it),
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
	testsupport.WaitFor(t, 10*time.Second, "worker serving", func() bool { return w.W.Serving() })
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	req := datav1.Request{Addr: w.W.DataAddress(), Object: "hot.bin", Offset: 0, Length: 4 << 20, Replicas: 1}
	var buf bytes.Buffer
	fetch := func() int64 {
		buf.Reset()
		res, err := datav1.FetchTo(context.Background(), hc, req, &buf)
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
	sendLoopback := loopbackCeiling(t, filepath.Join(blobs, "hot.bin"), 4<<20)
	loopback := func() int64 {
		buf.Reset()
		return sendLoopback(&buf)
	}
	var served, ceiling, file float64
	for range 2 {
		served += throughput(fetch) / 2
		ceiling += throughput(loopback) / 2
		file += throughput(readFile) / 2
	}
	ratio := served / file
	return reportRow{path: "cache hits through the data listener (4 MiB blocks, keep-alive, plain)", talon: fmt.Sprintf("%.0f MB/s", served/1e6),
		limit: fmt.Sprintf("%.0f MB/s reading the file; %.0f MB/s raw loopback TCP with sendfile (%.2fx of it)", file/1e6, ceiling/1e6, served/ceiling),
		ratio: fmt.Sprintf("%.2f", ratio), goal: ">=0.5x the file read", met: ratio >= 0.5}
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
	return reportRow{path: "coordinator peak RSS, 10,000 workers on etcd, under lookups", talon: fmt.Sprintf("%.0f MiB", mib), limit: "512 MiB", ratio: fmt.Sprintf("%.2f", 512/mib), goal: "<=512 MiB", met: mib > 0 && mib <= 512}
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

// twoCoordinators starts two coordinators, each on its own store from open,
// and returns their control addresses.
func twoCoordinators(t *testing.T, coordOpts func(state.Store) coordtest.Options, open func() (state.Store, error)) []string {
	t.Helper()
	var addrs []string
	for i := range 2 {
		s, err := open()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		co := coordOpts(s)
		co.NodeID = fmt.Sprintf("coord-%d", i)
		addrs = append(addrs, coordtest.Start(t, co).ControlAddr)
	}
	return addrs
}
