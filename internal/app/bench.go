package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/pki"
	"github.com/talonhq/talon/internal/protocol"
)

// BenchOptions configures `talon bench lookups`.
type BenchOptions struct {
	Coordinators []string
	Concurrency  int
	Duration     time.Duration
	Keys         int
	Replicas     int
	// TLS is the client configuration for the coordinators; nil talks to
	// a cluster without TLS.
	TLS *tls.Config
}

// BenchResult is what a lookup benchmark measured.
type BenchResult struct {
	Lookups, Errors     int
	ErrorCodes          map[string]int
	Elapsed             time.Duration
	P50, P90, P99, P999 time.Duration
	Max                 time.Duration
}

// PerSecond returns the measured throughput.
func (r BenchResult) PerSecond() float64 { return float64(r.Lookups) / r.Elapsed.Seconds() }

func newBenchCmd(env Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure a running cluster",
	}
	opts := BenchOptions{}
	var ctls clientTLS
	lookups := &cobra.Command{
		Use:   "lookups",
		Short: "Measure placement lookups per second over the control protocol",
		Long: `lookups sends placement lookups for random keys to the coordinators from
--concurrency connections for --duration, without the client-side cache, and
reports lookups per second and latency percentiles. Every lookup is answered
from a fresh, consistent store snapshot, so this measures the coordinator and
its store together. Run it against a test cluster: it is a load generator.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			creds, fromDir, err := ctls.resolve(cmd.Flags(), env.Environ)
			if err != nil {
				return err
			}
			if creds != nil {
				opts.TLS = creds.ClientConfig(pki.Expect{Roles: []pki.Role{pki.RoleCoordinator}})
			}
			if len(fromDir) > 0 && !cmd.Flags().Changed("coordinators") {
				opts.Coordinators = fromDir
			}
			if err := opts.validate(); err != nil {
				return &usageError{err}
			}
			res, err := BenchLookups(cmd.Context(), opts)
			if err != nil {
				return err
			}
			return res.Write(cmd.OutOrStdout(), opts)
		},
	}
	f := lookups.Flags()
	f.StringSliceVar(&opts.Coordinators, "coordinators", []string{"127.0.0.1:7400"}, "coordinator control addresses")
	f.IntVar(&opts.Concurrency, "concurrency", 16, "concurrent connections (1 to 1024)")
	f.DurationVar(&opts.Duration, "duration", 10*time.Second, "how long to run (1s to 1h)")
	f.IntVar(&opts.Keys, "keys", 100000, "distinct keys to look up")
	f.IntVar(&opts.Replicas, "replicas", 3, fmt.Sprintf("owners per lookup (1 to %d)", protocol.MaxReplicas))
	ctls.register(f)
	cmd.AddCommand(lookups)
	return cmd
}

func (o BenchOptions) validate() error {
	switch {
	case o.Concurrency < 1 || o.Concurrency > 1024:
		return fmt.Errorf("--concurrency %d: must be from 1 to 1024", o.Concurrency)
	case o.Duration < time.Second || o.Duration > time.Hour:
		return fmt.Errorf("--duration %s: must be from 1s to 1h", o.Duration)
	case o.Keys < 1:
		return fmt.Errorf("--keys %d: must be at least 1", o.Keys)
	case o.Replicas < 1 || o.Replicas > protocol.MaxReplicas:
		return fmt.Errorf("--replicas %d: must be from 1 to %d", o.Replicas, protocol.MaxReplicas)
	}
	for _, a := range o.Coordinators {
		if err := cluster.ValidateAddress("--coordinators", a, true); err != nil {
			return err
		}
	}
	return nil
}

// BenchLookups runs the lookup benchmark.
func BenchLookups(ctx context.Context, o BenchOptions) (BenchResult, error) {
	cl, err := client.New(client.Options{Coordinators: o.Coordinators, MaxIdleConns: o.Concurrency, Retries: -1, TLS: o.TLS})
	if err != nil {
		return BenchResult{}, err
	}
	defer cl.Close()
	if _, err := cl.Lookup(ctx, "warm-up", o.Replicas); err != nil {
		return BenchResult{}, fmt.Errorf("first lookup failed; is the cluster up with workers? %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, o.Duration)
	defer cancel()
	end, _ := ctx.Deadline()
	var (
		mu        sync.Mutex
		latencies []time.Duration
		res       BenchResult
		wg        sync.WaitGroup
	)
	res.ErrorCodes = map[string]int{}
	begin := time.Now()
	for i := range o.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(i), 1))
			var local []time.Duration
			errs := map[string]int{}
			// The clock, not ctx.Err, ends the loop: a connection deadline
			// can pass a moment before the context's timer fires.
			for time.Now().Before(end) {
				key := fmt.Sprintf("bench/object-%d#0", r.IntN(o.Keys))
				t0 := time.Now()
				_, err := cl.Lookup(ctx, key, o.Replicas)
				if err != nil {
					if time.Now().Before(end) {
						errs[errorCode(err)]++
					}
					continue
				}
				local = append(local, time.Since(t0))
			}
			mu.Lock()
			latencies = append(latencies, local...)
			for code, n := range errs {
				res.Errors += n
				res.ErrorCodes[code] += n
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(begin)
	res.Lookups = len(latencies)
	if res.Lookups == 0 {
		return res, errors.New("no lookup succeeded")
	}
	slices.Sort(latencies)
	q := func(p float64) time.Duration { return latencies[min(len(latencies)-1, int(p*float64(len(latencies))))] }
	res.P50, res.P90, res.P99, res.P999, res.Max = q(.5), q(.9), q(.99), q(.999), latencies[len(latencies)-1]
	return res, nil
}

// errorCode names an error's class for the summary.
func errorCode(err error) string {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe.Code.String()
	}
	if errors.Is(err, client.ErrNoCoordinator) {
		return "no_coordinator"
	}
	return "other"
}

// Write prints the result.
func (r BenchResult) Write(w io.Writer, o BenchOptions) error {
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
