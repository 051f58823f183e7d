package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/talonhq/talon/internal/backoff"
	"github.com/talonhq/talon/internal/bench"
	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/config"
)

// fleetRun is one row's processes: the coordinators and the fleets.
type fleetRun struct {
	o        FleetOptions
	workers  int
	env      *runEnv
	progress func(format string, a ...any)

	coords []*child
	ctl    []string // the coordinators' control addresses
	fleets []*fleetChild
}

// fleetChild is a fleet process (its stdin: a line releases it) with its
// stdout (its report).
type fleetChild struct {
	*child
	out        *syncBuffer
	registered chan struct{} // closed at its FleetRegistered line
}

// syncBuffer is a bytes.Buffer a child's output copier writes while the
// harness may read it.
type syncBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

// fleetRow measures one fleet size: coordinator processes on an empty
// cluster of the run's own, the fleets registering, then heartbeating for
// o.Duration with lookups beside them.
func fleetRow(ctx context.Context, o FleetOptions, workers int, progress func(format string, a ...any), log *slog.Logger) (row FleetRow, err error) {
	env := newRunEnv(o.Conn, log)
	env.cleanupTimeout = 5 * time.Minute
	defer func() {
		// A cleanup that fails does not undo what was measured: the row
		// keeps its figures and says what is left behind.
		var cerr error
		env.cleanup(ctx, progress, &cerr)
		if cerr != nil {
			row.Cleanup = cerr.Error()
			progress("fleet %s %d: %v", o.Backend, workers, cerr)
		}
	}()
	r := &fleetRun{o: o, workers: workers, env: env, progress: progress}
	defer func() { err = errors.Join(err, r.stop()) }()
	row = FleetRow{Workers: workers}
	if err := r.startCoordinators(ctx, &row); err != nil {
		return row, err
	}
	// The empty cluster's resident set, once the coordinators have
	// settled.
	if err := backoff.Sleep(ctx, 2*time.Second); err != nil {
		return row, err
	}
	empty, err := usages(r.coordPIDs()...)
	if err != nil {
		return row, err
	}
	if err := r.startFleets(); err != nil {
		return row, err
	}
	if row.RegisterSeconds, err = r.waitRegistered(ctx); err != nil {
		return row, err
	}
	if err := r.baseline(ctx, &row); err != nil {
		return row, err
	}
	return r.measure(ctx, row, empty)
}

// baselineWindow is how long the registered, silent fleet is watched for
// the CPU time the coordinators and the store spend without heartbeats,
// after a settling pause as long.
const baselineWindow = 3 * time.Second

// baseline measures the cores the coordinators and the store use with
// every worker registered and none heartbeating yet: what their CPU time
// in the row holds beside the heartbeats' cost.
func (r *fleetRun) baseline(ctx context.Context, row *FleetRow) error {
	if err := backoff.Sleep(ctx, baselineWindow); err != nil {
		return err
	}
	pids := append(r.coordPIDs(), r.o.StorePIDs...)
	before, err := usages(pids...)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := backoff.Sleep(ctx, baselineWindow); err != nil {
		return err
	}
	after, err := usages(pids...)
	if err != nil {
		return err
	}
	el := time.Since(start).Seconds()
	nc := len(r.coords)
	for i := range nc {
		row.CoordinatorBaselineCores += (after[i].CPU - before[i].CPU).Seconds() / el
	}
	if len(r.o.StorePIDs) > 0 {
		row.StoreBaselineCores = ptr(cpuBetween(before[nc:], after[nc:]).Seconds() / el)
	}
	return nil
}

// measure releases the registered fleets and reads the processes' usage
// over the first half of the row's duration, with heartbeats alone (the
// CPU time per heartbeat), then sends lookups beside the heartbeats for
// the second half (their latency under the fleet).
func (r *fleetRun) measure(ctx context.Context, row FleetRow, empty []ProcUsage) (FleetRow, error) {
	pids := append(r.coordPIDs(), r.o.StorePIDs...) // the fleets measure their own CPU time: they exit as their duration ends
	before, err := usages(pids...)
	if err != nil {
		return row, err
	}
	var end func()
	if r.o.Window != nil {
		end = r.o.Window(r.workers, r.coordPIDs())
	}
	for _, f := range r.fleets {
		if _, err := io.WriteString(f.stdin, "go\n"); err != nil {
			return row, fmt.Errorf("release %s: %w", f.name, err)
		}
	}
	r.progress("fleet %s %d: heartbeating every %s for %s, with %d lookups/s in the second half", r.o.Backend, r.workers, r.o.Interval, r.o.Duration, r.o.LookupRate)
	start := time.Now()
	if err := backoff.Sleep(ctx, r.o.Duration/2); err != nil {
		return row, err
	}
	half := time.Since(start)
	after, err := usages(pids...)
	if err != nil {
		return row, err
	}
	if end != nil {
		end()
	}
	lk, err := r.lookups(ctx, r.o.Duration-half)
	if err != nil {
		return row, err
	}
	last, err := usages(pids...)
	if err != nil {
		return row, err
	}
	reps, err := r.waitFleets(ctx)
	if err != nil {
		return row, err
	}
	row.Lookups, row.Fleets = lk.Summary(), len(reps)
	row.Heartbeats, row.Sent, row.Missed = mergeFleets(reps)
	nc := len(r.coords)
	rowFigures(&row, r.o.Interval, half, empty, before[:nc], after[:nc], last[:nc])
	var fleetCPU float64
	for _, rep := range reps {
		fleetCPU += rep.CPUSeconds
	}
	row.FleetCPUPer1000 = per1000(time.Duration(fleetCPU*float64(time.Second)), row.Heartbeats.Ops)
	if len(r.o.StorePIDs) > 0 {
		row.StoreCPUPer1000 = ptr(per1000(cpuBetween(before[nc:], after[nc:]), row.heartbeatsIn(half)))
	}
	return row, nil
}

// mergeFleets pools the fleets' reports: counts add up, the latency
// percentiles are the largest of the fleets'.
func mergeFleets(reps []bench.FleetReport) (s bench.Summary, sent, missed int) {
	s.Failures = map[string]int{}
	for _, r := range reps {
		h := r.Heartbeats
		s.Ops += h.Ops
		s.PerSecond += h.PerSecond
		s.ElapsedS = max(s.ElapsedS, h.ElapsedS)
		s.P50Ms, s.P99Ms, s.MaxMs = max(s.P50Ms, h.P50Ms), max(s.P99Ms, h.P99Ms), max(s.MaxMs, h.MaxMs)
		for k, v := range h.Failures {
			s.Failures[k] += v
		}
		s.BackedOff += h.BackedOff
		sent += r.Sent
		missed += r.Missed
	}
	return s, sent, missed
}

// coordinatorArgs returns the command line of coordinator i of a fleet
// row: production's settings but for what a benchmark needs (an
// insecure control plane; records and connections for the fleet, twice
// as many connections as workers because a listener takes at most half
// its connections from one address and every simulated worker dials from
// the same loopback address; lease and lateness long enough for the
// registrations, during which the registered workers are silent, and so
// is the connections' idle timeout; no drain delay; no compaction of the
// operator's etcd).
func coordinatorArgs(o FleetOptions, env *runEnv, i, workers int, ctl, admin string, kubeQPS, kubeBurst int) []string {
	args := []string{"coordinator", "--cluster-id", ClusterID, "--node-id", fmt.Sprintf("fleet-coordinator-%d", i+1),
		"--listen", ctl, "--admin-listen", admin, "--state-backend", o.Backend, "--insecure-control-plane", "--log-level", "error",
		"--heartbeat-interval", o.Interval.String(), "--status-interval", o.StatusInterval.String(),
		"--unhealthy-after", "30m", "--lease-ttl", "1h", "--request-timeout", o.Conn.RequestTimeout.String(),
		"--max-records", strconv.Itoa(workers + 64), "--max-connections", strconv.Itoa(2 * (workers + 256)),
		"--admin-rate-limit", "0", "--drain-delay", "0s", "--shutdown-timeout", "5s", "--idle-timeout", "1h"}
	switch o.Backend {
	case config.BackendEtcd:
		e := o.Conn.Etcd
		args = append(args, "--etcd-endpoints", strings.Join(e.Endpoints, ","), "--etcd-prefix", env.etcdPrefix+"/talon",
			"--etcd-compaction-interval", "0s", "--etcd-dial-timeout", e.DialTimeout.String())
		for _, f := range [][2]string{{"--etcd-username", e.Username}, {"--etcd-ca-file", e.CAFile}, {"--etcd-cert-file", e.CertFile}, {"--etcd-key-file", e.KeyFile}} {
			if f[1] != "" {
				args = append(args, f[0], f[1])
			}
		}
	case config.BackendKubernetes:
		args = append(args, "--kube-namespace", env.namespace, "--kube-qps", strconv.Itoa(kubeQPS), "--kube-burst", strconv.Itoa(kubeBurst))
		if k := o.Conn.Kube.Kubeconfig; k != "" {
			args = append(args, "--kubeconfig", k)
		}
	}
	return args
}

// startCoordinators connects the run's backend client (which creates the
// Kubernetes namespace, and removes what the row created at the end),
// then starts the coordinator processes and waits until each is ready.
func (r *fleetRun) startCoordinators(ctx context.Context, row *FleetRow) error {
	var env []string
	var qps, burst int
	switch r.o.Backend {
	case config.BackendEtcd:
		if _, err := r.env.etcdClient(ctx); err != nil {
			return err
		}
		if p := r.o.Conn.Etcd.Password; p != "" {
			env = append(env, "TALON_ETCD_PASSWORD="+p.Reveal())
		}
	case config.BackendKubernetes:
		if _, err := r.env.kubeClient(ctx); err != nil {
			return err
		}
		qps, burst = kubeQPS(r.o.Conn.Kube, r.workers, r.o.Coordinators, r.o.Interval)
		row.KubeQPS = qps
	}
	exe := r.o.Talon
	if r.o.CoordinatorExe != "" {
		exe, env = r.o.CoordinatorExe, append(env, r.o.CoordinatorEnv...)
	}
	r.progress("fleet %s %d: starting %d coordinator processes (%s)", r.o.Backend, r.workers, r.o.Coordinators, r.env.where(r.o.Backend))
	for i := range r.o.Coordinators {
		ctl, err := freeAddr(r.o.Host)
		if err != nil {
			return err
		}
		admin, err := freeAddr(r.o.Host)
		if err != nil {
			return err
		}
		c, err := startChild(fmt.Sprintf("coordinator %d", i+1), exe, coordinatorArgs(r.o, r.env, i, r.workers, ctl, admin, qps, burst), env, false, nil, nil)
		if err != nil {
			return err
		}
		r.coords, r.ctl = append(r.coords, c), append(r.ctl, ctl)
		if err := waitHTTP200(ctx, c, "http://"+admin+"/readyz", time.Minute); err != nil {
			return err
		}
	}
	return nil
}

// startFleets starts the fleet processes, at most MaxFleetWorkers
// workers each, every one spreading its workers over all coordinators.
func (r *fleetRun) startFleets() error {
	n := (r.workers + MaxFleetWorkers - 1) / MaxFleetWorkers
	for p := range n {
		size := r.workers / n
		if p < r.workers%n {
			size++
		}
		args := []string{"bench", "fleet", "--coordinators", strings.Join(r.ctl, ","), "--workers", strconv.Itoa(size),
			"--source-address", fleetSource(r.o.Host, p),
			"--interval", r.o.Interval.String(), "--duration", r.o.Duration.String(), "--cluster-id", ClusterID,
			"--node-prefix", fmt.Sprintf("fleet-p%d-", p+1), "--hold", "-o", "json"}
		f := &fleetChild{out: &syncBuffer{}, registered: make(chan struct{})}
		var once sync.Once
		c, err := startChild(fmt.Sprintf("fleet %d", p+1), r.o.Talon, args, nil, true, f.out, func(line string) {
			if strings.HasPrefix(line, FleetRegistered) {
				r.progress("fleet %s %d: fleet %d: %s", r.o.Backend, r.workers, p+1, line)
				once.Do(func() { close(f.registered) })
			}
		})
		if err != nil {
			return err
		}
		f.child = c
		r.fleets = append(r.fleets, f)
	}
	r.progress("fleet %s %d: %d fleet processes registering %d workers", r.o.Backend, r.workers, n, r.workers)
	return nil
}

// fleetSource is the address fleet p dials from: on loopback each fleet
// its own (127.0.1.p+1), as a real fleet's workers come from many
// addresses and a coordinator takes at most half its connections (less,
// when RLIMIT_NOFILE lowers its max-connections) from one; elsewhere the
// system's choice ("").
func fleetSource(host string, p int) string {
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() || ip.To4() == nil {
		return ""
	}
	return fmt.Sprintf("127.0.1.%d", p%250+1)
}

// waitRegistered waits until every fleet has registered its workers and
// returns how long that took; a fleet that exits first fails the row.
func (r *fleetRun) waitRegistered(ctx context.Context) (float64, error) {
	start := time.Now()
	timeout := time.After(15 * time.Minute)
	for _, f := range r.fleets {
		select {
		case <-f.registered:
		case <-f.done:
			return 0, f.exitError()
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-timeout:
			return 0, fmt.Errorf("%s not registered after 15 minutes", f.name)
		}
	}
	return time.Since(start).Seconds(), nil
}

// lookups sends o.LookupRate placement lookups a second, open loop, for
// d, spread over the coordinators (none at rate 0: it waits).
func (r *fleetRun) lookups(ctx context.Context, d time.Duration) (bench.Result, error) {
	if r.o.LookupRate == 0 {
		return bench.Result{}, backoff.Sleep(ctx, d)
	}
	var cls []*client.Client
	defer func() {
		for _, cl := range cls {
			cl.Close()
		}
	}()
	for _, a := range r.ctl {
		cl, err := client.New(client.Options{Coordinators: []string{a}, MaxIdleConns: 8, Retries: -1})
		if err != nil {
			return bench.Result{}, err
		}
		cls = append(cls, cl)
	}
	res := bench.RunPaced(ctx, r.o.LookupRate, time.Second, d, func(ctx context.Context, slot int) error {
		_, err := cls[slot%len(cls)].Lookup(ctx, fmt.Sprintf("bench/object-%d#0", rand.IntN(100000)), 3)
		return err
	})
	return res.Result, nil
}

// waitFleets waits for the fleets to end their heartbeats and decodes
// their reports.
func (r *fleetRun) waitFleets(ctx context.Context) ([]bench.FleetReport, error) {
	var reps []bench.FleetReport
	timeout := time.After(2 * time.Minute)
	for _, f := range r.fleets {
		select {
		case <-f.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timeout:
			return nil, fmt.Errorf("%s did not end within 2 minutes of its duration", f.name)
		}
		if f.err != nil {
			return nil, f.exitError()
		}
		var rep bench.FleetReport
		if err := json.Unmarshal(f.out.Bytes(), &rep); err != nil {
			return nil, fmt.Errorf("%s: report %q: %w", f.name, f.out.Bytes(), err)
		}
		reps = append(reps, rep)
	}
	return reps, nil
}

// stop ends the fleets that still run and then the coordinators.
func (r *fleetRun) stop() error {
	var errs []error
	for _, f := range r.fleets {
		if f.stdin != nil {
			f.stdin.Close()
		}
		if err := f.stop(10 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	for _, c := range r.coords {
		if err := c.stop(30 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (r *fleetRun) coordPIDs() []int {
	var out []int
	for _, c := range r.coords {
		out = append(out, c.pid())
	}
	return out
}
