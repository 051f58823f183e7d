package upgrade

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

func TestMain(m *testing.M) { talontest.Main(m) }

// upgradeTiming is the case issue 46 measured: heartbeats every second,
// unhealthy after 5 s, leases of 10 s (long enough that HEAD's heartbeats
// renew the lease without writing the record on etcd).
var upgradeTiming = talontest.LiveTiming{Heartbeat: time.Second, Request: time.Second, Unhealthy: 5 * time.Second, LeaseTTL: 10 * time.Second}

// full reports whether TALON_UPGRADE=full asks for the full suite (make
// upgrade): a minute per mixed window. make test runs it short.
func full() bool { return os.Getenv("TALON_UPGRADE") == "full" }

// window is how long a mixed pair is watched.
func window() time.Duration {
	if full() {
		return time.Minute
	}
	return 15 * time.Second
}

// settleTimeout bounds every wait for a steady cluster.
const settleTimeout = 120 * time.Second

const workers = 3

// suite is one backend's cluster of processes of two builds.
type suite struct {
	t       *testing.T
	backend string
	c       *talontest.LiveCluster
	prev    string // the previous release's talon
	coords  []*talontest.Proc
	workers []*talontest.Proc
	pl      *talontest.Poller
	calls   *talontest.Callers
	lm      *talontest.LateMarks
	down    *outages
	rows    []string
}

func newSuite(t *testing.T, backend string, c *talontest.LiveCluster) *suite {
	t.Helper()
	c.CoordExtra = []string{"--drain-delay", talontest.DrainDelay.String(), "--shutdown-timeout", "5s"}
	return &suite{t: t, backend: backend, c: c, prev: talontest.PreviousRelease(t), down: &outages{}}
}

// start runs coordinators of the builds coordBins and workers of the
// builds workerBins ("" is HEAD's), each worker listing the coordinators
// rotated (or, with rotate false, in order: the first coordinator
// first), and waits for every coordinator to place on every worker.
func (s *suite) start(coordBins, workerBins []string, rotate bool) {
	t := s.t
	t.Helper()
	for i, bin := range coordBins {
		s.coords = append(s.coords, s.c.CoordinatorBin(bin, fmt.Sprintf("coord-%d", i+1)))
	}
	testsupport.WaitFor(t, settleTimeout, "every coordinator ready", func() bool {
		for _, p := range s.coords {
			if !talontest.Ready(t, p) {
				return false
			}
		}
		return true
	})
	ctls := s.ctls()
	for i, bin := range workerBins {
		list := ctls
		if rotate {
			list = talontest.Rotate(ctls, i)
		}
		s.workers = append(s.workers, s.c.WorkerBin(bin, fmt.Sprintf("worker-%d", i+1), list, talontest.LiveTiming{}))
	}
	talontest.WaitEligible(t, settleTimeout, len(workerBins), s.coords...)
	targets := make([]talontest.Target, len(s.coords))
	for i, p := range s.coords {
		targets[i] = talontest.TargetOf(p)
	}
	s.pl = talontest.StartPoller(t, s.c.Client, targets...)
	s.calls = talontest.StartCallers(t, s.c, ctls)
	s.lm = s.c.WatchLateMarks(t)
	time.Sleep(time.Second)
}

func (s *suite) ctls() []string {
	out := make([]string, len(s.coords))
	for i, p := range s.coords {
		out[i] = p.Addr
	}
	return out
}

// row is the figures of one phase.
type row struct {
	phase      string
	lookups    talontest.Row
	lateMarks  int
	short      int // 200 cluster answers naming fewer eligible workers than were alive
	disagree   int // revisions at which coordinators answered 200 with different placements
	shared     int // revisions that two or more coordinators answered
	unreadable int // records a coordinator left out of its snapshot (skipped_records_total)
}

// phase runs act (restarts, or a wait), settles, and records and checks
// the figures of the whole window: no failed lookup.
func (s *suite) phase(name string, act func()) { s.phaseFailClosed(name, act, false) }

// phaseFailClosed is phase for a window in which the store itself is down
// for a while (a single kube-apiserver restarting): with failClosed,
// lookups that failed not_ready (the coordinators failing closed, as ADR
// section 8 requires) are reported but allowed; nothing else is.
func (s *suite) phaseFailClosed(name string, act func(), failClosed bool) {
	t := s.t
	t.Helper()
	marks, unread := s.lm.Count(), s.unreadable()
	from := time.Now()
	act()
	talontest.WaitEligible(t, settleTimeout, len(s.workers), s.coords...)
	time.Sleep(time.Second)
	to := time.Now()
	samples := s.pl.Since(from)
	var cluster200 []talontest.Sample
	for _, sm := range samples {
		if sm.Kind == talontest.KindCluster && sm.At.Before(to) {
			cluster200 = append(cluster200, sm)
		}
	}
	bad, shared := talontest.Disagreements(cluster200, "")
	r := row{
		phase: name, lookups: s.calls.Figures(from, to), lateMarks: s.lm.Count() - marks,
		short:    talontest.Summarize(cluster200, s.down.alive(len(s.workers))).Dropped,
		disagree: len(bad), shared: shared, unreadable: s.unreadable() - unread,
	}
	for _, d := range bad {
		t.Logf("%s %s: disagreement at %s", s.backend, name, d)
	}
	line := fmt.Sprintf("| %s | %s | %d | %s | %v | %d | %d | %d of %d | %d |", s.backend, name, r.lookups.Attempted, r.lookups.FailedString(),
		r.lookups.MaxLatency.Round(time.Millisecond), r.lateMarks, r.short, r.disagree, r.shared, r.unreadable)
	t.Logf("upgrade row: %s", line)
	s.rows = append(s.rows, line)
	failed := r.lookups.FailedTotal()
	if failClosed {
		failed -= r.lookups.Failed["not_ready"]
	}
	if failed != 0 || r.lateMarks != 0 || r.short != 0 || r.disagree != 0 || r.unreadable != 0 {
		t.Errorf("%s %s: want 0 failed lookups (but not_ready while the store is down), 0 late marks of live workers, 0 answers short of live workers, 0 disagreements, 0 unreadable records; got %s (late marks by worker %v)",
			s.backend, name, line, s.lm.Nodes())
	}
}

// unreadable sums the records the running coordinators left out of their
// snapshots as unreadable (both builds export the counter).
func (s *suite) unreadable() int {
	name := "talon_state_etcd_skipped_records_total"
	if s.c.Kube != nil {
		name = "talon_state_kube_skipped_records_total"
	}
	n := 0.0
	for _, p := range s.coords {
		if !p.Exited() {
			n += talontest.Scrape("http://" + p.Admin + "/metrics")[name]
		}
	}
	return int(n)
}

// restart stops p (SIGTERM: it drains and deregisters) and starts it again
// with bin, then waits until every coordinator is ready and places on
// every worker. A worker counts as down from the SIGTERM until then.
func (s *suite) restart(p *talontest.Proc, bin string) {
	t := s.t
	t.Helper()
	isWorker := strings.HasPrefix(p.Name, "worker-")
	// A cluster read sent up to the poller's timeout (1 s) before the
	// SIGTERM may be answered after the worker deregistered.
	from := time.Now().Add(-time.Second)
	p.Stop(t, 30*time.Second)
	p.RestartWith(bin)
	testsupport.WaitFor(t, settleTimeout, p.Name+" ready again", func() bool { return talontest.Ready(t, p) })
	talontest.WaitEligible(t, settleTimeout, len(s.workers), s.coords...)
	if isWorker {
		s.down.add(from, time.Now())
	}
}

// roll restarts procs one by one with bin, holding each mixed state
// between two restarts for hold(), so that a false late mark (which comes
// unhealthy-after into a window) has time to show.
func (s *suite) roll(procs []*talontest.Proc, bin string) func() {
	return func() {
		for i, p := range procs {
			s.restart(p, bin)
			if i < len(procs)-1 {
				time.Sleep(hold())
			}
		}
	}
}

// hold is how long each mixed state of a rolling restart lasts: more than
// unhealthy-after, and a third of the window in the full suite.
func hold() time.Duration {
	return max(upgradeTiming.Unhealthy+time.Second, window()/3)
}

// clusterView is what one coordinator's /api/v1/cluster says of the
// builds that run.
func (s *suite) clusterView(p *talontest.Proc) *apiv1.Cluster {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cl, err := p.API(s.t).Cluster(ctx)
	if err != nil {
		s.t.Fatalf("cluster of %s: %v", p.Name, err)
	}
	return cl
}

// renewals sums the heartbeats the HEAD coordinators accepted by renewing
// a lease alone.
func (s *suite) renewals() float64 {
	n := 0.0
	for _, p := range s.coords {
		if p.Bin() == "" && !p.Exited() {
			n += talontest.Scrape("http://" + p.Admin + "/metrics")["talon_coordinator_heartbeat_renewals_total"]
		}
	}
	return n
}

// expectLevel checks what every HEAD coordinator says of the cluster's
// feature level and its builds.
func (s *suite) expectLevel(level int64, mixed bool) {
	s.t.Helper()
	for _, p := range s.coords {
		if p.Bin() != "" {
			continue
		}
		testsupport.WaitFor(s.t, 30*time.Second, fmt.Sprintf("%s: cluster feature level %d, mixed %v", p.Name, level, mixed), func() bool {
			u := s.clusterView(p).Upgrade
			return u != nil && u.FeatureLevel == level && u.Mixed == mixed && u.ServerLevel == cluster.BuildLevel
		})
	}
}

func (s *suite) table() {
	s.t.Logf("upgrade table (%s):\n| backend | phase | lookups | failed by code | max latency | late marks of live workers | answers short of live workers | disagreements at a shared revision | unreadable records |\n|---|---|---|---|---|---|---|---|---|\n%s",
		s.backend, strings.Join(s.rows, "\n"))
	if f := os.Getenv("TALON_UPGRADE_TABLE"); f != "" {
		out, err := os.OpenFile(f, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			fmt.Fprintln(out, strings.Join(s.rows, "\n"))
			out.Close()
		}
	}
}

// outages are the spans in which a worker was down for a restart.
type outages struct {
	mu    sync.Mutex
	spans [][2]time.Time // guarded by mu
}

func (o *outages) add(from, to time.Time) {
	o.mu.Lock()
	o.spans = append(o.spans, [2]time.Time{from, to})
	o.mu.Unlock()
}

// alive returns, for n workers, how many were alive at a time.
func (o *outages) alive(n int) func(time.Time) int {
	o.mu.Lock()
	spans := append([][2]time.Time(nil), o.spans...)
	o.mu.Unlock()
	sort.Slice(spans, func(i, j int) bool { return spans[i][0].Before(spans[j][0]) })
	return func(at time.Time) int {
		down := 0
		for _, sp := range spans {
			if !at.Before(sp[0]) && !at.After(sp[1]) {
				down++
			}
		}
		return n - down
	}
}

func repeat(bin string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = bin
	}
	return out
}
