package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/talonhq/talon/internal/backoff"
	"github.com/talonhq/talon/internal/bench"
	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/state"
)

// LookupsReport is what `talon bench lookups --backend ...` measured: one
// row per backend, in the order given.
type LookupsReport struct {
	Workers      int                 `json:"workers"`
	Concurrency  int                 `json:"concurrency"`
	Replicas     int                 `json:"replicas"`
	PhaseSeconds float64             `json:"phaseSeconds"`
	Backends     []LookupsBackendRow `json:"backends"`
	Kept         bool                `json:"kept"`
}

// LookupsBackendRow is one backend's lookups. RatioToMemory is zero when
// memory was not measured.
type LookupsBackendRow struct {
	Backend       string        `json:"backend"`
	Location      string        `json:"location"`
	Lookups       bench.Summary `json:"lookups"`
	RatioToMemory float64       `json:"ratioToMemory,omitempty"`

	Result bench.Result `json:"-"`
}

func (o *BenchOptions) validateBackends(environ []string) error {
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
	if o.Workers < 1 || o.Workers > maxBenchWriters {
		return fmt.Errorf("--workers %d: must be from 1 to %d", o.Workers, maxBenchWriters)
	}
	if o.Replicas > o.Workers {
		return fmt.Errorf("--replicas %d: must be at most --workers %d", o.Replicas, o.Workers)
	}
	c := *o
	c.Coordinators = nil
	if err := c.validate(); err != nil {
		return err
	}
	return o.Conn.validate(o.Backends, environ)
}

// BenchLookupBackends measures lookups on each of o.Backends in turn, each
// with Workers seeded records and one in-process coordinator of its own,
// and removes what it created unless o.Conn.Keep.
func BenchLookupBackends(ctx context.Context, o BenchOptions, progress func(format string, a ...any), log *slog.Logger) (rep LookupsReport, err error) {
	env := newBenchEnv(o.Conn, log)
	defer env.cleanup(ctx, progress, &err)
	rep = LookupsReport{Workers: o.Workers, Concurrency: o.Concurrency, Replicas: o.Replicas, PhaseSeconds: o.Duration.Seconds(), Kept: o.Conn.Keep}
	for _, b := range o.Backends {
		row, err := lookupsOn(ctx, env, b, o, progress, log)
		if err != nil {
			return rep, fmt.Errorf("%s: %w", b, err)
		}
		rep.Backends = append(rep.Backends, row)
	}
	if i := slices.IndexFunc(rep.Backends, func(r LookupsBackendRow) bool { return r.Backend == config.BackendMemory }); i >= 0 {
		if m := rep.Backends[i].Result.PerSecond(); m > 0 {
			for j := range rep.Backends {
				rep.Backends[j].RatioToMemory = rep.Backends[j].Result.PerSecond() / m
			}
		}
	}
	return rep, nil
}

// lookupsOn seeds backend b, runs a coordinator on it and measures.
func lookupsOn(ctx context.Context, env *benchEnv, b string, o BenchOptions, progress func(string, ...any), log *slog.Logger) (LookupsBackendRow, error) {
	row := LookupsBackendRow{Backend: b, Location: env.where(b)}
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
	s, err := openBenchStore(ctx, cfg, log)
	if err != nil {
		return row, err
	}
	if err := bench.Seed(ctx, s, benchClusterID, o.Workers, cfg.LeaseTTL); err != nil {
		s.Close()
		return row, err
	}
	coords, err := startCoordinators(ctx, []*config.Config{cfg}, []state.Store{s}, log)
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
// bench reports.
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
