package faults

// The fault-schedule suite (issue 25): three coordinator processes with
// mutual TLS on a 3-member etcd or a real kube-apiserver, four workers
// heartbeating through rotated coordinator lists, and client callers
// (the failover client, as `talon get` and the bench use it) as load.
// Each schedule is one fault; each prints one row of the table in
// docs/performance.md: operations attempted, failed by code, max latency, heartbeats
// lost, live workers dropped from placement, wrong answers, worker
// records lost. `make test` runs the short schedule; `make faults`
// (TALON_FAULTS=full) the full one: ten rolling restarts per backend, a
// 20 s SIGSTOP and a 15 s quorum loss.

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/protocol"
	"github.com/talonhq/talon/internal/testenv"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// scheduleTiming is the suite's heartbeat timing: heartbeats every second
// (the measurements), 1 s requests, unhealthy after 3 s (2 x 1 s
// + 1 s), leases of 6 s.
var scheduleTiming = talontest.LiveTiming{Heartbeat: time.Second, Request: time.Second, Unhealthy: 3 * time.Second, LeaseTTL: 6 * time.Second}

// fullSchedule reports whether TALON_FAULTS=full asks for the full schedule.
func fullSchedule() bool { return os.Getenv("TALON_FAULTS") == "full" }

// faultSuite is one backend's cluster under a schedule of faults.
type faultSuite struct {
	t       *testing.T
	backend string
	c       *talontest.LiveCluster
	coords  []*talontest.Proc
	workers []*talontest.Proc
	pl      *talontest.Poller
	calls   *talontest.Callers
	rows    []string
}

// newFaultSuite starts three coordinators and four workers on c and the
// load, and waits for a steady cluster.
func newFaultSuite(t *testing.T, backend string, c *talontest.LiveCluster) *faultSuite {
	t.Helper()
	c.CoordExtra = []string{"--drain-delay", talontest.DrainDelay.String(), "--shutdown-timeout", "5s"}
	s := &faultSuite{t: t, backend: backend, c: c}
	for i := 1; i <= 3; i++ {
		s.coords = append(s.coords, c.Coordinator(fmt.Sprintf("coord-%d", i)))
	}
	testsupport.WaitFor(t, 90*time.Second, "three coordinators ready", func() bool {
		return talontest.Ready(t, s.coords[0]) && talontest.Ready(t, s.coords[1]) && talontest.Ready(t, s.coords[2])
	})
	ctls := s.ctls()
	for i := 1; i <= talontest.ScheduleWorkers; i++ {
		s.workers = append(s.workers, c.Worker(fmt.Sprintf("worker-%d", i), talontest.Rotate(ctls, i), talontest.LiveTiming{}))
	}
	talontest.WaitEligible(t, 90*time.Second, talontest.ScheduleWorkers, s.coords...)
	targets := make([]talontest.Target, len(s.coords))
	for i, p := range s.coords {
		targets[i] = talontest.TargetOf(p)
	}
	s.pl = talontest.StartPoller(t, c.Client, targets...)
	s.calls = talontest.StartCallers(t, c, ctls)
	time.Sleep(time.Second)
	return s
}

func (s *faultSuite) ctls() []string {
	out := make([]string, len(s.coords))
	for i, p := range s.coords {
		out[i] = p.Addr
	}
	return out
}

// run applies fault, waits until every coordinator is ready with every
// worker eligible, and returns the figures of the whole window. fault
// returns a description and, for an outage, when it began.
func (s *faultSuite) run(name string, fault func() (detail string, outage time.Time)) talontest.Row {
	t := s.t
	t.Helper()
	keysBefore := s.recordIDs()
	hbBefore := s.heartbeatFailures()
	from := time.Now()
	detail, outage := fault()
	if _, ok := settle(t, 120*time.Second, talontest.ScheduleWorkers, s.coords...); !ok {
		t.Errorf("%s %s: the cluster did not settle (every coordinator with %d eligible workers, one version) within 120s", s.backend, name, talontest.ScheduleWorkers)
	}
	time.Sleep(time.Second)
	to := time.Now()
	r := s.calls.Figures(from, to)
	r.LostHeartbeats = s.heartbeatFailures() - hbBefore
	r.RecordsLost = talontest.Changed(keysBefore, s.recordIDs(), func(k string) bool { return !strings.HasPrefix(k, "coordinator/") })
	samples := s.pl.Since(from)
	r.Dropped = talontest.Summarize(samples, talontest.Constant(talontest.ScheduleWorkers)).Dropped
	if !outage.IsZero() {
		var lat []time.Duration
		for _, sm := range samples {
			if sm.Kind == talontest.KindLookup && sm.Code == protocol.CodeNotReady.String() && sm.At.After(outage.Add(s.c.Timing.Request)) && sm.At.Before(outage.Add(s.c.Timing.Request*10)) {
				lat = append(lat, sm.Latency)
			}
		}
		if r.NotReadyN = len(lat); r.NotReadyN > 0 {
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			r.NotReadyMax = lat[len(lat)-1]
			detail += fmt.Sprintf("; not_ready answered in p50 %v, p99 %v, max %v (%d direct lookups during the outage)", lat[len(lat)/2].Round(100*time.Microsecond),
				lat[len(lat)*99/100].Round(100*time.Microsecond), r.NotReadyMax.Round(100*time.Microsecond), r.NotReadyN)
		}
	}
	line := fmt.Sprintf("| %s | %s | %s | %d | %s | %v | %d | %d | %d | %d |", s.backend, name, detail, r.Attempted, r.FailedString(),
		r.MaxLatency.Round(time.Millisecond), r.LostHeartbeats, r.Dropped, r.Wrong, len(r.RecordsLost))
	t.Logf("fault row: %s", line)
	s.rows = append(s.rows, line)
	return r
}

// recordIDs identifies every stored record by incarnation of its slot: a
// record deleted (expired) and created again changes its ID.
func (s *faultSuite) recordIDs() map[string]string {
	if s.c.EtcdClient != nil {
		out := map[string]string{}
		for k, rev := range s.c.WorkerKeys(s.t) {
			out["worker/"+k] = strconv.FormatInt(rev, 10)
		}
		return out
	}
	return s.c.LeaseUIDs(s.t)
}

var heartbeatLine = regexp.MustCompile(`^talon_worker_heartbeats_total\{operation="heartbeat",outcome="([a-z_]+)"\} ([0-9.e+]+)$`)

// heartbeatFailures sums, over the workers, the heartbeats that no
// coordinator accepted (any outcome but accepted and duplicate).
func (s *faultSuite) heartbeatFailures() int {
	total := 0
	for _, w := range s.workers {
		resp, err := http.Get("http://" + w.Admin + "/metrics")
		if err != nil {
			s.t.Fatalf("scrape %s: %v", w.Name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, line := range strings.Split(string(body), "\n") {
			m := heartbeatLine.FindStringSubmatch(line)
			if m == nil || m[1] == "accepted" || m[1] == "duplicate" {
				continue
			}
			v, _ := strconv.ParseFloat(m[2], 64)
			total += int(v)
		}
	}
	return total
}

// rollingRestart sends each coordinator SIGTERM in turn, starts it again
// and waits until it is ready with every worker before the next.
func (s *faultSuite) rollingRestart() (string, time.Time) {
	for _, p := range s.coords {
		p.Signal(syscall.SIGTERM)
		select {
		case <-p.Done:
		case <-time.After(30 * time.Second):
			s.t.Fatalf("%s did not exit within 30s of SIGTERM", p.Name)
		}
		p.Restart()
		talontest.WaitEligible(s.t, 90*time.Second, talontest.ScheduleWorkers, p)
	}
	return "SIGTERM, restart, ready: each of 3 in turn", time.Time{}
}

// kill SIGKILLs coordinator i, leaves it dead for d and starts it again.
func (s *faultSuite) kill(i int, d time.Duration) (string, time.Time) {
	p := s.coords[i]
	p.Kill()
	time.Sleep(d)
	p.Restart()
	return fmt.Sprintf("SIGKILL %s, restart after %v", p.Name, d), time.Time{}
}

// stop SIGSTOPs coordinator i for d.
func (s *faultSuite) stop(i int, d time.Duration) (string, time.Time) {
	p := s.coords[i]
	p.Signal(syscall.SIGSTOP)
	time.Sleep(d)
	p.Signal(syscall.SIGCONT)
	return fmt.Sprintf("SIGSTOP %s for %v", p.Name, d), time.Time{}
}

// report writes the suite's rows to TALON_FAULT_TABLE when set.
func (s *faultSuite) report() {
	path := os.Getenv("TALON_FAULT_TABLE")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		s.t.Errorf("fault table: %v", err)
		return
	}
	defer f.Close()
	for _, l := range s.rows {
		fmt.Fprintln(f, l)
	}
}

// assertNoCost fails the test unless r cost callers and workers nothing:
// the rolling restart, SIGKILL and SIGSTOP of one coordinator.
func (s *faultSuite) assertNoCost(name string, r talontest.Row) {
	s.t.Helper()
	if r.FailedTotal() != 0 || r.LostHeartbeats != 0 || r.Dropped != 0 || r.Wrong != 0 || len(r.RecordsLost) != 0 {
		s.t.Errorf("%s %s: failed %s, lost heartbeats %d, dropped %d, wrong %d, records lost %v; want all 0",
			s.backend, name, r.FailedString(), r.LostHeartbeats, r.Dropped, r.Wrong, r.RecordsLost)
	}
}

// coordinatorSchedules runs the schedules every backend shares.
func (s *faultSuite) coordinatorSchedules() {
	runs, stopFor := 1, 8*time.Second
	if fullSchedule() {
		runs, stopFor = 10, 20*time.Second
	}
	for i := 1; i <= runs; i++ {
		name := fmt.Sprintf("rolling restart %d/%d", i, runs)
		s.assertNoCost(name, s.run(name, s.rollingRestart))
	}
	s.assertNoCost("SIGKILL", s.run("SIGKILL of a coordinator", func() (string, time.Time) { return s.kill(1, 2*time.Second) }))
	r := s.run("SIGSTOP of a coordinator", func() (string, time.Time) { return s.stop(2, stopFor) })
	s.assertNoCost("SIGSTOP", r)
	// A caller meets the stopped coordinator for one attempt deadline at
	// most, then the next address serves it.
	if limit := talontest.CallDeadline/3 + s.c.Timing.Request; r.MaxLatency > limit {
		s.t.Errorf("%s SIGSTOP: a caller waited %v, more than one attempt deadline (%v) plus a request timeout", s.backend, r.MaxLatency, talontest.CallDeadline/3)
	}
}

func TestFaultScheduleEtcd(t *testing.T) {
	talontest.SkipShort(t)
	c := talontest.NewEtcdCluster(t, scheduleTiming, 3)
	s := newFaultSuite(t, "etcd", c)
	defer s.report()
	s.coordinatorSchedules()

	r := s.run("SIGKILL of the etcd leader", func() (string, time.Time) {
		ch := c.Etcd.KillLeader(t)
		time.Sleep(2 * c.Timing.Heartbeat)
		c.Etcd.Restart(ch.Old)
		c.Etcd.WaitHealthy(t, time.Minute)
		return fmt.Sprintf("m%d killed, m%d elected in %v, m%d restarted", ch.Old, ch.New, ch.Election.Round(time.Millisecond), ch.Old), time.Time{}
	})
	if r.Dropped != 0 || r.Wrong != 0 || len(r.RecordsLost) != 0 {
		t.Errorf("etcd leader kill: dropped %d, wrong %d, records lost %v; want 0, 0, none", r.Dropped, r.Wrong, r.RecordsLost)
	}

	quorum := 5 * time.Second
	if fullSchedule() {
		quorum = 15 * time.Second
	}
	r = s.run(fmt.Sprintf("quorum loss %v", quorum), func() (string, time.Time) {
		began := time.Now()
		out := c.Etcd.LoseQuorum(t, quorum, testenv.FaultPause)
		return fmt.Sprintf("paused m%v, healthy %v after resume", out.Members, out.Recovery.Round(time.Millisecond)), began
	})
	// Lookups fail closed during the outage (not_ready): reported, not
	// asserted. No answer may be wrong, and not_ready comes at once.
	if r.Wrong != 0 || r.Dropped != 0 {
		t.Errorf("etcd quorum loss: wrong %d, dropped %d; want 0", r.Wrong, r.Dropped)
	}
	if r.NotReadyN == 0 || r.NotReadyMax > c.Timing.Request/2 {
		t.Errorf("etcd quorum loss: %d not_ready answers during the outage, the slowest in %v; want some, none waiting for a read (< %v)", r.NotReadyN, r.NotReadyMax, c.Timing.Request/2)
	}
}

func TestFaultScheduleKube(t *testing.T) {
	talontest.SkipShort(t)
	c := talontest.NewKubeCluster(t, scheduleTiming, 3)
	s := newFaultSuite(t, "kubernetes", c)
	defer s.report()
	s.coordinatorSchedules()

	r := s.run("kube-apiserver restart", func() (string, time.Time) {
		began := time.Now()
		c.Kube.Kill()
		c.Kube.Start()
		return fmt.Sprintf("SIGKILL, started again: down %v", time.Since(began).Round(time.Millisecond)), began
	})
	if r.Wrong != 0 || r.Dropped != 0 || len(r.RecordsLost) != 0 {
		t.Errorf("kube-apiserver restart: wrong %d, dropped %d, Leases lost %v; want 0, 0, none", r.Wrong, r.Dropped, r.RecordsLost)
	}
}
