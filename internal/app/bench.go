package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
	"time"

	"github.com/spf13/cobra"

	"github.com/talonhq/talon/internal/bench"
	"github.com/talonhq/talon/internal/bench/harness"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/pki"
	"github.com/talonhq/talon/internal/protocol"
	"github.com/talonhq/talon/internal/state"
)

func newBenchCmd(env Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure a running cluster, or the backends and Talon side by side",
	}
	opts := harness.LookupOptions{}
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
backend's lookups/s, p50 and p99 and the ratio to memory. The backends are
measured in turns after all are set up: memory, then each of the others,
then memory again, --pairs times, so that each ratio to memory compares a
phase with the memory phases just before and after it; the ratio printed is
the median of the --pairs ratios with their range, "median (min–max)". What
it created is removed at the end unless --keep.`,
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
				if err := opts.ValidateBackends(getenvFrom(env.Environ)); err != nil {
					return &usageError{err}
				}
				progress := func(format string, a ...any) { fmt.Fprintf(cmd.ErrOrStderr(), format+"\n", a...) }
				log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelError}))
				rep, err := harness.LookupBackends(cmd.Context(), BenchRoles(), opts, progress, log)
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
			if err := opts.Validate(); err != nil {
				return &usageError{err}
			}
			res, err := harness.Lookups(cmd.Context(), opts)
			if err != nil {
				return err
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
	f.IntVar(&opts.Pairs, "pairs", harness.DefaultPairs, fmt.Sprintf("with --backend: phases of each backend other than memory, memory running one more around them; each ratio to memory is their median (1 to %d)", harness.MaxPairs))
	f.IntVar(&opts.Workers, "workers", 1000, fmt.Sprintf("with --backend: simulated worker records seeded into each store (1 to %d)", harness.MaxWriters))
	f.StringVarP(&opts.Output, "output", "o", "text", "output format: text or json")
	ctls.register(f)
	opts.Conn.RegisterFlags(f)
	cmd.AddCommand(lookups, newBenchHeartbeatsCmd(env), newBenchFleetCmd())
	return cmd
}

func newBenchHeartbeatsCmd(env Env) *cobra.Command {
	opts := harness.HeartbeatOptions{}
	fo := harness.FleetOptions{}
	var cpuProfile string
	cmd := &cobra.Command{
		Use:   "heartbeats --backend etcd|kubernetes",
		Short: "Measure heartbeats through coordinators against the backend's raw ceiling, in one run",
		Long: `heartbeats measures, in one run and at the same concurrency (--writers),
the backend's raw ceiling for what a heartbeat costs Talon's store and
heartbeats through real coordinators, in interleaved phases: raw, talon,
raw, talon, ..., raw, with --pairs talon phases. Each talon phase is
compared with the mean of the raw phases just before and after it, and the
ratio printed is the median of those --pairs ratios with their range,
"median (min–max)", so that a drift of the machine's speed during the run
moves both sides of each ratio alike.

The raw phase issues directly with the backend's client what Talon's store
issues per heartbeat (--mix renew, the default). A heartbeat that changes
nothing only renews the record's lease; the record is written once per
--status-interval (default 1m, 12 heartbeats at the 5s heartbeat interval).
On etcd that is 11 lease keepalives (one per writer's lease, on the writer's
own LeaseKeepAlive stream) to 1 transaction comparing the key's ModRevision
and putting the typical record's JSON (about 1.5 KB) with its lease; on
Kubernetes 11 JSON merge patches of the Lease's renewTime and
talon.io/renew-seq (about 140 bytes) to 1 merge patch of the status
annotation, each conditioned on the resourceVersion. --mix write writes the
record on every heartbeat instead (the etcd transaction; on Kubernetes an
update of the whole Lease): the ceiling before lease renewals. --mix both
measures both ceilings in every raw phase. --raw-streams N has the raw
etcd writers share N LeaseKeepAlive streams, several keepalives in
flight on each, as Talon's store spreads its keepalives over 4, instead
of a stream each.

The talon phase is Talon's heartbeat path: --coordinators-count coordinators
started in this process on loopback against the same backend (heartbeat
interval 5s, --status-interval), and simulated workers that register once,
before the first phase, and then heartbeat back to back over the control
protocol in each talon phase. After an unavailable answer a worker backs off
about 50 ms (with jitter), as a real one does; those are counted as backed
off, apart from failures.

It prints every phase and each side pooled, with ops/s, p50, p99 and max
latency, failures, and the heartbeats that only renewed a lease (raw: the
writers' count; talon: the coordinators' stores'), then the ratios, and what
each side created (etcd: leases granted; Kubernetes: Lease objects). The run
works under the etcd prefix PREFIX/run-ID (PREFIX from --etcd-prefix) or in a
namespace NAMESPACE-ID (from --kube-namespace) and removes it at the end
unless --keep. Results go to stdout, progress to
stderr. It is a load generator: run it against a test backend.

With --fleet SIZE,... it measures a fleet instead, out of process and
open loop, as production sees one: first the raw ceiling, one phase of
at most 10s at --writers, then for each size --coordinators-count
coordinator processes of this binary (talon coordinator, without TLS, on
--coordinator-host at random ports) on an empty cluster of their own,
and the workers in fleet processes (talon bench fleet, at most 10,000
workers each, a connection per worker). Once every worker has registered
and the cluster has idled a few seconds, the workers heartbeat every
--interval (default 5s, the coordinators' heartbeat-interval) for
--duration; placement lookups at --lookup-rate a second run in the
second half. A row per size gives the heartbeats accepted per second
against those expected (workers / interval) and against the raw ceiling,
the failed and missed heartbeats, the coordinators' CPU seconds per
1,000 heartbeats (over the first half, heartbeats alone, from
/proc/PID/stat) beside the cores they idle at, the fleets' and, with
--store-pid, the backend's, the coordinators' resident set growth per
worker over the empty cluster (/proc/PID/status), heartbeat and lookup
p99 and how long registering took. On Kubernetes each coordinator's
--kube-qps is raised to half as much again as its share of the
heartbeats when that is more. Linux only (it reads /proc).`,
		Example: `  talon bench heartbeats --backend etcd --etcd-endpoints 127.0.0.1:2379 --duration 10s
  talon bench heartbeats --backend etcd --mix both --pairs 5
  talon bench heartbeats --backend kubernetes --kubeconfig ~/.kube/config -o json
  talon bench heartbeats --backend etcd --fleet 1000,5000,20000 --duration 1m --store-pid "$(pgrep -x etcd)"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			progress := func(format string, a ...any) { fmt.Fprintf(cmd.ErrOrStderr(), format+"\n", a...) }
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelError}))
			if cmd.Flags().Changed("fleet") {
				fo.HeartbeatOptions = opts
				return benchFleetRun(cmd, env, &fo, progress, log)
			}
			for _, name := range []string{"interval", "lookup-rate"} {
				if cmd.Flags().Changed(name) {
					return &usageError{fmt.Errorf("--%s: only with --fleet", name)}
				}
			}
			if err := opts.Validate(getenvFrom(env.Environ)); err != nil {
				return &usageError{err}
			}
			if cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return fmt.Errorf("--cpuprofile %q: %w", cpuProfile, err)
				}
				defer f.Close()
				opts.TalonPhase = func() func() {
					if err := pprof.StartCPUProfile(f); err != nil {
						progress("no CPU profile: %v", err)
						return func() {}
					}
					return func() {
						pprof.StopCPUProfile()
						progress("CPU profile of the first talon phase (coordinators and simulated workers, this process) written to %s", cpuProfile)
					}
				}
			}
			rep, err := harness.Heartbeats(cmd.Context(), BenchRoles(), opts, progress, log)
			if err != nil {
				return err
			}
			return rep.Write(cmd.OutOrStdout(), opts.Output)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Backend, "backend", "", "backend to measure: etcd or kubernetes (required)")
	f.IntVar(&opts.Writers, "writers", 0, fmt.Sprintf("simulated workers, the concurrency of both phases (default %d on etcd, %d on kubernetes; 1 to %d)", harness.DefaultEtcdWriters, harness.DefaultKubeWriters, harness.MaxWriters))
	f.IntVar(&opts.Coordinators, "coordinators-count", 2, fmt.Sprintf("coordinators to start in this process; with --fleet, coordinator processes (1 to %d)", harness.MaxCoordinators))
	f.DurationVar(&opts.Duration, "duration", 10*time.Second, "length of each phase (1s to 1h); with --fleet of each row, at least twice --interval")
	f.IntVar(&opts.Pairs, "pairs", harness.DefaultPairs, fmt.Sprintf("talon phases, each between two raw phases; the ratios are their median (1 to %d)", harness.MaxPairs))
	f.StringVar(&opts.Mix, "mix", string(bench.MixRenew), "raw ceiling: renew (lease renewals and a record write per status interval, as Talon's store), write (a record write every heartbeat) or both")
	f.DurationVar(&opts.StatusInterval, "status-interval", cluster.DefaultStatusInterval, "the coordinators' status-interval, and so the renew mix's: the record is written once per interval (0: every heartbeat; else 5s to 1h)")
	f.StringVarP(&opts.Output, "output", "o", "text", "output format: text or json")
	f.IntVar(&opts.RawStreams, "raw-streams", 0, "on etcd: LeaseKeepAlive streams the raw writers share, several keepalives in flight on each, as Talon's store spreads its keepalives over a few (0: a stream per writer; at most --writers)")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the first talon phase (this process: coordinators and simulated workers) to this file, for go tool pprof")
	f.IntSliceVar(&fo.Sizes, "fleet", nil, fmt.Sprintf("fleet mode: for each of these fleet sizes (1 to %d), coordinator processes and simulated workers in processes of their own heartbeating every --interval, open loop, for --duration", harness.MaxFleetSize))
	f.DurationVar(&fo.Interval, "interval", harness.HeartbeatInterval, fmt.Sprintf("with --fleet: the workers' and coordinators' heartbeat interval (%s to %s)", harness.MinFleetInterval, harness.MaxFleetInterval))
	f.IntVar(&fo.LookupRate, "lookup-rate", harness.DefaultLookupRate, fmt.Sprintf("with --fleet: placement lookups per second sent while each fleet runs, for their p99 (0 to %d)", harness.MaxLookupRate))
	f.IntSliceVar(&fo.StorePIDs, "store-pid", nil, "with --fleet: the backend's process IDs on this machine (etcd; kube-apiserver and its etcd), to report their CPU seconds per 1,000 operations too")
	f.StringVar(&fo.Host, "coordinator-host", "127.0.0.1", "with --fleet: the address the coordinator processes listen on (random ports)")
	opts.Conn.RegisterFlags(f)
	return cmd
}

// benchFleetRun runs the fleet mode of talon bench heartbeats (--fleet):
// coordinators and fleets are processes of this binary.
func benchFleetRun(cmd *cobra.Command, env Env, fo *harness.FleetOptions, progress func(format string, a ...any), log *slog.Logger) error {
	for _, name := range []string{"pairs", "cpuprofile"} {
		if cmd.Flags().Changed(name) {
			return &usageError{fmt.Errorf("--%s and --fleet: the fleet mode measures one raw phase and a row per size; profile a coordinator with its own tools", name)}
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("--fleet runs this binary's coordinators and fleets: %w", err)
	}
	fo.Talon = exe
	if err := fo.ValidateFleet(getenvFrom(env.Environ)); err != nil {
		return &usageError{err}
	}
	rep, err := harness.Fleet(cmd.Context(), *fo, progress, log)
	if len(rep.Rows) > 0 {
		// What was measured is printed even when a size could not be.
		err = errors.Join(err, rep.Write(cmd.OutOrStdout(), fo.Output))
	}
	return err
}

// BenchRoles opens stores and builds coordinators for package harness as
// this package wires a coordinator process (without the UI).
func BenchRoles() harness.Roles {
	return harness.Roles{
		OpenStore: OpenStore,
		Coordinator: func(ctx context.Context, cfg *config.Config, store state.Store, log *slog.Logger) (harness.Coordinator, error) {
			p, err := NewCoordinator(ctx, cfg, store, nil, log)
			if err != nil {
				return nil, err
			}
			return p, nil
		},
	}
}

// getenvFrom returns a lookup in environ, for the harness's validation.
func getenvFrom(environ []string) func(key string) string {
	return func(key string) string { return lookupEnv(environ, key) }
}
