package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/talonhq/talon/internal/bench"
	"github.com/talonhq/talon/internal/config"
)

// Default writers of `talon bench heartbeats` per backend: the
// concurrencies issue 18's goals are stated at.
const (
	DefaultEtcdWriters = 1000
	DefaultKubeWriters = 200
	// MaxWriters bounds --writers, and --workers of the lookups.
	MaxWriters = 10000
	// MaxCoordinators bounds --coordinators-count.
	MaxCoordinators = 16
)

// HeartbeatOptions configures Heartbeats (`talon bench heartbeats`).
type HeartbeatOptions struct {
	// Backend is etcd or kubernetes.
	Backend string
	Conn    Conn
	// Writers is the concurrency of both phases; zero means the backend's
	// default (DefaultEtcdWriters, DefaultKubeWriters).
	Writers int
	// Coordinators is the number of in-process coordinators.
	Coordinators int
	// Duration is each phase's length.
	Duration time.Duration
	// Output is text or json.
	Output string
	// TalonPhase, when set, is called as the Talon phase's heartbeats start
	// (after registration) and the function it returns as they end (the
	// report records a CPU profile).
	TalonPhase func() (end func())
}

// HeartbeatReport is what `talon bench heartbeats` measured.
type HeartbeatReport struct {
	Backend      string  `json:"backend"`
	Location     string  `json:"location"`
	Writers      int     `json:"writers"`
	Coordinators int     `json:"coordinators"`
	PhaseSeconds float64 `json:"phaseSeconds"`
	// RecordBytes is the encoded size of the record both phases write.
	RecordBytes int `json:"recordBytes"`
	// Raw is the backend ceiling, Talon the heartbeat path through the
	// coordinators; Ratio is Talon's rate over Raw's and P99Ratio the same
	// of their p99 latencies.
	Raw      bench.Summary `json:"raw"`
	Talon    bench.Summary `json:"talon"`
	Ratio    float64       `json:"ratio"`
	P99Ratio float64       `json:"p99Ratio"`
	// Created names what each phase created in the backend (leases
	// granted on etcd, Lease objects on Kubernetes) and how many.
	Created      string `json:"created"`
	RawCreated   int    `json:"rawCreated"`
	TalonCreated int    `json:"talonCreated"`
	Kept         bool   `json:"kept"`

	RawResult, TalonResult bench.Result `json:"-"`
}

// Validate checks the options, filling in the backend's default writers;
// getenv looks up the environment (see Conn.Validate).
func (o *HeartbeatOptions) Validate(getenv func(key string) string) error {
	switch o.Backend {
	case config.BackendEtcd:
		if o.Writers == 0 {
			o.Writers = DefaultEtcdWriters
		}
	case config.BackendKubernetes:
		if o.Writers == 0 {
			o.Writers = DefaultKubeWriters
		}
	case "":
		return errors.New("--backend is required: etcd or kubernetes")
	default:
		return fmt.Errorf("--backend %q: must be etcd or kubernetes", o.Backend)
	}
	switch {
	case o.Writers < 1 || o.Writers > MaxWriters:
		return fmt.Errorf("--writers %d: must be from 1 to %d", o.Writers, MaxWriters)
	case o.Coordinators < 1 || o.Coordinators > MaxCoordinators:
		return fmt.Errorf("--coordinators-count %d: must be from 1 to %d", o.Coordinators, MaxCoordinators)
	case o.Duration < time.Second || o.Duration > time.Hour:
		return fmt.Errorf("--duration %s: must be from 1s to 1h", o.Duration)
	case o.Output != "text" && o.Output != "json":
		return fmt.Errorf("--output %q: must be text or json", o.Output)
	}
	return o.Conn.Validate([]string{o.Backend}, getenv)
}

// Heartbeats runs the raw phase and then the Talon phase on o.Backend
// (see `talon bench heartbeats --help`), removes what they created unless
// o.Conn.Keep, and returns the report. progress receives one line per step.
func Heartbeats(ctx context.Context, roles Roles, o HeartbeatOptions, progress func(format string, a ...any), log *slog.Logger) (rep HeartbeatReport, err error) {
	env := newRunEnv(o.Conn, log)
	defer env.cleanup(ctx, progress, &err)
	rep = HeartbeatReport{Backend: o.Backend, Location: env.where(o.Backend), Writers: o.Writers, Coordinators: o.Coordinators,
		PhaseSeconds: o.Duration.Seconds(), RecordBytes: bench.RecordBytes(), Kept: o.Conn.Keep}

	// The coordinators' configurations first: a bad setting fails now,
	// not after the raw phase.
	var cfgs []*config.Config
	for i := range o.Coordinators {
		cfg, err := env.coordinatorConfig(o.Backend, fmt.Sprintf("bench-coordinator-%d", i+1), o.Writers+o.Coordinators)
		if err != nil {
			return rep, err
		}
		cfgs = append(cfgs, cfg)
	}

	progress("raw %s: %d writers for %s (%s)", o.Backend, o.Writers, o.Duration, rep.Location)
	if err := rawPhase(ctx, env, o, &rep); err != nil {
		return rep, err
	}
	if ctx.Err() != nil {
		return rep, ctx.Err()
	}

	progress("talon %s: starting %d coordinators", o.Backend, o.Coordinators)
	if err := talonPhase(ctx, env, roles, cfgs, o, &rep, progress, log); err != nil {
		return rep, err
	}
	rep.Raw, rep.Talon = rep.RawResult.Summary(), rep.TalonResult.Summary()
	if r := rep.RawResult.PerSecond(); r > 0 {
		rep.Ratio = rep.TalonResult.PerSecond() / r
	}
	if r := rep.RawResult.P99(); r > 0 {
		rep.P99Ratio = float64(rep.TalonResult.P99()) / float64(r)
	}
	return rep, nil
}

// rawPhase measures the backend's ceiling with its own client.
func rawPhase(ctx context.Context, env *runEnv, o HeartbeatOptions, rep *HeartbeatReport) error {
	switch o.Backend {
	case config.BackendEtcd:
		rep.Created = "leases granted"
		cli, err := env.etcdClient(ctx)
		if err != nil {
			return err
		}
		rep.RawResult, rep.RawCreated, err = bench.RawEtcd(ctx, cli, bench.RawEtcdOptions{Prefix: env.etcdPrefix + "/raw", Writers: o.Writers, Duration: o.Duration, LeaseTTL: 10 * time.Minute})
		return err
	case config.BackendKubernetes:
		rep.Created = "Lease objects"
		cs, err := env.kubeClient(ctx)
		if err != nil {
			return err
		}
		rep.RawResult, rep.RawCreated, err = bench.RawKube(ctx, cs, bench.RawKubeOptions{Namespace: env.namespace, NamePrefix: "bench-raw-", Writers: o.Writers, Duration: o.Duration})
		return err
	}
	return nil
}

// talonPhase measures heartbeats through coordinators started on cfgs.
func talonPhase(ctx context.Context, env *runEnv, roles Roles, cfgs []*config.Config, o HeartbeatOptions, rep *HeartbeatReport, progress func(format string, a ...any), log *slog.Logger) error {
	coords, err := startCoordinators(ctx, roles, cfgs, nil, log)
	if err != nil {
		return err
	}
	progress("talon %s: %d simulated workers register, then heartbeat for %s through %s", o.Backend, o.Writers, o.Duration, strings.Join(coords.Addrs(), ","))
	var end func()
	registered := func() {
		if o.TalonPhase != nil {
			end = o.TalonPhase()
		}
	}
	rep.TalonResult, err = bench.Heartbeats(ctx, bench.HeartbeatOptions{Coordinators: coords.Addrs(), ClusterID: ClusterID, Writers: o.Writers, Duration: o.Duration, Registered: registered})
	if end != nil {
		end()
	}
	if err == nil {
		switch o.Backend {
		case config.BackendEtcd:
			rep.TalonCreated = coords.leaseGrants()
		case config.BackendKubernetes:
			rep.TalonCreated, err = env.talonLeases(ctx)
		}
	}
	return errors.Join(err, coords.Stop())
}

// Write prints the report as text (a table) or JSON.
func (r HeartbeatReport) Write(w io.Writer, output string) error {
	if output == "json" {
		return writeIndentedJSON(w, r)
	}
	fmt.Fprintf(w, "heartbeats on %s (%s): %d writers, %d coordinators, %s per phase, %d-byte records\n\n",
		r.Backend, r.Location, r.Writers, r.Coordinators, time.Duration(r.PhaseSeconds*float64(time.Second)), r.RecordBytes)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "path\tops/s\tp50\tp99\tmax\tok\tfailed\tbacked off\t%s\t\n", r.Created)
	row := func(name string, res bench.Result, created int) {
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t\n", name, res.PerSecond(), ms(res.P50()), ms(res.P99()), ms(res.Max()),
			res.Ops, res.FailureCount(), res.BackedOff, created)
	}
	row("raw "+r.Backend, r.RawResult, r.RawCreated)
	row("talon", r.TalonResult, r.TalonCreated)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nratio talon/raw: %.2f of the rate, p99 %.2fx\n", r.Ratio, r.P99Ratio)
	for _, p := range []struct {
		name string
		res  bench.Result
	}{{"raw", r.RawResult}, {"talon", r.TalonResult}} {
		for _, code := range p.res.FailureCodes() {
			fmt.Fprintf(w, "failures (%s): %s %d\n", p.name, code, p.res.Failures[code])
		}
		if p.res.FirstErr != nil {
			fmt.Fprintf(w, "first failure (%s): %v\n", p.name, p.res.FirstErr)
		}
	}
	_, err := fmt.Fprintln(w)
	return err
}

// ms renders d in milliseconds with a precision that suits it.
func ms(d time.Duration) string {
	switch {
	case d >= 100*time.Millisecond:
		return d.Round(time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	}
	return d.Round(time.Microsecond).String()
}
