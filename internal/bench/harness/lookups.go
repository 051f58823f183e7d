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
	Backends     []LookupsRow `json:"backends"`
	Kept         bool         `json:"kept"`
}

// LookupsRow is one backend's lookups. RatioToMemory is zero when memory
// was not measured.
type LookupsRow struct {
	Backend       string        `json:"backend"`
	Location      string        `json:"location"`
	Lookups       bench.Summary `json:"lookups"`
	RatioToMemory float64       `json:"ratioToMemory,omitempty"`

	Result bench.Result `json:"-"`
}

// LookupBackends measures lookups on each of o.Backends in turn, each
// with Workers seeded records and one in-process coordinator of its own,
// and removes what it created unless o.Conn.Keep.
func LookupBackends(ctx context.Context, roles Roles, o LookupOptions, progress func(format string, a ...any), log *slog.Logger) (rep LookupsReport, err error) {
	env := newRunEnv(o.Conn, log)
	defer env.cleanup(ctx, progress, &err)
	rep = LookupsReport{Workers: o.Workers, Concurrency: o.Concurrency, Replicas: o.Replicas, PhaseSeconds: o.Duration.Seconds(), Kept: o.Conn.Keep}
	for _, b := range o.Backends {
		row, err := lookupsOn(ctx, env, roles, b, o, progress, log)
		if err != nil {
			return rep, fmt.Errorf("%s: %w", b, err)
		}
		rep.Backends = append(rep.Backends, row)
	}
	if i := slices.IndexFunc(rep.Backends, func(r LookupsRow) bool { return r.Backend == config.BackendMemory }); i >= 0 {
		if m := rep.Backends[i].Result.PerSecond(); m > 0 {
			for j := range rep.Backends {
				rep.Backends[j].RatioToMemory = rep.Backends[j].Result.PerSecond() / m
			}
		}
	}
	return rep, nil
}

// lookupsOn seeds backend b, runs a coordinator on it and measures.
func lookupsOn(ctx context.Context, env *runEnv, roles Roles, b string, o LookupOptions, progress func(string, ...any), log *slog.Logger) (LookupsRow, error) {
	row := LookupsRow{Backend: b, Location: env.where(b)}
	// The raw clients connect first: they check the connection settings
	// and create the namespace the store needs.
	switch b {
	case config.BackendEtcd:
		if _, err := env.etcdClient(ctx); err != nil {
			return row, err
		}
	case config.BackendKubernetes:
		if _, err := env.kubeClient(ctx); err != nil {
			return row, err
		}
	}
	cfg, err := env.coordinatorConfig(b, "bench-lookups-"+b, o.Workers)
	if err != nil {
		return row, err
	}
	cfg.Etcd.Prefix = env.etcdPrefix + "/lookups"
	progress("lookups on %s: seeding %d worker records (%s)", b, o.Workers, row.Location)
	s, err := roles.openStore(ctx, cfg, log)
	if err != nil {
		return row, err
	}
	if err := bench.Seed(ctx, s, ClusterID, o.Workers, cfg.LeaseTTL); err != nil {
		s.Close()
		return row, err
	}
	coords, err := startCoordinators(ctx, roles, []*config.Config{cfg}, []state.Store{s}, log)
	if err != nil {
		return row, err
	}
	progress("lookups on %s: %d callers for %s through %s", b, o.Concurrency, o.Duration, coords.Addrs()[0])
	lo := bench.LookupOptions{Coordinators: coords.Addrs(), Callers: o.Concurrency, Duration: o.Duration, Keys: o.Keys, Replicas: o.Replicas}
	if err = waitForOwners(ctx, lo.Coordinators, o.Replicas); err == nil {
		row.Result, err = bench.Lookups(ctx, lo)
	}
	err = errors.Join(err, coords.Stop())
	row.Lookups = row.Result.Summary()
	return row, err
}

// Write prints the report as one table, or JSON.
func (r LookupsReport) Write(w io.Writer, output string) error {
	if output == "json" {
		return writeIndentedJSON(w, r)
	}
	fmt.Fprintf(w, "placement lookups, %d workers seeded per backend, %d callers, replicas %d, %s per backend\n\n",
		r.Workers, r.Concurrency, r.Replicas, time.Duration(r.PhaseSeconds*float64(time.Second)))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "backend\tlookups/s\tp50\tp99\tmax\tfailed\tvs memory\t\n")
	for _, b := range r.Backends {
		ratio := "-"
		if b.RatioToMemory > 0 {
			ratio = fmt.Sprintf("%.2f", b.RatioToMemory)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%s\t%s\t%d\t%s\t\n", b.Backend, b.Result.PerSecond(), ms(b.Result.P50()), ms(b.Result.P99()), ms(b.Result.Max()), b.Result.FailureCount(), ratio)
	}
	if err := tw.Flush(); err != nil {
		return err
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
