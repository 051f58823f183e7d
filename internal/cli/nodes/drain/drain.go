// Package drain implements `talonctl nodes drain`.
package drain

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cli/cmdutil"
	"github.com/talonhq/talon/internal/cli/nodes/cordon"
)

// DrainOptions are the parsed arguments and flags of `nodes drain`.
type DrainOptions struct {
	IO           *cmdutil.IOStreams
	Client       func() (*apiv1.Client, error)
	Coordinators func(context.Context) ([]*cmdutil.Endpoint, error, error)

	Targets cordon.Targets
	Persist bool
	DryRun  bool
	Timeout time.Duration
}

// NewCmdDrain returns the command; runF replaces its run function in tests.
func NewCmdDrain(f *cmdutil.Factory, runF func(*DrainOptions) error) *cobra.Command {
	opts := &DrainOptions{IO: &f.IO, Client: f.Client, Coordinators: f.Coordinators}
	cmd := &cobra.Command{
		Use:   "drain [WORKER...] [-l SELECTOR]",
		Short: "Cordon workers and wait until no coordinator places on them and they serve nothing",
		Long: `Cordon each worker through the coordinators (see talonctl nodes cordon),
then wait until every coordinator that answers reads it cordoned (so none
places on it any more) and the worker's record says it is drained: it
learned the cordon over its control connection and serves no data request
and loads no block. Nothing is sent to an address a worker advertises.
Progress goes to stderr; "node/WORKER drained" to stdout, one line per
worker as each is done.

A coordinator that does not answer is named on stderr and not waited for: a
coordinator that cannot be reached either fails closed (it answers no
lookup) or reads the same store as the others. At least one must confirm.

When --drain-timeout passes first, the command exits 1 naming what it still
waited for, per worker; the workers stay cordoned (uncordon them to undo).
--dry-run prints what would be cordoned and waits for nothing.`,
		Example: `  talonctl nodes drain w-1
  talonctl nodes drain w-1 w-2 --drain-timeout 5m --persist
  talonctl nodes drain -l zone=eu-1 --dry-run`,
		ValidArgsFunction: cmdutil.CompleteWorkerIDs(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Timeout <= 0 {
				return cmdutil.UsageErrorf("--drain-timeout %s: must be positive", opts.Timeout)
			}
			if err := opts.Targets.Parse(args); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return drainRun(cmd.Context(), opts)
		},
	}
	opts.Targets.AddFlags(cmd.Flags())
	_ = cmd.RegisterFlagCompletionFunc("selector", cmdutil.CompleteLabels(f))
	cmd.Flags().BoolVar(&opts.Persist, "persist", false, "keep the cordon across restarts of the workers")
	cmd.Flags().BoolVar(&opts.DryRun, "dry-run", false, "print what would be cordoned, change nothing, wait for nothing")
	cmd.Flags().DurationVar(&opts.Timeout, "drain-timeout", 2*time.Minute, "give up (exit 1, the workers stay cordoned) after this long")
	return cmd
}

func drainRun(ctx context.Context, opts *DrainOptions) error {
	co := &cordon.CordonOptions{IO: &cmdutil.IOStreams{Out: opts.IO.ErrOut, ErrOut: opts.IO.ErrOut}, Client: opts.Client,
		Targets: opts.Targets, On: true, Persist: opts.Persist, DryRun: opts.DryRun}
	nodes, cordonErr := cordon.Run(ctx, co)
	if opts.DryRun || len(nodes) == 0 {
		return cordonErr
	}
	eps, listErr, err := opts.Coordinators(ctx)
	if err != nil {
		return err
	}
	if listErr != nil {
		fmt.Fprintf(opts.IO.ErrOut, "talonctl: warning: could not list the coordinators' records (%s); asking the --server URLs only\n", cmdutil.Message(listErr))
	}
	deadline := time.Now().Add(opts.Timeout)
	warned := map[string]bool{}
	waiting := map[string]string{}
	left := make([]string, 0, len(nodes))
	for _, n := range nodes {
		left = append(left, n.NodeID)
	}
	for len(left) > 0 {
		left = slices.DeleteFunc(left, func(id string) bool {
			why := check(ctx, opts, eps, id, warned)
			if why == "" {
				fmt.Fprintf(opts.IO.Out, "node/%s drained\n", id)
				return true
			}
			waiting[id] = why
			return false
		})
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(cordon.Poll):
		}
	}
	if len(left) > 0 {
		var waits []string
		for _, id := range left {
			waits = append(waits, id+": "+waiting[id])
		}
		return &cmdutil.ExitError{Code: cmdutil.ExitFailure,
			Err:  fmt.Errorf("drain: --drain-timeout %s passed; still waiting for %s", opts.Timeout, strings.Join(waits, "; ")),
			Hint: "the workers stay cordoned: rerun drain with a longer --drain-timeout, or talonctl nodes uncordon " + strings.Join(left, " ")}
	}
	return cordonErr
}

// check returns what the drain of worker id still waits for, "" when
// done: coordinators that do not read it cordoned yet (placing), and a
// record that does not say drained yet (the worker has not learned the
// cordon, or still serves requests or loads blocks).
func check(ctx context.Context, opts *DrainOptions, eps []*cmdutil.Endpoint, id string, warned map[string]bool) string {
	placing := make([]string, len(eps))
	confirmed := make([]bool, len(eps))
	drained := make([]bool, len(eps))
	cmdutil.Each(eps, func(i int, ep *cmdutil.Endpoint) {
		resp, err := ep.Client.Node(ctx, id, apiv1.WithRole("worker"))
		switch {
		case errors.Is(err, apiv1.ErrNotFound):
			confirmed[i], drained[i] = true, true // gone: not placed on, serving nothing
		case err == nil && resp.Node.Cordon == nil && resp.Node.Revocation == nil:
			placing[i] = ep.Name()
		case err == nil:
			confirmed[i], drained[i] = true, resp.Node.Drained
		case !warned[ep.URL]:
			warned[ep.URL] = true
			fmt.Fprintf(opts.IO.ErrOut, "talonctl: warning: %s did not answer (%s); not waiting for it\n", ep.Name(), cmdutil.Message(err))
		}
	})
	var still []string
	for _, p := range placing {
		if p != "" {
			still = append(still, p)
		}
	}
	switch {
	case len(still) > 0:
		return "coordinators not reading it cordoned yet: " + strings.Join(still, ", ")
	case !slices.Contains(confirmed, true):
		return "no coordinator answered to confirm"
	case !slices.Contains(drained, true):
		return "its record does not say drained yet (it learns the cordon after its next heartbeat, then finishes its requests and loads)"
	}
	return ""
}
