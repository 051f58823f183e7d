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
	"github.com/talonhq/talon/internal/cluster"
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

// HeartbeatInterval is the in-process coordinators' heartbeat-interval,
// production's default: with status-interval it sets how many heartbeats
// a status write spans (cluster.Timing.StatusEvery).
const HeartbeatInterval = 5 * time.Second

// Pairs: the default and the bound of --pairs.
const (
	DefaultPairs = 3
	MaxPairs     = 20
)

// MixBoth, as --mix, measures both raw ceilings (bench.Mixes) in every raw
// phase.
const MixBoth = "both"

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
	// Pairs is the number of Talon phases, run between Pairs+1 raw phases
	// (bench.Interleave); each ratio is the median of Pairs.
	Pairs int
	// Mix is the raw ceiling to measure: bench.MixRenew (what Talon's
	// store does at StatusInterval), bench.MixWrite (a write every
	// heartbeat, the ceiling before lease renewals) or MixBoth.
	Mix string
	// StatusInterval is the coordinators' status-interval (0: every
	// heartbeat writes the record), and so the renew mix's period.
	StatusInterval time.Duration
	// RawStreams, on etcd, is the number of LeaseKeepAlive streams the raw
	// writers share, as Talon's store multiplexes its keepalives; zero
	// gives each writer a stream of its own.
	RawStreams int
	// Output is text or json.
	Output string
	// TalonPhase, when set, is called as the first Talon phase's
	// heartbeats start and the function it returns as they end (the
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
	// Pairs is the number of Talon phases; each ceiling has Pairs+1 raw
	// phases around them.
	Pairs int `json:"pairs"`
	// RecordBytes is the encoded size of the record both sides write.
	RecordBytes int `json:"recordBytes"`
	// StatusIntervalSeconds is the coordinators' status-interval and
	// StatusEvery the heartbeats it spans (0: every heartbeat writes).
	StatusIntervalSeconds float64 `json:"statusIntervalSeconds"`
	StatusEvery           uint64  `json:"statusEvery"`
	// RawStreams is the keepalive streams the raw etcd writers shared (0:
	// one each).
	RawStreams int `json:"rawStreams,omitempty"`
	// Talon is the heartbeat path through the coordinators, pooled over
	// its phases (TalonPhases, in run order); its renewals are the
	// coordinators' stores' count.
	Talon       bench.Summary   `json:"talon"`
	TalonPhases []bench.Summary `json:"talonPhases"`
	// Ceilings are the raw ceilings measured, one per mix.
	Ceilings []Ceiling `json:"ceilings"`
	// Created names what each side created in the backend (leases
	// granted on etcd, Lease objects on Kubernetes) and how many.
	Created      string `json:"created"`
	RawCreated   int    `json:"rawCreated"`
	TalonCreated int    `json:"talonCreated"`
	Kept         bool   `json:"kept"`

	TalonResult  bench.Result   `json:"-"`
	TalonResults []bench.Result `json:"-"`
}

// Ceiling is one raw ceiling of a heartbeat run and Talon's ratio to it.
type Ceiling struct {
	// Mix is bench.MixRenew or bench.MixWrite; StatusEvery is the raw
	// writers' heartbeats per record write (0: every heartbeat writes).
	Mix         bench.Mix `json:"mix"`
	StatusEvery uint64    `json:"statusEvery"`
	// Raw is pooled over the raw phases (Phases, in run order).
	Raw    bench.Summary   `json:"raw"`
	Phases []bench.Summary `json:"phases"`
	// Ratio is Talon's rate over the raw rate and P99Ratio the same of
	// their p99 latencies, each the median (with its range) of the Talon
	// phases' ratios to the mean of the raw phases either side of them
	// (bench.PairRatios).
	Ratio    bench.Spread `json:"ratio"`
	P99Ratio bench.Spread `json:"p99Ratio"`

	RawResult bench.Result   `json:"-"`
	Results   []bench.Result `json:"-"`
}

// Ceiling returns the report's ceiling of mix m.
func (r HeartbeatReport) Ceiling(m bench.Mix) (Ceiling, bool) {
	for _, c := range r.Ceilings {
		if c.Mix == m {
			return c, true
		}
	}
	return Ceiling{}, false
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
	if err := o.validateMeasure(); err != nil {
		return err
	}
	return o.Conn.Validate([]string{o.Backend}, getenv)
}

// validateMeasure checks what the run measures: pairs, mix, status
// interval and the raw writers' streams.
func (o *HeartbeatOptions) validateMeasure() error {
	if o.Pairs < 1 || o.Pairs > MaxPairs {
		return fmt.Errorf("--pairs %d: must be from 1 to %d", o.Pairs, MaxPairs)
	}
	if o.Mix != MixBoth {
		if _, err := bench.ParseMix(o.Mix); err != nil {
			return fmt.Errorf("--mix %q: must be %s, %s or %s", o.Mix, bench.MixRenew, bench.MixWrite, MixBoth)
		}
	}
	if si := o.StatusInterval; si != 0 && (si < HeartbeatInterval || si > time.Hour) {
		return fmt.Errorf("--status-interval %s: must be 0 (every heartbeat writes the record) or from the heartbeat interval %s to 1h", si, HeartbeatInterval)
	}
	switch {
	case o.RawStreams < 0 || o.RawStreams > o.Writers:
		return fmt.Errorf("--raw-streams %d: must be from 0 (a stream per writer) to --writers %d", o.RawStreams, o.Writers)
	case o.RawStreams > 0 && o.Backend != config.BackendEtcd:
		return fmt.Errorf("--raw-streams %d: only with --backend etcd (lease keepalive streams)", o.RawStreams)
	}
	return nil
}

// mixes returns the raw mixes o measures.
func (o HeartbeatOptions) mixes() []bench.Mix {
	if o.Mix == MixBoth {
		return bench.Mixes
	}
	return []bench.Mix{bench.Mix(o.Mix)}
}

// statusEvery is the heartbeats one status interval spans.
func (o HeartbeatOptions) statusEvery() uint64 {
	return cluster.Timing{HeartbeatInterval: HeartbeatInterval, StatusInterval: o.StatusInterval}.StatusEvery()
}

// coordinatorTiming returns the in-process coordinators' unhealthy-after
// and lease-ttl: long enough that the simulated workers, silent for gap
// while the raw phases between two Talon phases run, are neither marked
// late nor expired (either would change what their next heartbeat costs);
// production's (1m, 2m) when that is enough. Past an hour (config's bound
// on unhealthy-after) the workers are marked late during the gap, and the
// first heartbeat of the next phase writes the record to clear the mark.
func coordinatorTiming(gap, requestTimeout time.Duration) (unhealthyAfter, leaseTTL time.Duration) {
	unhealthyAfter = min(max(time.Minute, gap+time.Minute, 2*HeartbeatInterval+requestTimeout), time.Hour)
	return unhealthyAfter, max(2*time.Minute, 2*unhealthyAfter)
}

// Heartbeats measures o.Backend's raw ceilings and heartbeats through
// in-process coordinators in interleaved phases (see `talon bench
// heartbeats --help`), removes what they created unless o.Conn.Keep, and
// returns the report. Everything is set up before the first phase: the
// raw writers' keys or Leases, the coordinators and the registrations of
// the simulated workers, which stay registered while the raw phases run.
// progress receives one line per step.
func Heartbeats(ctx context.Context, roles Roles, o HeartbeatOptions, progress func(format string, a ...any), log *slog.Logger) (rep HeartbeatReport, err error) {
	env := newRunEnv(o.Conn, log)
	defer env.cleanup(ctx, progress, &err)
	rep = HeartbeatReport{Backend: o.Backend, Location: env.where(o.Backend), Writers: o.Writers, Coordinators: o.Coordinators,
		PhaseSeconds: o.Duration.Seconds(), Pairs: o.Pairs, RecordBytes: bench.RecordBytes(), Kept: o.Conn.Keep,
		StatusIntervalSeconds: o.StatusInterval.Seconds(), StatusEvery: o.statusEvery(), RawStreams: o.RawStreams}

	// The coordinators' configurations first: a bad setting fails now,
	// not after the raw writers' set-up.
	cfgs, err := heartbeatConfigs(env, o)
	if err != nil {
		return rep, err
	}
	progress("raw %s: setting up %d writers (%s)", o.Backend, o.Writers, rep.Location)
	raw, err := prepareRaw(ctx, env, o, cfgs[0].LeaseTTL, &rep)
	if err != nil {
		return rep, err
	}
	defer raw.Close()

	progress("talon %s: starting %d coordinators", o.Backend, o.Coordinators)
	coords, err := startCoordinators(ctx, roles, cfgs, nil, log)
	if err != nil {
		return rep, err
	}
	defer func() { err = errors.Join(err, coords.Stop()) }()
	progress("talon %s: %d simulated workers register through %s", o.Backend, o.Writers, strings.Join(coords.Addrs(), ","))
	hb, err := bench.Register(ctx, bench.HeartbeatOptions{Coordinators: coords.Addrs(), ClusterID: ClusterID, Writers: o.Writers})
	if err != nil {
		return rep, err
	}
	defer hb.Close()

	ph := &heartbeatPhases{o: o, raw: raw, hb: hb, coords: coords, mixes: o.mixes(), statusEvery: rep.StatusEvery, progress: progress}
	ph.rawResults = make([][]bench.Result, len(ph.mixes))
	if err := bench.Interleave(ctx, o.Pairs, ph.rawPhase, ph.talonPhase); err != nil {
		return rep, err
	}
	ph.fill(&rep)
	switch o.Backend {
	case config.BackendEtcd:
		rep.TalonCreated = coords.leaseGrants()
	case config.BackendKubernetes:
		rep.TalonCreated, err = env.talonLeases(ctx)
	}
	return rep, err
}

// heartbeatConfigs returns the configurations of the run's coordinators.
func heartbeatConfigs(env *runEnv, o HeartbeatOptions) ([]*config.Config, error) {
	gap := time.Duration(len(o.mixes())) * o.Duration
	var cfgs []*config.Config
	for i := range o.Coordinators {
		cfg, err := env.coordinatorConfig(o.Backend, fmt.Sprintf("bench-coordinator-%d", i+1), o.Writers+o.Coordinators, func(c *config.Config) {
			c.StatusInterval = o.StatusInterval
			c.UnhealthyAfter, c.LeaseTTL = coordinatorTiming(gap, c.RequestTimeout)
		})
		if err != nil {
			return nil, err
		}
		cfgs = append(cfgs, cfg)
	}
	return cfgs, nil
}

// rawWriters are the raw ceiling's writers on one backend
// (bench.RawEtcd, bench.RawKube).
type rawWriters interface {
	Run(ctx context.Context, d time.Duration, mix bench.Mix, statusEvery uint64) bench.Result
	Created() int
	Close()
}

// prepareRaw sets up the raw writers with the backend's own client; the
// Kubernetes Leases get Talon's lease duration, leaseTTL.
func prepareRaw(ctx context.Context, env *runEnv, o HeartbeatOptions, leaseTTL time.Duration, rep *HeartbeatReport) (rawWriters, error) {
	switch o.Backend {
	case config.BackendEtcd:
		rep.Created = "leases granted"
		cli, err := env.etcdClient(ctx)
		if err != nil {
			return nil, err
		}
		r, err := bench.PrepareRawEtcd(ctx, cli, bench.RawEtcdOptions{Prefix: env.etcdPrefix + "/raw", Writers: o.Writers, LeaseTTL: 10 * time.Minute, Streams: o.RawStreams})
		if err != nil {
			return nil, err
		}
		rep.RawCreated = r.Created()
		return r, nil
	case config.BackendKubernetes:
		rep.Created = "Lease objects"
		cs, err := env.kubeClient(ctx)
		if err != nil {
			return nil, err
		}
		r, created, err := bench.PrepareRawKube(ctx, cs, bench.RawKubeOptions{Namespace: env.namespace, NamePrefix: "bench-raw-", Writers: o.Writers, LeaseTTL: leaseTTL})
		rep.RawCreated = created
		if err != nil {
			return nil, err
		}
		return r, nil
	}
	return nil, fmt.Errorf("backend %q: no raw ceiling", o.Backend)
}

// heartbeatPhases are the phases of one Heartbeats run and what they
// measured; bench.Interleave calls them one at a time.
type heartbeatPhases struct {
	o           HeartbeatOptions
	raw         rawWriters
	hb          *bench.Heartbeaters
	coords      *coordinators
	mixes       []bench.Mix
	statusEvery uint64
	progress    func(format string, a ...any)

	rawResults [][]bench.Result // per mix, in run order
	talon      []bench.Result
}

// rawPhase runs raw phase i of every mix.
func (p *heartbeatPhases) rawPhase(ctx context.Context, i int) error {
	for j, m := range p.mixes {
		p.progress("raw %s %s %d/%d: %d writers for %s", p.o.Backend, m, i+1, p.o.Pairs+1, p.o.Writers, p.o.Duration)
		p.rawResults[j] = append(p.rawResults[j], p.raw.Run(ctx, p.o.Duration, m, p.statusEvery))
	}
	return nil
}

// talonPhase runs Talon phase i; its renewals are those the coordinators'
// stores counted meanwhile.
func (p *heartbeatPhases) talonPhase(ctx context.Context, i int) error {
	p.progress("talon %s %d/%d: %d simulated workers heartbeat for %s", p.o.Backend, i+1, p.o.Pairs, p.o.Writers, p.o.Duration)
	var end func()
	if i == 0 && p.o.TalonPhase != nil {
		end = p.o.TalonPhase()
	}
	before := p.coords.renewals()
	res := p.hb.Run(ctx, p.o.Duration)
	res.Renewals = int(p.coords.renewals() - before)
	if end != nil {
		end()
	}
	p.talon = append(p.talon, res)
	return nil
}

// fill puts the phases' results and ratios into rep.
func (p *heartbeatPhases) fill(rep *HeartbeatReport) {
	rep.TalonResults = p.talon
	rep.TalonResult = bench.Merge(p.talon...)
	rep.Talon = rep.TalonResult.Summary()
	rep.TalonPhases = summaries(p.talon)
	for j, m := range p.mixes {
		raws := p.rawResults[j]
		c := Ceiling{Mix: m, Results: raws, RawResult: bench.Merge(raws...), Phases: summaries(raws),
			Ratio:    bench.SpreadOf(bench.PairRatios(bench.Rates(raws), bench.Rates(p.talon))),
			P99Ratio: bench.SpreadOf(bench.PairRatios(bench.P99s(raws), bench.P99s(p.talon)))}
		if m == bench.MixRenew {
			c.StatusEvery = p.statusEvery
		}
		c.Raw = c.RawResult.Summary()
		rep.Ceilings = append(rep.Ceilings, c)
	}
}

// summaries returns each result's Summary.
func summaries(rs []bench.Result) []bench.Summary {
	out := make([]bench.Summary, len(rs))
	for i, r := range rs {
		out[i] = r.Summary()
	}
	return out
}

// Write prints the report as text (the phases in run order, then each
// side pooled, and the ratios) or JSON.
func (r HeartbeatReport) Write(w io.Writer, output string) error {
	if output == "json" {
		return writeIndentedJSON(w, r)
	}
	fmt.Fprintf(w, "heartbeats on %s (%s): %d writers, %d coordinators, %d pairs of %s phases, %d-byte records\n",
		r.Backend, r.Location, r.Writers, r.Coordinators, r.Pairs, time.Duration(r.PhaseSeconds*float64(time.Second)), r.RecordBytes)
	fmt.Fprintf(w, "talon: %s\n", r.talonMix())
	for _, c := range r.Ceilings {
		fmt.Fprintf(w, "raw %s: %s%s\n", c.Mix, rawMix(r.Backend, c), sharedStreams(r.RawStreams, c.Mix))
	}
	fmt.Fprintln(w)
	if err := r.writeTable(w); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, c := range r.Ceilings {
		fmt.Fprintf(w, "ratio talon/raw %s: %s of the rate, p99 %s\n", c.Mix, c.Ratio, c.P99Ratio.Format("%.2fx"))
	}
	fmt.Fprintf(w, "(median (min–max) of %d pairs: each talon phase against the mean of the raw phases before and after it)\n", r.Pairs)
	fmt.Fprintf(w, "%s: raw %d, talon %d\n", r.Created, r.RawCreated, r.TalonCreated)
	for _, c := range r.Ceilings {
		writeFailures(w, "raw "+string(c.Mix), c.RawResult)
	}
	writeFailures(w, "talon", r.TalonResult)
	_, err := fmt.Fprintln(w)
	return err
}

// writeTable prints one row per phase in run order, then the pooled rows.
func (r HeartbeatReport) writeTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "phase\tops/s\tp50\tp99\tmax\tok\tfailed\tbacked off\trenewed\t\n")
	row := func(name string, res bench.Result) {
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t\n", name, res.PerSecond(), ms(res.P50()), ms(res.P99()), ms(res.Max()),
			res.Ops, res.FailureCount(), res.BackedOff, res.Renewals)
	}
	for i := range r.Pairs + 1 {
		for _, c := range r.Ceilings {
			if i < len(c.Results) {
				row(fmt.Sprintf("raw %s %d", c.Mix, i+1), c.Results[i])
			}
		}
		if i < len(r.TalonResults) {
			row(fmt.Sprintf("talon %d", i+1), r.TalonResults[i])
		}
	}
	for _, c := range r.Ceilings {
		row(fmt.Sprintf("raw %s all", c.Mix), c.RawResult)
	}
	row("talon all", r.TalonResult)
	return tw.Flush()
}

// talonMix describes what Talon's heartbeats cost the store in this run.
func (r HeartbeatReport) talonMix() string {
	si := time.Duration(r.StatusIntervalSeconds * float64(time.Second))
	if r.StatusEvery == 0 {
		return "status-interval 0: every heartbeat writes the record"
	}
	return fmt.Sprintf("status-interval %s at heartbeat-interval %s: the record is written every %d heartbeats, the lease renewed in between",
		si, HeartbeatInterval, r.StatusEvery)
}

// sharedStreams notes the keepalive streams the raw writers shared.
func sharedStreams(n int, m bench.Mix) string {
	if n == 0 || m == bench.MixWrite {
		return ""
	}
	return fmt.Sprintf(", the keepalives over %d shared streams", n)
}

// rawMix describes what ceiling c's writers send to backend b per
// heartbeat.
func rawMix(b string, c Ceiling) string {
	write, renew := "a compare-and-swap put of the record", "lease keepalives"
	if b == config.BackendKubernetes {
		write, renew = "a merge patch of the status", "renewal patches (renewTime, talon.io/renew-seq)"
	}
	switch {
	case c.Mix == bench.MixWrite && b == config.BackendKubernetes:
		return "an UPDATE of the whole Lease on every heartbeat (the ceiling before lease renewals)"
	case c.Mix == bench.MixWrite:
		return write + " on every heartbeat (the ceiling before lease renewals)"
	case c.StatusEvery == 0:
		return write + " on every heartbeat, as talon at status-interval 0"
	}
	return fmt.Sprintf("%d %s to 1 %s per writer, as talon's store at this status interval", c.StatusEvery-1, renew, write[2:])
}

// writeFailures prints res's failures by code and its first failure.
func writeFailures(w io.Writer, name string, res bench.Result) {
	for _, code := range res.FailureCodes() {
		fmt.Fprintf(w, "failures (%s): %s %d\n", name, code, res.Failures[code])
	}
	if res.FirstErr != nil {
		fmt.Fprintf(w, "first failure (%s): %v\n", name, res.FirstErr)
	}
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
