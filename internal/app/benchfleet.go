package app

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/talonhq/talon/internal/bench/harness"
)

func newBenchFleetCmd() *cobra.Command {
	opts := harness.FleetProcess{}
	cmd := &cobra.Command{
		Use:   "fleet --coordinators HOST:PORT,...",
		Short: "Run simulated workers that register and heartbeat at an interval, open loop",
		Long: `fleet registers --workers simulated workers (a typical 1.5 KB record each,
over a connection of its own) through the coordinators, worker w through
the (w mod N)th address, then has each send a heartbeat once per
--interval, open loop: the heartbeats are spread evenly over the interval,
whatever the answers' latency, as a real fleet's are, and a slow answer
delays only its own worker (a heartbeat time that comes while the
worker's previous heartbeat is unanswered is skipped and counted as
missed). A refused heartbeat is counted by its code and not retried.

It stops after --duration, or at SIGINT or SIGTERM with --duration 0, and
prints on stdout the heartbeats accepted per second against the expected
rate (workers / interval), their latency percentiles, and the failures by
code (-o json, the default, or text). Progress goes to stderr; once every
worker has registered it writes a line starting "fleet: registered", and
with --hold then waits for a line on stdin before the first heartbeat
(talon bench heartbeats --fleet starts several fleets and releases them
together).

The coordinators must run with --insecure-control-plane (a simulated
worker has no certificate of its own) and with --max-records and
--max-connections above the fleet's size. The records stay in the store
until their leases expire. It is a load generator: run it against a test
cluster.`,
		Example: `  talon bench fleet --coordinators 127.0.0.1:7400,127.0.0.1:7410 --workers 5000 --duration 1m
  talon bench fleet --coordinators 127.0.0.1:7400 --workers 200 --interval 1s --duration 0 -o text`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.Validate(); err != nil {
				return &usageError{err}
			}
			progress := func(format string, a ...any) { fmt.Fprintf(cmd.ErrOrStderr(), format+"\n", a...) }
			rep, err := harness.RunFleet(cmd.Context(), opts, cmd.InOrStdin(), progress)
			if err != nil {
				return err
			}
			return harness.WriteFleet(cmd.OutOrStdout(), rep, opts.Output)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&opts.Coordinators, "coordinators", []string{"127.0.0.1:7400"}, "coordinator control addresses")
	f.IntVar(&opts.Workers, "workers", 1000, fmt.Sprintf("simulated workers (1 to %d, one connection each)", harness.MaxFleetWorkers))
	f.DurationVar(&opts.Interval, "interval", harness.HeartbeatInterval, fmt.Sprintf("each worker's heartbeat interval (%s to %s); the coordinators' heartbeat-interval", harness.MinFleetInterval, harness.MaxFleetInterval))
	f.DurationVar(&opts.Duration, "duration", time.Minute, fmt.Sprintf("how long to heartbeat after registering (1s to %s; 0: until SIGINT or SIGTERM)", harness.MaxFleetDuration))
	f.StringVar(&opts.ClusterID, "cluster-id", harness.ClusterID, "the coordinators' cluster ID")
	f.StringVar(&opts.NodePrefix, "node-prefix", "fleet-", "start of the workers' node IDs (then 5 digits); fleets sharing a cluster need different ones")
	f.BoolVar(&opts.Hold, "hold", false, "once registered, wait for a line on stdin before heartbeating")
	f.StringVar(&opts.Source, "source-address", "", "local IP address the workers dial from (a coordinator takes at most half its max-connections from one address: give fleets different ones, such as 127.0.1.1 and 127.0.1.2 on loopback)")
	f.StringVarP(&opts.Output, "output", "o", "json", "output format: json or text")
	return cmd
}
