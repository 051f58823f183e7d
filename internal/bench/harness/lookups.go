package harness

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/talonhq/talon/internal/backoff"
	"github.com/talonhq/talon/internal/bench"
	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/protocol"
	"github.com/talonhq/talon/internal/state"
)

// LookupOptions configures `talon bench lookups`: Lookups against running
// coordinators, or LookupBackends.
type LookupOptions struct {
	Coordinators []string
	Concurrency  int
	Duration     time.Duration
	Keys         int
	Replicas     int
	// TLS is the client configuration for the coordinators; nil talks to
	// a cluster without TLS.
	TLS *tls.Config

	// Backends, when set, selects the self-contained mode: for each
	// backend (memory, etcd, kubernetes) Workers simulated worker records
	// are seeded into a store of its own and one coordinator is started on
	// it in this process; Coordinators and TLS are not used.
	Backends []string
	Workers  int
	Conn     Conn
	// Pairs is, with Backends, the number of phases of each backend
	// other than memory; memory, the limit, runs Pairs+1 phases around
	// them (bench.Interleave), and each ratio to memory is the median of
	// Pairs. Without memory every backend runs Pairs phases.
	Pairs int
	// Output is text or json.
	Output string
}

// LookupResult is what a lookup benchmark measured.
type LookupResult struct {
	Lookups, Errors     int
	ErrorCodes          map[string]int
	Elapsed             time.Duration
	P50, P90, P99, P999 time.Duration
	Max                 time.Duration
}

// PerSecond returns the measured throughput.
func (r LookupResult) PerSecond() float64 { return float64(r.Lookups) / r.Elapsed.Seconds() }

// Validate checks the options of a run against running coordinators.
func (o LookupOptions) Validate() error {
	switch {
	case o.Concurrency < 1 || o.Concurrency > 1024:
		return fmt.Errorf("--concurrency %d: must be from 1 to 1024", o.Concurrency)
	case o.Duration < time.Second || o.Duration > time.Hour:
		return fmt.Errorf("--duration %s: must be from 1s to 1h", o.Duration)
	case o.Keys < 1:
		return fmt.Errorf("--keys %d: must be at least 1", o.Keys)
	case o.Replicas < 1 || o.Replicas > protocol.MaxReplicas:
		return fmt.Errorf("--replicas %d: must be from 1 to %d", o.Replicas, protocol.MaxReplicas)
	case o.Output != "" && o.Output != "text" && o.Output != "json":
		return fmt.Errorf("--output %q: must be text or json", o.Output)
	}
	for _, a := range o.Coordinators {
		if err := cluster.ValidateAddress("--coordinators", a, true); err != nil {
			return err
		}
	}
	return nil
}

// ValidateBackends checks the options of a self-contained run
// (LookupBackends); getenv looks up the environment (see Conn.Validate).
func (o *LookupOptions) ValidateBackends(getenv func(key string) string) error {
	seen := map[string]bool{}
	for _, b := range o.Backends {
		if b != config.BackendMemory && b != config.BackendEtcd && b != config.BackendKubernetes {
			return fmt.Errorf("--backend %q: must be memory, etcd or kubernetes", b)
		}
		if seen[b] {
			return fmt.Errorf("--backend %q: given twice", b)
		}
		seen[b] = true
	}
	if o.Workers < 1 || o.Workers > MaxWriters {
		return fmt.Errorf("--workers %d: must be from 1 to %d", o.Workers, MaxWriters)
	}
	if o.Pairs < 1 || o.Pairs > MaxPairs {
		return fmt.Errorf("--pairs %d: must be from 1 to %d", o.Pairs, MaxPairs)
	}
	if o.Replicas > o.Workers {
		return fmt.Errorf("--replicas %d: must be at most --workers %d", o.Replicas, o.Workers)
	}
	c := *o
	c.Coordinators = nil
	if err := c.Validate(); err != nil {
		return err
	}
	return o.Conn.Validate(o.Backends, getenv)
}

// Lookups runs the lookup benchmark against running coordinators.
func Lookups(ctx context.Context, o LookupOptions) (LookupResult, error) {
	r, err := bench.Lookups(ctx, bench.LookupOptions{Coordinators: o.Coordinators, Callers: o.Concurrency, Duration: o.Duration, Keys: o.Keys, Replicas: o.Replicas, TLS: o.TLS})
	if err != nil {
		return LookupResult{}, err
	}
	res := LookupResult{Lookups: r.Ops, Errors: r.FailureCount(), ErrorCodes: r.Failures, Elapsed: r.Elapsed,
		P50: r.P50(), P90: r.Quantile(.9), P99: r.P99(), P999: r.Quantile(.999), Max: r.Max()}
	if res.Lookups == 0 {
		return res, fmt.Errorf("no lookup succeeded (first failure: %v)", r.FirstErr)
	}
	return res, nil
}

// JSON returns the result in the form -o json prints.
func (r LookupResult) JSON(o LookupOptions) map[string]any {
	msf := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	codes := r.ErrorCodes
	if codes == nil {
		codes = map[string]int{}
	}
	return map[string]any{
		"coordinators": o.Coordinators, "concurrency": o.Concurrency, "replicas": o.Replicas,
		"lookups": r.Lookups, "errors": codes, "elapsedSeconds": r.Elapsed.Seconds(), "perSecond": r.PerSecond(),
		"p50Ms": msf(r.P50), "p90Ms": msf(r.P90), "p99Ms": msf(r.P99), "p999Ms": msf(r.P999), "maxMs": msf(r.Max),
	}
}

// Write prints the result as text, or as JSON when o.Output is json.
func (r LookupResult) Write(w io.Writer, o LookupOptions) error {
	if o.Output == "json" {
		return writeIndentedJSON(w, r.JSON(o))
	}
	_, err := fmt.Fprintf(w, "placement lookups against %s: %d connections, %s, replicas %d\n"+
		"  lookups      %d (%d errors)\n  throughput   %.0f lookups/s\n"+
		"  latency      p50 %s  p90 %s  p99 %s  p99.9 %s  max %s\n",
		strings.Join(o.Coordinators, ","), o.Concurrency, r.Elapsed.Round(time.Millisecond), o.Replicas,
		r.Lookups, r.Errors, r.PerSecond(), r.P50, r.P90, r.P99, r.P999, r.Max)
	for _, code := range slices.Sorted(maps.Keys(r.ErrorCodes)) {
		if err == nil {
			_, err = fmt.Fprintf(w, "  errors       %s: %d\n", code, r.ErrorCodes[code])
		}
	}
	return err
}

// LookupsReport is what `talon bench lookups --backend ...` measured: one
// row per backend, in the order given.
type LookupsReport struct {
	Workers      int          `json:"workers"`
	Concurrency  int          `json:"concurrency"`
	Replicas     int          `json:"replicas"`
	PhaseSeconds float64      `json:"phaseSeconds"`
	Pairs        int          `json:"pairs"`
	Backends     []LookupsRow `json:"backends"`
	Kept         bool         `json:"kept"`
}

// LookupsRow is one backend's lookups, pooled over its phases (Phases, in
// run order). RatioToMemory is the median, with its range, of its phases'
// rates over the mean of the memory phases either side of them
// (bench.PairRatios); nil when memory was not measured (memory's own row
// has none either).
type LookupsRow struct {
	Backend       string          `json:"backend"`
	Location      string          `json:"location"`
	Lookups       bench.Summary   `json:"lookups"`
	Phases        []bench.Summary `json:"phases"`
	RatioToMemory *bench.Spread   `json:"ratioToMemory,omitempty"`

	Result  bench.Result   `json:"-"`
	Results []bench.Result `json:"-"`
}

// LookupBackends measures lookups on each of o.Backends, each with Workers
// seeded records and one in-process coordinator of its own, in
// interleaved phases: every backend is set up first, then memory (the
// limit, when given) and the others take turns, memory first and last
// (bench.Interleave). It removes what it created unless o.Conn.Keep.
func LookupBackends(ctx context.Context, roles Roles, o LookupOptions, progress func(format string, a ...any), log *slog.Logger) (rep LookupsReport, err error) {
	env := newRunEnv(o.Conn, log)
	defer env.cleanup(ctx, progress, &err)
	rep = LookupsReport{Workers: o.Workers, Concurrency: o.Concurrency, Replicas: o.Replicas, PhaseSeconds: o.Duration.Seconds(), Pairs: o.Pairs, Kept: o.Conn.Keep}
	targets := make([]*lookupTarget, 0, len(o.Backends))
	defer func() {
		for _, t := range targets {
			err = errors.Join(err, t.coords.Stop())
		}
	}()
	for _, b := range o.Backends {
		t, err := setUpLookups(ctx, env, roles, b, o, progress, log)
		if err != nil {
			return rep, fmt.Errorf("%s: %w", b, err)
		}
		targets = append(targets, t)
	}
	if err := runLookupPhases(ctx, targets, o, progress); err != nil {
		return rep, err
	}
	rep.Backends = lookupRows(targets)
	return rep, nil
}

// lookupTarget is one backend's coordinator, ready for lookups, and the
// phases measured on it.
type lookupTarget struct {
	row     LookupsRow
	coords  *coordinators
	results []bench.Result
}

// setUpLookups seeds backend b and starts a coordinator on it, ready to
// answer lookups with o.Replicas owners.
func setUpLookups(ctx context.Context, env *runEnv, roles Roles, b string, o LookupOptions, progress func(string, ...any), log *slog.Logger) (*lookupTarget, error) {
	t := &lookupTarget{row: LookupsRow{Backend: b, Location: env.where(b)}}
	// The raw clients connect first: they check the connection settings
	// and create the namespace the store needs.
	switch b {
	case config.BackendEtcd:
		if _, err := env.etcdClient(ctx); err != nil {
			return nil, err
		}
	case config.BackendKubernetes:
		if _, err := env.kubeClient(ctx); err != nil {
			return nil, err
		}
	}
	cfg, err := env.coordinatorConfig(b, "bench-lookups-"+b, o.Workers, nil)
	if err != nil {
		return nil, err
	}
	cfg.Etcd.Prefix = env.etcdPrefix + "/lookups"
	progress("lookups on %s: seeding %d worker records (%s)", b, o.Workers, t.row.Location)
	s, err := roles.openStore(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	if err := bench.Seed(ctx, s, ClusterID, o.Workers, cfg.LeaseTTL); err != nil {
		s.Close()
		return nil, err
	}
	t.coords, err = startCoordinators(ctx, roles, []*config.Config{cfg}, []state.Store{s}, log)
	if err != nil {
		return nil, err
	}
	if err := waitForOwners(ctx, t.coords.Addrs(), o.Replicas); err != nil {
		return nil, errors.Join(err, t.coords.Stop())
	}
	return t, nil
}

// measure runs one phase of lookups on t.
func (t *lookupTarget) measure(ctx context.Context, o LookupOptions, phase string, progress func(string, ...any)) error {
	progress("lookups on %s %s: %d callers for %s through %s", t.row.Backend, phase, o.Concurrency, o.Duration, t.coords.Addrs()[0])
	res, err := bench.Lookups(ctx, bench.LookupOptions{Coordinators: t.coords.Addrs(), Callers: o.Concurrency, Duration: o.Duration, Keys: o.Keys, Replicas: o.Replicas})
	if err != nil {
		return fmt.Errorf("%s: %w", t.row.Backend, err)
	}
	t.results = append(t.results, res)
	return nil
}

// runLookupPhases measures the targets in turn: memory before, between
// and after the others' phases when it is among them, else every target
// o.Pairs times.
func runLookupPhases(ctx context.Context, targets []*lookupTarget, o LookupOptions, progress func(string, ...any)) error {
	var limit *lookupTarget
	var others []*lookupTarget
	for _, t := range targets {
		if t.row.Backend == config.BackendMemory {
			limit = t
		} else {
			others = append(others, t)
		}
	}
	each := func(ctx context.Context, i int) error {
		for _, t := range others {
			if err := t.measure(ctx, o, fmt.Sprintf("%d/%d", i+1, o.Pairs), progress); err != nil {
				return err
			}
		}
		return nil
	}
	if limit == nil {
		for i := range o.Pairs {
			if err := each(ctx, i); err != nil {
				return err
			}
		}
		return nil
	}
	return bench.Interleave(ctx, o.Pairs, func(ctx context.Context, i int) error {
		return limit.measure(ctx, o, fmt.Sprintf("%d/%d", i+1, o.Pairs+1), progress)
	}, each)
}

// lookupRows returns the targets' rows, pooled, with their ratios to
// memory when it was measured.
func lookupRows(targets []*lookupTarget) []LookupsRow {
	var mem []float64
	for _, t := range targets {
		if t.row.Backend == config.BackendMemory {
			mem = bench.Rates(t.results)
		}
	}
	rows := make([]LookupsRow, 0, len(targets))
	for _, t := range targets {
		r := t.row
		r.Results, r.Result = t.results, bench.Merge(t.results...)
		r.Lookups, r.Phases = r.Result.Summary(), summaries(t.results)
		if mem != nil && r.Backend != config.BackendMemory {
			s := bench.SpreadOf(bench.PairRatios(mem, bench.Rates(t.results)))
			r.RatioToMemory = &s
		}
		rows = append(rows, r)
	}
	return rows
}

// Write prints the report as one table, or JSON.
func (r LookupsReport) Write(w io.Writer, output string) error {
	if output == "json" {
		return writeIndentedJSON(w, r)
	}
	fmt.Fprintf(w, "placement lookups, %d workers seeded per backend, %d callers, replicas %d, %s phases, %d pairs\n\n",
		r.Workers, r.Concurrency, r.Replicas, time.Duration(r.PhaseSeconds*float64(time.Second)), r.Pairs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "backend\tlookups/s\tp50\tp99\tmax\tfailed\tphases\tvs memory\t\n")
	for _, b := range r.Backends {
		ratio := "-"
		if b.RatioToMemory != nil {
			ratio = b.RatioToMemory.String()
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%s\t%s\t%d\t%d\t%s\t\n", b.Backend, b.Result.PerSecond(), ms(b.Result.P50()), ms(b.Result.P99()), ms(b.Result.Max()), b.Result.FailureCount(), len(b.Results), ratio)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Backends) > 1 && slices.ContainsFunc(r.Backends, func(b LookupsRow) bool { return b.Backend == config.BackendMemory }) {
		fmt.Fprintf(w, "\nvs memory: median (min–max) of %d pairs, each phase against the mean of the memory phases before and after it\n", r.Pairs)
	}
	for _, b := range r.Backends {
		for _, code := range b.Result.FailureCodes() {
			fmt.Fprintf(w, "failures (%s): %s %d\n", b.Backend, code, b.Result.Failures[code])
		}
	}
	_, err := fmt.Fprintln(w)
	return err
}

// writeIndentedJSON writes v as indented JSON, the -o json form of the
// reports.
func writeIndentedJSON(w io.Writer, v any) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(v)
}

// waitForOwners waits up to 30 s until a lookup through coordinators finds
// replicas owners: a coordinator's first snapshot may not hold every
// seeded worker yet.
func waitForOwners(ctx context.Context, coordinators []string, replicas int) error {
	cl, err := client.New(client.Options{Coordinators: coordinators, Retries: -1})
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		p, err := cl.Lookup(ctx, "bench/warm-up#0", replicas)
		if err == nil && len(p.Owners) == replicas {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("lookup found %d owners, want %d", len(p.Owners), replicas)
		}
		if backoff.Sleep(ctx, 100*time.Millisecond) != nil {
			return fmt.Errorf("coordinator not answering lookups after 30s: %w", err)
		}
	}
}
