package app

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/talonhq/talon/internal/bench"
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

	// Backends, when set, selects the self-contained mode: for each
	// backend (memory, etcd, kubernetes) Workers simulated worker records
	// are seeded into a store of its own and one coordinator is started on
	// it in this process; Coordinators and TLS are not used.
	Backends []string
	Workers  int
	Conn     BenchBackendOptions
	// Output is text or json.
	Output string
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
		Short: "Measure a running cluster, or the backends and Talon side by side",
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
its store together. Run it against a test cluster: it is a load generator.

With --backend (repeatable: memory, etcd, kubernetes) it needs no running
cluster: for each backend it seeds --workers simulated worker records into a
store of its own (etcd under PREFIX/run-ID, PREFIX from --etcd-prefix;
Kubernetes in a namespace NAMESPACE-ID, from --kube-namespace), starts one coordinator on it in this process on
loopback, measures lookups the same way, and prints one table with each
backend's lookups/s, p50 and p99 and the ratio to memory. What it created is
removed at the end unless --keep.`,
		Example: `  talon bench lookups --dir /tmp/talon-dev --duration 5s
  talon bench lookups --coordinators 10.0.0.5:7400 --tls-ca-file ca.pem --tls-cert-file client.pem --tls-key-file client-key.pem
  talon bench lookups --backend memory --backend etcd --etcd-endpoints 127.0.0.1:2379 --duration 5s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(opts.Backends) > 0 {
				for _, name := range []string{"coordinators", "dir", "tls-ca-file", "tls-cert-file", "tls-key-file", "insecure-control-plane"} {
					if cmd.Flags().Changed(name) {
						return &usageError{fmt.Errorf("--%s and --backend: --backend starts its own coordinators; give one or the other", name)}
					}
				}
				if err := opts.validateBackends(env.Environ); err != nil {
					return &usageError{err}
				}
				progress := func(format string, a ...any) { fmt.Fprintf(cmd.ErrOrStderr(), format+"\n", a...) }
				log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelError}))
				rep, err := BenchLookupBackends(cmd.Context(), opts, progress, log)
				if err != nil {
					return err
				}
				return rep.Write(cmd.OutOrStdout(), opts.Output)
			}
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
			if opts.Output == "json" {
				return writeIndentedJSON(cmd.OutOrStdout(), res.json(opts))
			}
			return res.Write(cmd.OutOrStdout(), opts)
		},
	}
	f := lookups.Flags()
	f.StringSliceVar(&opts.Coordinators, "coordinators", []string{"127.0.0.1:7400"}, "coordinator control addresses")
	f.IntVar(&opts.Concurrency, "concurrency", 16, "concurrent connections (1 to 1024)")
	f.DurationVar(&opts.Duration, "duration", 10*time.Second, "how long to run (1s to 1h); per backend with --backend")
	f.IntVar(&opts.Keys, "keys", 100000, "distinct keys to look up")
	f.IntVar(&opts.Replicas, "replicas", 3, fmt.Sprintf("owners per lookup (1 to %d)", protocol.MaxReplicas))
	f.StringArrayVar(&opts.Backends, "backend", nil, "measure this backend with a coordinator of its own instead of --coordinators: memory, etcd or kubernetes (repeatable)")
	f.IntVar(&opts.Workers, "workers", 1000, fmt.Sprintf("with --backend: simulated worker records seeded into each store (1 to %d)", maxBenchWriters))
	f.StringVarP(&opts.Output, "output", "o", "text", "output format: text or json")
	ctls.register(f)
	opts.Conn.register(f)
	cmd.AddCommand(lookups, newBenchHeartbeatsCmd(env))
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

// BenchLookups runs the lookup benchmark against running coordinators.
func BenchLookups(ctx context.Context, o BenchOptions) (BenchResult, error) {
	r, err := bench.Lookups(ctx, bench.LookupOptions{Coordinators: o.Coordinators, Callers: o.Concurrency, Duration: o.Duration, Keys: o.Keys, Replicas: o.Replicas, TLS: o.TLS})
	if err != nil {
		return BenchResult{}, err
	}
	res := BenchResult{Lookups: r.Ops, Errors: r.FailureCount(), ErrorCodes: r.Failures, Elapsed: r.Elapsed,
		P50: r.P50(), P90: r.Quantile(.9), P99: r.P99(), P999: r.Quantile(.999), Max: r.Max()}
	if res.Lookups == 0 {
		return res, fmt.Errorf("no lookup succeeded (first failure: %v)", r.FirstErr)
	}
	return res, nil
}

// json returns the result in the form -o json prints.
func (r BenchResult) json(o BenchOptions) map[string]any {
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
