package harness

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"time"

	"github.com/talonhq/talon/internal/bench"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/config"
)

// Bounds and defaults of the fleet mode of `talon bench heartbeats`.
const (
	// MaxFleetSize bounds each of --fleet's sizes.
	MaxFleetSize = 50000
	// DefaultLookupRate is --lookup-rate: placement lookups per second
	// sent while a fleet runs, for their latency under the fleet.
	DefaultLookupRate = 100
	// MaxLookupRate bounds --lookup-rate.
	MaxLookupRate = 10000
	// maxCeilingPhase bounds the raw ceiling's phase in the fleet mode.
	maxCeilingPhase = 10 * time.Second
)

// FleetOptions configures the fleet mode of `talon bench heartbeats`
// (--fleet): for each size, coordinator processes on the backend and
// simulated workers in fleet processes of their own (`talon bench
// fleet`) heartbeating at Interval, open loop, beside the backend's raw
// ceiling measured once, before the rows.
type FleetOptions struct {
	// HeartbeatOptions are the run's backend, connection, coordinators
	// (Coordinators processes), Duration (each row's, after the
	// registrations), the raw ceiling's Writers and Mix, StatusInterval
	// and Output; Pairs and TalonPhase are not used.
	HeartbeatOptions
	// Sizes are the fleets' sizes, one row each, in order.
	Sizes []int
	// Interval is the workers' heartbeat interval and the coordinators'
	// heartbeat-interval.
	Interval time.Duration
	// LookupRate is the placement lookups per second sent during each
	// row (0: none).
	LookupRate int
	// Talon is the talon binary that runs the fleets and, unless
	// CoordinatorExe is set, the coordinators.
	Talon string
	// CoordinatorExe, when set, runs the coordinators instead of Talon
	// (a build that profiles itself), with CoordinatorEnv added to their
	// environment.
	CoordinatorExe string
	CoordinatorEnv []string
	// Host is the loopback address the coordinators listen on; default
	// 127.0.0.1.
	Host string
	// StorePIDs, when set, are the backend's processes on this machine
	// (etcd; the Kubernetes API server and its etcd): their CPU time,
	// together, is reported per 1,000 operations too.
	StorePIDs []int
	// Window, when set, is called as each row's measured window starts,
	// with the coordinators' process IDs, and the function it returns as
	// the window ends (a test profiles the coordinators with it).
	Window func(workers int, coordinatorPIDs []int) (end func())
}

// ValidateFleet checks o's fleet options and then the heartbeat options
// they share (HeartbeatOptions.Validate; getenv as there).
func (o *FleetOptions) ValidateFleet(getenv func(key string) string) error {
	if len(o.Sizes) == 0 {
		return errors.New("--fleet is empty: give one or more fleet sizes, such as 1000,5000,20000")
	}
	for _, n := range o.Sizes {
		if n < 1 || n > MaxFleetSize {
			return fmt.Errorf("--fleet %d: each size must be from 1 to %d", n, MaxFleetSize)
		}
	}
	switch {
	case o.Interval < MinFleetInterval || o.Interval > MaxFleetInterval:
		return fmt.Errorf("--interval %s: must be from %s to %s", o.Interval, MinFleetInterval, MaxFleetInterval)
	case o.LookupRate < 0 || o.LookupRate > MaxLookupRate:
		return fmt.Errorf("--lookup-rate %d: must be from 0 (none) to %d", o.LookupRate, MaxLookupRate)
	case o.Duration < 2*o.Interval:
		return fmt.Errorf("--duration %s: with --fleet must be at least twice --interval %s (every worker heartbeats twice)", o.Duration, o.Interval)
	case o.Talon == "":
		return errors.New("fleet: the talon binary to run is unknown")
	}
	return o.HeartbeatOptions.Validate(getenv)
}

// FleetReport is what the fleet mode of `talon bench heartbeats`
// measured.
type FleetReport struct {
	Backend               string  `json:"backend"`
	Coordinators          int     `json:"coordinators"`
	IntervalSeconds       float64 `json:"intervalSeconds"`
	RowSeconds            float64 `json:"rowSeconds"`
	StatusIntervalSeconds float64 `json:"statusIntervalSeconds"`
	LookupRate            int     `json:"lookupRate"`
	RecordBytes           int     `json:"recordBytes"`
	// Ceilings are the backend's raw ceilings, measured before the rows.
	Ceilings []FleetCeiling `json:"ceilings"`
	Rows     []FleetRow     `json:"rows"`
}

// FleetCeiling is a raw ceiling of the fleet mode: Writers writers of the
// backend's own client back to back for one phase (as `talon bench
// heartbeats` measures it), and the CPU time that cost per 1,000
// operations.
type FleetCeiling struct {
	Mix bench.Mix `json:"mix"`
	// StatusEvery is the renew mix's heartbeats per record write, from
	// the interval and the status interval (0: every heartbeat writes).
	StatusEvery uint64 `json:"statusEvery"`
	Writers     int    `json:"writers"`
	// Streams is the keepalive streams the writers shared (0: one each).
	Streams int           `json:"streams,omitempty"`
	Raw     bench.Summary `json:"raw"`
	// ClientCPUPer1000 is this process's (the raw writers') CPU seconds
	// per 1,000 operations; StoreCPUPer1000 the backend process's, when
	// known (StorePIDs).
	ClientCPUPer1000 float64  `json:"clientCPUSecondsPer1000"`
	StoreCPUPer1000  *float64 `json:"storeCPUSecondsPer1000,omitempty"`

	Result bench.Result `json:"-"`
}

// FleetRow is one fleet size's row.
type FleetRow struct {
	Workers int `json:"workers"`
	// Fleets is the number of fleet processes the workers ran in.
	Fleets            int     `json:"fleets"`
	RegisterSeconds   float64 `json:"registerSeconds"`
	ExpectedPerSecond float64 `json:"expectedPerSecond"`
	AcceptedPerSecond float64 `json:"acceptedPerSecond"`
	// Heartbeats pools the fleets' results; its p50, p99 and max are the
	// largest of the fleets'.
	Heartbeats bench.Summary `json:"heartbeats"`
	Sent       int           `json:"sent"`
	Missed     int           `json:"missed"`
	// OfCeiling is AcceptedPerSecond over each raw ceiling's rate, in
	// the order of FleetReport.Ceilings.
	OfCeiling []float64 `json:"ofCeiling"`
	// Coordinators are each coordinator process's figures: CPU over the
	// first half of the row, resident set at its end.
	Coordinators []ProcFigures `json:"coordinatorProcesses"`
	// CoordinatorCPUPer1000 is the coordinators' CPU seconds, together,
	// per 1,000 accepted heartbeats over the first half of the row, when
	// no lookup runs; StoreCPUPer1000 the backend's over the same half;
	// FleetCPUPer1000 the fleets' over the whole row.
	CoordinatorCPUPer1000 float64  `json:"coordinatorCPUSecondsPer1000"`
	FleetCPUPer1000       float64  `json:"fleetCPUSecondsPer1000"`
	StoreCPUPer1000       *float64 `json:"storeCPUSecondsPer1000,omitempty"`
	// CoordinatorBaselineCores is the CPU the coordinators used together,
	// in cores, with every worker registered but none heartbeating;
	// StoreBaselineCores the store's, when known. Part of the CPU seconds
	// per 1,000 heartbeats is this baseline.
	CoordinatorBaselineCores float64  `json:"coordinatorBaselineCores"`
	StoreBaselineCores       *float64 `json:"storeBaselineCores,omitempty"`
	// RSSPerWorkerKiB is the coordinators' mean resident set growth over
	// the empty cluster, per worker.
	RSSPerWorkerKiB float64 `json:"rssPerWorkerKiB"`
	// Lookups are the placement lookups sent during the second half of
	// the row.
	Lookups bench.Summary `json:"lookups"`
	// KubeQPS is the coordinators' kube-qps on Kubernetes.
	KubeQPS int `json:"kubeQPS,omitempty"`
	// Error says why the row could not be measured; its figures are
	// then zero.
	Error string `json:"error,omitempty"`
	// Cleanup says what the row could not remove afterwards (its figures
	// stand).
	Cleanup string `json:"cleanup,omitempty"`
}

// ProcFigures are one coordinator process's figures: CPU seconds over the
// first half of a row, and the resident set of the empty cluster and at
// the row's end.
type ProcFigures struct {
	CPUSeconds  float64 `json:"cpuSeconds"`
	RSSEmptyMiB float64 `json:"rssEmptyMiB"`
	RSSMiB      float64 `json:"rssMiB"`
}

// Fleet runs the fleet mode of `talon bench heartbeats` (see its --help):
// the raw ceilings first, then a row per size, each in a prefix or
// namespace of its own that it removes unless o.Conn.Keep. progress
// receives a line per step. A size that could not be measured has a row
// with its Error, the next sizes are still measured, and the error is
// returned with the report.
func Fleet(ctx context.Context, o FleetOptions, progress func(format string, a ...any), log *slog.Logger) (FleetReport, error) {
	rep := FleetReport{Backend: o.Backend, Coordinators: o.Coordinators, IntervalSeconds: o.Interval.Seconds(), RowSeconds: o.Duration.Seconds(),
		StatusIntervalSeconds: o.StatusInterval.Seconds(), LookupRate: o.LookupRate, RecordBytes: bench.RecordBytes()}
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	var err error
	if rep.Ceilings, err = fleetCeilings(ctx, o, progress, log); err != nil {
		return rep, err
	}
	var errs []error
	for _, n := range o.Sizes {
		if err := ctx.Err(); err != nil {
			return rep, errors.Join(append(errs, err)...)
		}
		row, err := fleetRow(ctx, o, n, progress, log)
		if err != nil {
			// The next size may still be measured: a row that could not
			// be is reported as such, and the run fails at its end.
			err = fmt.Errorf("fleet of %d workers: %w", n, err)
			progress("%v", err)
			errs = append(errs, err)
			row = FleetRow{Workers: n, Error: err.Error()}
		}
		for _, c := range rep.Ceilings {
			row.OfCeiling = append(row.OfCeiling, ratio(row.AcceptedPerSecond, c.Raw.PerSecond))
		}
		rep.Rows = append(rep.Rows, row)
	}
	return rep, errors.Join(errs...)
}

// fleetCeilings measures each raw ceiling of o for one phase (at most
// maxCeilingPhase), with the CPU time it cost this process and the
// store, in a prefix or namespace of its own.
func fleetCeilings(ctx context.Context, o FleetOptions, progress func(format string, a ...any), log *slog.Logger) (out []FleetCeiling, err error) {
	env := newRunEnv(o.Conn, log)
	defer env.cleanup(ctx, progress, &err)
	var scratch HeartbeatReport
	progress("raw %s: setting up %d writers (%s)", o.Backend, o.Writers, env.where(o.Backend))
	raw, err := prepareRaw(ctx, env, o.HeartbeatOptions, 2*time.Minute, &scratch)
	if err != nil {
		return nil, err
	}
	defer raw.Close()
	d := min(o.Duration, maxCeilingPhase)
	statusEvery := cluster.Timing{HeartbeatInterval: o.Interval, StatusInterval: o.StatusInterval}.StatusEvery()
	for _, m := range o.mixes() {
		progress("raw %s %s: %d writers for %s", o.Backend, m, o.Writers, d)
		before, err := usages(append([]int{os.Getpid()}, o.StorePIDs...)...)
		if err != nil {
			return nil, err
		}
		res := raw.Run(ctx, d, m, statusEvery)
		after, err := usages(append([]int{os.Getpid()}, o.StorePIDs...)...)
		if err != nil {
			return nil, err
		}
		c := FleetCeiling{Mix: m, StatusEvery: statusEvery, Writers: o.Writers, Streams: o.RawStreams, Raw: res.Summary(), Result: res,
			ClientCPUPer1000: per1000(after[0].CPU-before[0].CPU, res.Ops)}
		if len(o.StorePIDs) > 0 {
			c.StoreCPUPer1000 = ptr(per1000(cpuBetween(before[1:], after[1:]), res.Ops))
		}
		out = append(out, c)
	}
	return out, nil
}

// usages reads the usage of each pid; a zero pid reads as zero.
func usages(pids ...int) ([]ProcUsage, error) {
	out := make([]ProcUsage, len(pids))
	for i, pid := range pids {
		if pid == 0 {
			continue
		}
		u, err := readUsage(pid)
		if err != nil {
			return nil, err
		}
		out[i] = u
	}
	return out, nil
}

// cpuBetween is the CPU time the processes spent from before to after.
func cpuBetween(before, after []ProcUsage) time.Duration {
	var d time.Duration
	for i := range after {
		d += after[i].CPU - before[i].CPU
	}
	return d
}

// per1000 returns cpu in seconds per 1,000 of ops; 0 without ops.
func per1000(cpu time.Duration, ops int) float64 {
	if ops <= 0 {
		return 0
	}
	return cpu.Seconds() * 1000 / float64(ops)
}

// ratio returns a over b; 0 when b is not positive.
func ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}

func ptr[T any](v T) *T { return &v }

// rowFigures fills in row's rates (accepted over the row: its
// Heartbeats), the coordinators' CPU seconds per 1,000 accepted
// heartbeats over the window with heartbeats alone (half long, between
// the usages before and after; the heartbeats in it are the row's rate
// times its length) and their resident set growth per worker, from the
// empty cluster's to the row's end (last).
func rowFigures(row *FleetRow, interval, half time.Duration, empty, before, after, last []ProcUsage) {
	row.ExpectedPerSecond = float64(row.Workers) / interval.Seconds()
	row.AcceptedPerSecond = 0
	if row.Heartbeats.ElapsedS > 0 {
		row.AcceptedPerSecond = float64(row.Heartbeats.Ops) / row.Heartbeats.ElapsedS
	}
	var cpu time.Duration
	var growth float64
	row.Coordinators = nil
	for i := range after {
		d := after[i].CPU - before[i].CPU
		cpu += d
		growth += float64(last[i].RSS - empty[i].RSS)
		row.Coordinators = append(row.Coordinators, ProcFigures{CPUSeconds: d.Seconds(), RSSEmptyMiB: mib(empty[i].RSS), RSSMiB: mib(last[i].RSS)})
	}
	row.CoordinatorCPUPer1000 = per1000(cpu, row.heartbeatsIn(half))
	row.RSSPerWorkerKiB = 0
	if n := len(after); n > 0 && row.Workers > 0 {
		row.RSSPerWorkerKiB = growth / float64(n) / float64(row.Workers) / 1024
	}
}

// heartbeatsIn is the heartbeats the row accepted in d at its rate.
func (row FleetRow) heartbeatsIn(d time.Duration) int {
	return int(math.Round(row.AcceptedPerSecond * d.Seconds()))
}

func mib(b int64) float64 { return math.Round(float64(b)/(1<<20)*10) / 10 }

// kubeQPS returns the coordinators' kube-qps and kube-burst for a fleet
// of workers: at least the configured ones, and enough for half as much
// again as each coordinator's share of the heartbeats (an operator sizes
// kube-qps for the fleet; the default 400 serves 2,000 workers a
// coordinator at 5 s).
func kubeQPS(c config.KubeConfig, workers, coordinators int, interval time.Duration) (qps, burst int) {
	need := int(math.Ceil(1.5 * float64(workers) / interval.Seconds() / float64(coordinators)))
	qps = max(c.QPS, need)
	return qps, max(c.Burst, 2*qps)
}
