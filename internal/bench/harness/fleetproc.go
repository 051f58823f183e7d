package harness

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/talonhq/talon/internal/bench"
	"github.com/talonhq/talon/internal/cluster"
)

// Bounds of `talon bench fleet`.
const (
	// MaxFleetWorkers bounds --workers of one fleet process: every
	// simulated worker holds a connection, and so a file descriptor, of
	// its own. Fleet runs of more start several fleet processes.
	MaxFleetWorkers = 10000
	// MinFleetInterval and MaxFleetInterval bound --interval.
	MinFleetInterval = time.Second
	MaxFleetInterval = time.Minute
	// MaxFleetDuration bounds --duration.
	MaxFleetDuration = 24 * time.Hour
)

// FleetRegistered starts the line a fleet process writes to stderr once
// every worker has registered; with --hold it then waits for a line on
// stdin before the first heartbeat (FleetProcess.Hold).
const FleetRegistered = "fleet: registered"

// FleetProcess configures `talon bench fleet`: simulated workers in a
// process of their own (bench.Fleet).
type FleetProcess struct {
	Coordinators []string
	Workers      int
	Interval     time.Duration
	// Duration is how long the workers heartbeat; zero until the process
	// is told to stop (SIGINT or SIGTERM).
	Duration   time.Duration
	ClusterID  string
	NodePrefix string
	// Hold makes the fleet wait, once registered, for a line on stdin
	// before heartbeating: a harness starts several fleets and releases
	// them together.
	Hold   bool
	Output string
	// Source, when set, is the local IP address the workers dial from
	// (--source-address).
	Source string
}

// Validate checks the options of `talon bench fleet`.
func (o FleetProcess) Validate() error {
	switch {
	case len(o.Coordinators) == 0:
		return errors.New("--coordinators is empty: the fleet needs at least one coordinator address")
	case o.Workers < 1 || o.Workers > MaxFleetWorkers:
		return fmt.Errorf("--workers %d: must be from 1 to %d (one connection each; start more fleets for more)", o.Workers, MaxFleetWorkers)
	case o.Interval < MinFleetInterval || o.Interval > MaxFleetInterval:
		return fmt.Errorf("--interval %s: must be from %s to %s", o.Interval, MinFleetInterval, MaxFleetInterval)
	case o.Duration != 0 && (o.Duration < time.Second || o.Duration > MaxFleetDuration):
		return fmt.Errorf("--duration %s: must be 0 (until SIGINT or SIGTERM) or from 1s to %s", o.Duration, MaxFleetDuration)
	case o.Output != "text" && o.Output != "json":
		return fmt.Errorf("--output %q: must be text or json", o.Output)
	}
	return o.validateAddresses()
}

// validateAddresses checks the addresses and names of the options.
func (o FleetProcess) validateAddresses() error {
	for _, a := range o.Coordinators {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return fmt.Errorf("--coordinators %q: must be host:port", a)
		}
	}
	if o.Source != "" && net.ParseIP(o.Source) == nil {
		return fmt.Errorf("--source-address %q: must be an IP address of this host", o.Source)
	}
	if err := cluster.ValidateID("--cluster-id", o.ClusterID); err != nil {
		return err
	}
	// The node IDs are the prefix and five digits.
	return cluster.ValidateID("--node-prefix", o.NodePrefix+"00000")
}

// RunFleet runs the fleet of o (bench.Fleet) and returns its report.
// progress receives the registration line (FleetRegistered); with o.Hold
// the heartbeats start once a line can be read from stdin (or it ends).
func RunFleet(ctx context.Context, o FleetProcess, stdin io.Reader, progress func(format string, a ...any)) (bench.FleetReport, error) {
	fo := bench.FleetOptions{Coordinators: o.Coordinators, ClusterID: o.ClusterID, NodePrefix: o.NodePrefix, Workers: o.Workers,
		Interval: o.Interval, Duration: o.Duration, Source: o.Source}
	var cpu0 time.Duration
	fo.Registered = func(took time.Duration) error {
		progress("%s %d workers through %d coordinators in %s", FleetRegistered, o.Workers, len(o.Coordinators), took.Round(time.Millisecond))
		defer func() { cpu0 = selfCPU() }()
		if !o.Hold {
			return nil
		}
		line := make(chan error, 1)
		go func() {
			_, err := bufio.NewReader(stdin).ReadString('\n')
			line <- err
		}()
		select {
		case <-line:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	rep, err := bench.Fleet(ctx, fo)
	if cpu0 > 0 {
		rep.CPUSeconds = (selfCPU() - cpu0).Seconds()
	}
	return rep, err
}

// selfCPU is this process's CPU time so far, 0 where /proc cannot tell.
func selfCPU() time.Duration {
	u, err := readUsage(os.Getpid())
	if err != nil {
		return 0
	}
	return u.CPU
}

// WriteFleet prints a fleet's report as JSON or as a few lines of text.
func WriteFleet(w io.Writer, rep bench.FleetReport, output string) error {
	if output == "json" {
		return writeIndentedJSON(w, rep)
	}
	h := rep.Heartbeats
	fmt.Fprintf(w, "fleet: %d workers every %s through %d coordinators (registered in %.1fs)\n", rep.Workers,
		time.Duration(rep.IntervalSeconds*float64(time.Second)), len(rep.Coordinators), rep.RegisterSeconds)
	fmt.Fprintf(w, "heartbeats accepted: %d in %.1fs, %.1f/s of %.1f/s expected; p50 %.2fms p99 %.2fms max %.2fms\n",
		h.Ops, h.ElapsedS, h.PerSecond, rep.ExpectedPerSecond, h.P50Ms, h.P99Ms, h.MaxMs)
	fmt.Fprintf(w, "sent %d, missed %d (previous heartbeat still unanswered)\n", rep.Sent, rep.Missed)
	writeFailures(w, "heartbeats", rep.Result.Result)
	return nil
}
