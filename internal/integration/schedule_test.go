package integration

// The fault-schedule suite (issue 25): three coordinator processes with
// mutual TLS on a 3-member etcd or a real kube-apiserver, four workers
// heartbeating through rotated coordinator lists, and client callers
// (the failover client, as `talon get` and the bench use it) as load.
// Each schedule is one fault; each prints one row of the table in the
// README: operations attempted, failed by code, max latency, heartbeats
// lost, live workers dropped from placement, wrong answers, worker
// records lost. `make test` runs the short schedule; `make faults`
// (TALON_FAULTS=full) the full one: ten rolling restarts per backend, a
// 20 s SIGSTOP and a 15 s quorum loss.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/placement"
	"github.com/talonhq/talon/internal/protocol"
	"github.com/talonhq/talon/internal/testenv"
	"github.com/talonhq/talon/internal/testsupport"
)

// scheduleTiming is the suite's heartbeat timing: heartbeats every second
// (the measurements), 1 s requests, unhealthy after 3 s (2 x 1 s
// + 1 s), leases of 6 s.
var scheduleTiming = liveTiming{Heartbeat: time.Second, Request: time.Second, Unhealthy: 3 * time.Second, LeaseTTL: 6 * time.Second}

const (
	scheduleWorkers = 4
	scheduleCallers = 4
	scheduleKeys    = 64
	// callDeadline is each client operation's deadline; its attempt
	// deadline is a third of it (client.Options.AttemptTimeout unset).
	callDeadline = 2 * time.Second
	callPace     = 20 * time.Millisecond
	// clientLife is how many calls a caller makes with one client.
	clientLife = 25
	// drainDelay is the coordinators' drain delay in the suite: clients
	// are served through it, then told to go.
	drainDelay = 500 * time.Millisecond
)

// fullSchedule reports whether TALON_FAULTS=full asks for the full schedule.
func fullSchedule() bool { return os.Getenv("TALON_FAULTS") == "full" }

// faultSuite is one backend's cluster under a schedule of faults.
type faultSuite struct {
	t       *testing.T
	backend string
	c       *liveCluster
	coords  []*proc
	workers []*proc
	pl      *poller
	calls   *callers
	rows    []string
}

// newFaultSuite starts three coordinators and four workers on c and the
// load, and waits for a steady cluster.
func newFaultSuite(t *testing.T, backend string, c *liveCluster) *faultSuite {
	t.Helper()
	c.coordExtra = []string{"--drain-delay", drainDelay.String(), "--shutdown-timeout", "5s"}
	s := &faultSuite{t: t, backend: backend, c: c}
	for i := 1; i <= 3; i++ {
		s.coords = append(s.coords, c.coordinator(fmt.Sprintf("coord-%d", i)))
	}
	testsupport.WaitFor(t, 90*time.Second, "three coordinators ready", func() bool {
		return ready(t, s.coords[0]) && ready(t, s.coords[1]) && ready(t, s.coords[2])
	})
	ctls := s.ctls()
	for i := 1; i <= scheduleWorkers; i++ {
		s.workers = append(s.workers, c.worker(fmt.Sprintf("worker-%d", i), rotate(ctls, i), liveTiming{}))
	}
	waitEligible(t, 90*time.Second, scheduleWorkers, s.coords...)
	targets := make([]target, len(s.coords))
	for i, p := range s.coords {
		targets[i] = targetOf(p)
	}
	s.pl = startPoller(t, c.client, targets...)
	s.calls = startCallers(t, c, ctls)
	time.Sleep(time.Second)
	return s
}

func (s *faultSuite) ctls() []string {
	out := make([]string, len(s.coords))
	for i, p := range s.coords {
		out[i] = p.addr
	}
	return out
}

func rotate(list []string, by int) []string {
	out := make([]string, len(list))
	for i := range list {
		out[i] = list[(i+by)%len(list)]
	}
	return out
}

// row is one schedule's figures.
type row struct {
	Attempted      int
	Failed         map[string]int
	MaxLatency     time.Duration
	LostHeartbeats int
	Dropped        int // 200 cluster answers naming fewer than the live workers
	Wrong          int // answers with another owner or placement version than the steady one
	RecordsLost    []string
	// NotReadyMax is the longest a not_ready answer took, among direct
	// lookups sent once the outage was a request timeout old.
	NotReadyMax time.Duration
	NotReadyN   int
}

func (r row) failedTotal() int {
	n := 0
	for _, v := range r.Failed {
		n += v
	}
	return n
}

func (r row) failedString() string {
	if len(r.Failed) == 0 {
		return "0"
	}
	var parts []string
	for k, v := range r.Failed {
		parts = append(parts, fmt.Sprintf("%s %d", k, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// run applies fault, waits until every coordinator is ready with every
// worker eligible, and returns the figures of the whole window. fault
// returns a description and, for an outage, when it began.
func (s *faultSuite) run(name string, fault func() (detail string, outage time.Time)) row {
	t := s.t
	t.Helper()
	keysBefore := s.recordIDs()
	hbBefore := s.heartbeatFailures()
	from := time.Now()
	detail, outage := fault()
	if _, ok := settle(t, 120*time.Second, scheduleWorkers, s.coords...); !ok {
		t.Errorf("%s %s: the cluster did not settle (every coordinator with %d eligible workers, one version) within 120s", s.backend, name, scheduleWorkers)
	}
	time.Sleep(time.Second)
	to := time.Now()
	r := s.calls.figures(from, to)
	r.LostHeartbeats = s.heartbeatFailures() - hbBefore
	r.RecordsLost = changed(keysBefore, s.recordIDs(), func(k string) bool { return !strings.HasPrefix(k, "coordinator/") })
	samples := s.pl.since(from)
	r.Dropped = summarize(samples, constant(scheduleWorkers)).Dropped
	if !outage.IsZero() {
		var lat []time.Duration
		for _, sm := range samples {
			if sm.Kind == kindLookup && sm.Code == protocol.CodeNotReady.String() && sm.At.After(outage.Add(s.c.timing.Request)) && sm.At.Before(outage.Add(s.c.timing.Request*10)) {
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
	line := fmt.Sprintf("| %s | %s | %s | %d | %s | %v | %d | %d | %d | %d |", s.backend, name, detail, r.Attempted, r.failedString(),
		r.MaxLatency.Round(time.Millisecond), r.LostHeartbeats, r.Dropped, r.Wrong, len(r.RecordsLost))
	t.Logf("fault row: %s", line)
	s.rows = append(s.rows, line)
	return r
}

// recordIDs identifies every stored record by incarnation of its slot: a
// record deleted (expired) and created again changes its ID.
func (s *faultSuite) recordIDs() map[string]string {
	if s.c.ec != nil {
		out := map[string]string{}
		for k, rev := range s.c.workerKeys(s.t) {
			out["worker/"+k] = strconv.FormatInt(rev, 10)
		}
		return out
	}
	return s.c.leaseUIDs(s.t)
}

var heartbeatLine = regexp.MustCompile(`^talon_worker_heartbeats_total\{operation="heartbeat",outcome="([a-z_]+)"\} ([0-9.e+]+)$`)

// heartbeatFailures sums, over the workers, the heartbeats that no
// coordinator accepted (any outcome but accepted and duplicate).
func (s *faultSuite) heartbeatFailures() int {
	total := 0
	for _, w := range s.workers {
		resp, err := http.Get("http://" + w.admin + "/metrics")
		if err != nil {
			s.t.Fatalf("scrape %s: %v", w.name, err)
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

// callers are the client load: scheduleCallers goroutines, each with its
// own failover client over every coordinator (rotated), looking up keys in
// turn every callPace, each lookup with callDeadline.
type callers struct {
	stopCh chan struct{}
	wg     sync.WaitGroup

	want    map[string]string // key -> steady owner
	version placement.Version

	mu   sync.Mutex
	recs []call // guarded by mu
}

type call struct {
	At      time.Time
	Latency time.Duration
	Code    string // "" for success
	Wrong   bool
}

func startCallers(t *testing.T, c *liveCluster, ctls []string) *callers {
	t.Helper()
	cs := &callers{stopCh: make(chan struct{}), want: map[string]string{}}
	ref, err := client.New(client.Options{Coordinators: ctls, TLS: c.client})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	for i := range scheduleKeys {
		key := fmt.Sprintf("fault/%d", i)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		p, err := ref.Lookup(ctx, key, 1)
		cancel()
		if err != nil {
			t.Fatalf("steady lookup of %s: %v", key, err)
		}
		if i > 0 && p.Version != cs.version {
			t.Fatalf("steady lookups saw versions %s and %s", cs.version, p.Version)
		}
		cs.want[key], cs.version = p.Owners[0].NodeID, p.Version
	}
	for n := range scheduleCallers {
		cs.wg.Add(1)
		go func() {
			defer cs.wg.Done()
			var cl *client.Client
			defer func() { cl.Close() }()
			for i := n; ; i++ {
				if i%clientLife == n {
					// A new client, its list rotated by one more: new
					// clients arrive all the time, and each starts at
					// the first address of its list, so every
					// coordinator is some new client's first choice.
					if cl != nil {
						cl.Close()
					}
					var err error
					if cl, err = client.New(client.Options{Coordinators: rotate(ctls, n+i/clientLife), TLS: c.client}); err != nil {
						panic(err)
					}
				}
				select {
				case <-cs.stopCh:
					return
				case <-time.After(callPace):
				}
				cs.add(cs.one(cl, fmt.Sprintf("fault/%d", i%scheduleKeys)))
			}
		}()
	}
	t.Cleanup(cs.stop)
	return cs
}

func (cs *callers) one(cl *client.Client, key string) call {
	ctx, cancel := context.WithTimeout(context.Background(), callDeadline)
	defer cancel()
	began := time.Now()
	p, err := cl.Lookup(ctx, key, 1)
	r := call{At: began, Latency: time.Since(began)}
	var pe *protocol.Error
	switch {
	case err == nil:
		r.Wrong = p.Version != cs.version || len(p.Owners) == 0 || p.Owners[0].NodeID != cs.want[key]
	case errors.As(err, &pe):
		r.Code = pe.Code.String()
	case errors.Is(err, client.ErrNoCoordinator):
		r.Code = "no_coordinator"
	case errors.Is(err, context.DeadlineExceeded):
		r.Code = "deadline"
	default:
		r.Code = "other"
	}
	return r
}

func (cs *callers) add(r call) {
	cs.mu.Lock()
	cs.recs = append(cs.recs, r)
	cs.mu.Unlock()
}

func (cs *callers) stop() {
	select {
	case <-cs.stopCh:
	default:
		close(cs.stopCh)
	}
	cs.wg.Wait()
}

// figures summarises the calls sent in [from, to).
func (cs *callers) figures(from, to time.Time) row {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	r := row{Failed: map[string]int{}}
	for _, c := range cs.recs {
		if c.At.Before(from) || !c.At.Before(to) {
			continue
		}
		r.Attempted++
		r.MaxLatency = max(r.MaxLatency, c.Latency)
		if c.Code != "" {
			r.Failed[c.Code]++
		}
		if c.Wrong {
			r.Wrong++
		}
	}
	return r
}

// rollingRestart sends each coordinator SIGTERM in turn, starts it again
// and waits until it is ready with every worker before the next.
func (s *faultSuite) rollingRestart() (string, time.Time) {
	for _, p := range s.coords {
		p.signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			s.t.Fatalf("%s did not exit within 30s of SIGTERM", p.name)
		}
		p.restart()
		waitEligible(s.t, 90*time.Second, scheduleWorkers, p)
	}
	return "SIGTERM, restart, ready: each of 3 in turn", time.Time{}
}

// kill SIGKILLs coordinator i, leaves it dead for d and starts it again.
func (s *faultSuite) kill(i int, d time.Duration) (string, time.Time) {
	p := s.coords[i]
	p.kill()
	time.Sleep(d)
	p.restart()
	return fmt.Sprintf("SIGKILL %s, restart after %v", p.name, d), time.Time{}
}

// stop SIGSTOPs coordinator i for d.
func (s *faultSuite) stop(i int, d time.Duration) (string, time.Time) {
	p := s.coords[i]
	p.signal(syscall.SIGSTOP)
	time.Sleep(d)
	p.signal(syscall.SIGCONT)
	return fmt.Sprintf("SIGSTOP %s for %v", p.name, d), time.Time{}
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
func (s *faultSuite) assertNoCost(name string, r row) {
	s.t.Helper()
	if r.failedTotal() != 0 || r.LostHeartbeats != 0 || r.Dropped != 0 || r.Wrong != 0 || len(r.RecordsLost) != 0 {
		s.t.Errorf("%s %s: failed %s, lost heartbeats %d, dropped %d, wrong %d, records lost %v; want all 0",
			s.backend, name, r.failedString(), r.LostHeartbeats, r.Dropped, r.Wrong, r.RecordsLost)
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
	if limit := callDeadline/3 + s.c.timing.Request; r.MaxLatency > limit {
		s.t.Errorf("%s SIGSTOP: a caller waited %v, more than one attempt deadline (%v) plus a request timeout", s.backend, r.MaxLatency, callDeadline/3)
	}
}

func TestFaultScheduleEtcd(t *testing.T) {
	skipShort(t)
	c := newEtcdCluster(t, scheduleTiming, 3)
	s := newFaultSuite(t, "etcd", c)
	defer s.report()
	s.coordinatorSchedules()

	r := s.run("SIGKILL of the etcd leader", func() (string, time.Time) {
		ch := c.etcd.KillLeader(t)
		time.Sleep(2 * c.timing.Heartbeat)
		c.etcd.Restart(ch.Old)
		c.etcd.WaitHealthy(t, time.Minute)
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
		out := c.etcd.LoseQuorum(t, quorum, testenv.FaultPause)
		return fmt.Sprintf("paused m%v, healthy %v after resume", out.Members, out.Recovery.Round(time.Millisecond)), began
	})
	// Lookups fail closed during the outage (not_ready): reported, not
	// asserted. No answer may be wrong, and not_ready comes at once.
	if r.Wrong != 0 || r.Dropped != 0 {
		t.Errorf("etcd quorum loss: wrong %d, dropped %d; want 0", r.Wrong, r.Dropped)
	}
	if r.NotReadyN == 0 || r.NotReadyMax > c.timing.Request/2 {
		t.Errorf("etcd quorum loss: %d not_ready answers during the outage, the slowest in %v; want some, none waiting for a read (< %v)", r.NotReadyN, r.NotReadyMax, c.timing.Request/2)
	}
}

func TestFaultScheduleKube(t *testing.T) {
	skipShort(t)
	c := newKubeCluster(t, scheduleTiming, 3)
	s := newFaultSuite(t, "kubernetes", c)
	defer s.report()
	s.coordinatorSchedules()

	r := s.run("kube-apiserver restart", func() (string, time.Time) {
		began := time.Now()
		c.kube.Kill()
		c.kube.Start()
		return fmt.Sprintf("SIGKILL, started again: down %v", time.Since(began).Round(time.Millisecond)), began
	})
	if r.Wrong != 0 || r.Dropped != 0 || len(r.RecordsLost) != 0 {
		t.Errorf("kube-apiserver restart: wrong %d, dropped %d, Leases lost %v; want 0, 0, none", r.Wrong, r.Dropped, r.RecordsLost)
	}
}
