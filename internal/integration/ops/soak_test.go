package ops

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/talonhq/talon/internal/testenv"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// soakPlan is one soak run: how long, how big, and which faults when.
type soakPlan struct {
	d            time.Duration
	workers      int
	quota        int64         // etcd --quota-backend-bytes
	sampleEvery  time.Duration // one row of figures
	blipEvery    time.Duration // a store pause of blipFor
	blipFor      time.Duration
	restartEvery time.Duration // coordinator c2 restarted
}

// soakTiming is the default timing compressed 50 times (5 s heartbeats
// become 100 ms), inside the lost-heartbeat rule; the status interval
// (1m) and etcd compaction interval (5m) are compressed alike. The request
// timeout is compressed less (500 ms, not 100 ms), and unhealthy-after
// with it to keep the rule: a kube-apiserver on a busy 2-core machine
// answers a write in more than 250 ms now and then, which failed a
// coordinator's read and cost a few seconds of readiness in windows
// without a fault (22-minute run: 3 of 22 windows at 0.92 to 0.98),
// a figure of the compression, not of the store's growth this measures.
var soakTiming = talontest.LiveTiming{Heartbeat: 100 * time.Millisecond, Request: 500 * time.Millisecond, Unhealthy: 800 * time.Millisecond, LeaseTTL: 2 * time.Second}

// soakExtra are the compressed status and compaction intervals.
var soakExtra = []string{"--status-interval", "1200ms", "--etcd-compaction-interval", "6s"}

// soakPlanFromEnv is the short soak `make test` runs, or the long one
// TALON_SOAK (a duration, e.g. 25m) asks for (`make soak`).
func soakPlanFromEnv(t *testing.T) soakPlan {
	p := soakPlan{d: 90 * time.Second, workers: 6, quota: 6 << 20, sampleEvery: 10 * time.Second,
		blipEvery: 40 * time.Second, blipFor: 1500 * time.Millisecond, restartEvery: 50 * time.Second}
	v := os.Getenv("TALON_SOAK")
	if v == "" {
		return p
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < time.Minute {
		t.Fatalf("TALON_SOAK=%q: want a duration of at least 1m", v)
	}
	p.d, p.workers, p.quota, p.sampleEvery = d, 10, 16<<20, time.Minute
	p.blipEvery, p.restartEvery = 3*time.Minute, 4*time.Minute
	return p
}

// TestSoak runs a compressed day of Talon on a stock etcd (auto-compaction
// off, as shipped, with a small quota) and on a real kube-apiserver, side
// by side: two coordinators and a few workers per backend at a 50-times
// compressed timing, long enough to write several times the etcd quota,
// with store pauses and restarts of one coordinator sprinkled in. It
// prints a row of figures per sample (ready share, fewest eligible against
// live workers, the store's database size, store bytes per heartbeat, and
// each process's RSS, goroutines and open files), and fails when the
// store grows without bound, a worker is dropped outside a fault, or a
// process's goroutines or files grow.
func TestSoak(t *testing.T) {
	talontest.SkipShort(t)
	plan := soakPlanFromEnv(t)
	t.Run("etcd", func(t *testing.T) {
		t.Parallel()
		e := testenv.StartEtcd(t, testenv.EtcdOptions{ClientCertAuth: true, ExtraArgs: []string{fmt.Sprintf("--quota-backend-bytes=%d", plan.quota)}})
		f := e.TLSFiles()
		c := talontest.NewLiveCluster(t, soakTiming, 2, []string{"--state-backend", "etcd", "--etcd-endpoints", strings.Join(e.Endpoints(), ","),
			"--etcd-ca-file", f.CAFile, "--etcd-cert-file", f.CertFile, "--etcd-key-file", f.KeyFile})
		c.CoordExtra = soakExtra
		runSoak(t, c, plan, soakStore{metrics: e.Endpoints()[0] + "/metrics", hc: etcdHTTP(e), pause: e.Pause, resume: e.Resume, etcd: e})
	})
	t.Run("kube", func(t *testing.T) {
		t.Parallel()
		// The kube-apiserver compacts its own etcd, every 5 minutes by
		// default: compressed like the rest.
		ke := testenv.StartEtcd(t, testenv.EtcdOptions{ClientCertAuth: true})
		k := testenv.StartKubeAPIServer(t, testenv.KubeOptions{Etcd: ke, ExtraArgs: []string{"--etcd-compaction-interval=6s"}})
		cs, err := kubernetes.NewForConfig(k.RestConfig(k.AdminToken()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "talon"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		c := talontest.NewLiveCluster(t, soakTiming, 2, []string{"--state-backend", "kubernetes", "--kubeconfig", k.WriteKubeconfig(t, k.AdminToken()), "--kube-namespace", "talon"})
		c.CoordExtra = []string{"--status-interval", "1200ms"}
		runSoak(t, c, plan, soakStore{metrics: ke.Endpoints()[0] + "/metrics", hc: etcdHTTP(ke), pause: ke.Pause, resume: ke.Resume, etcd: ke})
	})
}

// soakStore is the store a soak runs on: the etcd whose figures it reads
// (the kube-apiserver's own, on Kubernetes) and how to pause it.
type soakStore struct {
	metrics       string
	hc            *http.Client // speaks the etcd's TLS
	pause, resume func()
	etcd          *testenv.Etcd
}

// soakRow is one sample of a soak's figures.
type soakRow struct {
	at                 time.Duration
	readyShare         float64 // 200 cluster answers / answers, this window
	minEligible, live  int
	dbSize, dbInUse    float64 // bytes
	bytesPerHeartbeat  float64 // etcd received bytes / heartbeats accepted, this window
	heartbeats         float64 // accepted, this window
	rss                map[string]float64
	goroutines, openFD map[string]float64
	fault              bool // a pause or restart fell in this window
}

func runSoak(t *testing.T, c *talontest.LiveCluster, plan soakPlan, store soakStore) {
	c1 := c.Coordinator("c1")
	c2 := c.Coordinator("c2")
	ctls := []string{c1.Addr, c2.Addr}
	var workers []*talontest.Proc
	for i := range plan.workers {
		workers = append(workers, c.Worker(fmt.Sprintf("w%d", i+1), ctls, talontest.LiveTiming{}))
	}
	talontest.WaitEligible(t, 60*time.Second, plan.workers, c1, c2)
	pl := talontest.StartPoller(t, c.Client, talontest.TargetOf(c1), talontest.TargetOf(c2))

	procs := append([]*talontest.Proc{c1, c2}, workers...)
	var rows []soakRow
	var faults []time.Time
	var faultsMu sync.Mutex
	noteFault := func() { faultsMu.Lock(); faults = append(faults, time.Now()); faultsMu.Unlock() }
	begin := time.Now()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the faults
		defer wg.Done()
		blip, restart := time.NewTicker(plan.blipEvery), time.NewTicker(plan.restartEvery)
		defer blip.Stop()
		defer restart.Stop()
		for {
			select {
			case <-stop:
				return
			case <-blip.C:
				noteFault()
				store.pause()
				time.Sleep(plan.blipFor)
				store.resume()
				noteFault()
			case <-restart.C:
				noteFault()
				c2.Kill()
				c2.Restart()
				noteFault()
			}
		}
	}()
	prev := soakScrape(store, procs)
	for at := plan.sampleEvery; at <= plan.d; at += plan.sampleEvery {
		time.Sleep(time.Until(begin.Add(at)))
		cur := soakScrape(store, procs)
		faultsMu.Lock()
		fault := false
		for _, f := range faults {
			fault = fault || f.After(begin.Add(at-plan.sampleEvery-5*time.Second))
		}
		faultsMu.Unlock()
		rows = append(rows, soakWindow(pl.Since(begin.Add(at-plan.sampleEvery)), prev, cur, at, plan.workers, fault))
		prev = cur
	}
	close(stop)
	wg.Wait()
	pl.Stop()
	logSoak(t, rows)
	checkSoak(t, rows, plan)
}

// soakFigures is one scrape of the store's and every process's metrics.
type soakFigures struct {
	received, dbSize, dbInUse float64
	heartbeats                map[string]float64 // accepted, per coordinator (a restart starts it again)
	rss, goroutines, openFD   map[string]float64
}

// etcdHTTP is an HTTP client for the metrics of e, which may require a
// client certificate.
func etcdHTTP(e *testenv.Etcd) *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: e.TLSConfig()}}
}

func soakScrape(store soakStore, procs []*talontest.Proc) soakFigures {
	f := soakFigures{heartbeats: map[string]float64{}, rss: map[string]float64{}, goroutines: map[string]float64{}, openFD: map[string]float64{}}
	sm := talontest.ScrapeWith(store.hc, store.metrics)
	f.received, f.dbSize, f.dbInUse = sm["etcd_network_client_grpc_received_bytes_total"], sm["etcd_mvcc_db_total_size_in_bytes"], sm["etcd_mvcc_db_total_size_in_use_in_bytes"]
	for _, p := range procs {
		m := talontest.Scrape("http://" + p.Admin + "/metrics")
		f.heartbeats[p.Name] = m[`talon_coordinator_node_updates_total{operation="heartbeat",outcome="accepted"}`]
		f.rss[p.Name], f.goroutines[p.Name], f.openFD[p.Name] = m["process_resident_memory_bytes"], m["go_goroutines"], m["process_open_fds"]
	}
	return f
}

// counterDelta sums the growth of per-process counters between two
// scrapes; a counter that went down started again (its process restarted)
// and counts from zero.
func counterDelta(prev, cur map[string]float64) float64 {
	var d float64
	for name, v := range cur {
		if p := prev[name]; v >= p {
			d += v - p
		} else {
			d += v
		}
	}
	return d
}

// soakWindow turns the samples and scrapes of one window into a row.
func soakWindow(samples []talontest.Sample, prev, cur soakFigures, at time.Duration, live int, fault bool) soakRow {
	r := soakRow{at: at, live: live, minEligible: math.MaxInt, dbSize: cur.dbSize, dbInUse: cur.dbInUse,
		rss: cur.rss, goroutines: cur.goroutines, openFD: cur.openFD, fault: fault}
	var answers, ok int
	for _, s := range samples {
		if s.Kind != talontest.KindCluster {
			continue
		}
		answers++
		if s.Status == 200 {
			ok++
			r.minEligible = min(r.minEligible, s.Eligible)
		}
	}
	if answers > 0 {
		r.readyShare = float64(ok) / float64(answers)
	}
	if r.minEligible == math.MaxInt {
		r.minEligible = 0
	}
	r.heartbeats = counterDelta(prev.heartbeats, cur.heartbeats)
	if r.heartbeats > 0 {
		r.bytesPerHeartbeat = (cur.received - prev.received) / r.heartbeats
	}
	return r
}

func logSoak(t *testing.T, rows []soakRow) {
	t.Logf("| t | ready share | min eligible / live | db size MiB (in use) | store bytes/heartbeat | heartbeats | RSS MiB c1 / w1 | goroutines c1 / w1 | open fds c1 / w1 | fault |")
	t.Logf("|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		t.Logf("| %s | %.3f | %d / %d | %.1f (%.1f) | %.0f | %.0f | %.0f / %.0f | %.0f / %.0f | %.0f / %.0f | %v |",
			r.at, r.readyShare, r.minEligible, r.live, r.dbSize/(1<<20), r.dbInUse/(1<<20), r.bytesPerHeartbeat, r.heartbeats,
			r.rss["c1"]/(1<<20), r.rss["w1"]/(1<<20), r.goroutines["c1"], r.goroutines["w1"], r.openFD["c1"], r.openFD["w1"], r.fault)
	}
}

// checkSoak fails on unbounded growth or a dropped worker outside faults.
func checkSoak(t *testing.T, rows []soakRow, plan soakPlan) {
	if len(rows) < 3 {
		t.Fatalf("only %d rows", len(rows))
	}
	for _, r := range rows {
		if !r.fault && (r.readyShare < 1 || r.minEligible < r.live) {
			t.Errorf("at %s with no fault in the window: ready share %.3f, fewest eligible %d of %d live", r.at, r.readyShare, r.minEligible, r.live)
		}
		if r.dbSize > float64(plan.quota)*3/4 {
			t.Errorf("at %s the store's database is %.1f MiB, over three quarters of its %d MiB quota", r.at, r.dbSize/(1<<20), plan.quota>>20)
		}
	}
	third := len(rows) / 3
	first, last := rows[:third+1], rows[len(rows)-third-1:]
	peak := func(rs []soakRow, f func(soakRow) float64) float64 {
		m := 0.0
		for _, r := range rs {
			m = max(m, f(r))
		}
		return m
	}
	// c1 and the workers run the whole soak (c2 restarts).
	for _, name := range []string{"c1", "w1"} {
		g0, g1 := peak(first, func(r soakRow) float64 { return r.goroutines[name] }), peak(last, func(r soakRow) float64 { return r.goroutines[name] })
		if g1 > g0*1.25+20 {
			t.Errorf("%s: goroutines grew from a peak of %.0f in the first third to %.0f in the last", name, g0, g1)
		}
		f0, f1 := peak(first, func(r soakRow) float64 { return r.openFD[name] }), peak(last, func(r soakRow) float64 { return r.openFD[name] })
		if f1 > f0*1.25+10 {
			t.Errorf("%s: open files grew from a peak of %.0f in the first third to %.0f in the last", name, f0, f1)
		}
		m0, m1 := peak(first, func(r soakRow) float64 { return r.rss[name] }), peak(last, func(r soakRow) float64 { return r.rss[name] })
		if m1 > m0*1.5+32<<20 {
			t.Errorf("%s: RSS grew from a peak of %.0f MiB in the first third to %.0f MiB in the last", name, m0/(1<<20), m1/(1<<20))
		}
	}
}
