// Package drain implements `talonctl nodes drain`.
package drain

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cli/cmdutil"
	"github.com/talonhq/talon/internal/cli/nodes/cordon"
	"github.com/talonhq/talon/internal/cluster"
)

// DrainOptions are the parsed arguments and flags of `nodes drain`.
type DrainOptions struct {
	IO           *cmdutil.IOStreams
	Worker       func(ctx context.Context, nodeID string) (*apiv1.Client, *apiv1.Node, error)
	Coordinators func(context.Context) ([]*cmdutil.Endpoint, error, error)

	NodeID  string
	Persist bool
	Timeout time.Duration
}

// NewCmdDrain returns the command; runF replaces its run function in tests.
func NewCmdDrain(f *cmdutil.Factory, runF func(*DrainOptions) error) *cobra.Command {
	opts := &DrainOptions{IO: &f.IO, Worker: cordon.Worker(f), Coordinators: f.Coordinators}
	cmd := &cobra.Command{
		Use:   "drain WORKER",
		Short: "Cordon a worker and wait until no coordinator places on it and its requests finish",
		Long: `Cordon a worker (see talonctl nodes cordon), then wait until every
coordinator that answers reads it as not ready (so none places on it any
more) and the worker serves no data request and loads no block. Progress
goes to stderr; "node/WORKER drained" to stdout.

A coordinator that does not answer is named on stderr and not waited for: a
coordinator that cannot be reached either fails closed (it answers no
lookup) or reads the same store as the others. At least one must confirm.

When --drain-timeout passes first, the command exits 1 naming what it still
waited for; the worker stays cordoned (uncordon it to undo).`,
		Example: `  talonctl nodes drain w-1
  talonctl nodes drain w-1 --drain-timeout 5m --persist`,
		Args:              cmdutil.ExactArgs(1, "WORKER"),
		ValidArgsFunction: cmdutil.CompleteNodeIDs(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := cluster.ValidateID("WORKER", args[0]); err != nil {
				return cmdutil.UsageError(err)
			}
			if opts.Timeout <= 0 {
				return cmdutil.UsageErrorf("--drain-timeout %s: must be positive", opts.Timeout)
			}
			opts.NodeID = args[0]
			if runF != nil {
				return runF(opts)
			}
			return drainRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.Persist, "persist", false, "keep the cordon across restarts of the worker (stored in its cache directory)")
	cmd.Flags().DurationVar(&opts.Timeout, "drain-timeout", 2*time.Minute, "give up (exit 1, the worker stays cordoned) after this long")
	return cmd
}

func drainRun(ctx context.Context, opts *DrainOptions) error {
	wc, err := cordon.Run(ctx, &cordon.CordonOptions{IO: &cmdutil.IOStreams{Out: opts.IO.ErrOut}, Worker: opts.Worker, NodeID: opts.NodeID, On: true, Persist: opts.Persist})
	if err != nil {
		return err
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
	placing, busy := "", ""
	for {
		placing, busy = check(ctx, opts, eps, wc, warned)
		if placing == "" && busy == "" {
			fmt.Fprintf(opts.IO.Out, "node/%s drained\n", opts.NodeID)
			return nil
		}
		if time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(cordon.Poll):
		}
	}
	var waits []string
	for _, w := range []string{placing, busy} {
		if w != "" {
			waits = append(waits, w)
		}
	}
	return &cmdutil.ExitError{Code: cmdutil.ExitFailure,
		Err:  fmt.Errorf("drain of %s: --drain-timeout %s passed: %s", opts.NodeID, opts.Timeout, strings.Join(waits, "; ")),
		Hint: "the worker stays cordoned: rerun drain with a longer --drain-timeout, or talonctl nodes uncordon " + opts.NodeID}
}

// check returns what the drain still waits for: coordinators that read
// the worker as ready (placing), and the worker's data requests and
// loads in flight (busy); "" each when done.
func check(ctx context.Context, opts *DrainOptions, eps []*cmdutil.Endpoint, wc *apiv1.Client, warned map[string]bool) (placing, busy string) {
	ready := make([]string, len(eps))
	confirmed := make([]bool, len(eps))
	cmdutil.Each(eps, func(i int, ep *cmdutil.Endpoint) {
		resp, err := ep.Client.Node(ctx, opts.NodeID)
		switch {
		case err == nil && resp.Node.Ready:
			ready[i] = ep.Name()
		case err == nil, errors.Is(err, apiv1.ErrNotFound):
			confirmed[i] = true // not ready, or gone: not placed on
		case !warned[ep.URL]:
			warned[ep.URL] = true
			fmt.Fprintf(opts.IO.ErrOut, "talonctl: warning: %s did not answer (%s); not waiting for it\n", ep.Name(), cmdutil.Message(err))
		}
	})
	var still []string
	someone := false
	for i := range eps {
		if ready[i] != "" {
			still = append(still, ready[i])
		}
		someone = someone || confirmed[i]
	}
	switch {
	case len(still) > 0:
		placing = "coordinators still reading it as ready: " + strings.Join(still, ", ")
	case !someone:
		placing = "no coordinator answered to confirm"
	}
	st, err := wc.Status(ctx)
	switch {
	case err != nil:
		busy = "worker status unknown: " + cmdutil.Message(err)
	case st.InflightRequests > 0 || (st.Current != nil && st.Current.Capacity.InflightLoads > 0):
		loads := uint64(0)
		if st.Current != nil {
			loads = st.Current.Capacity.InflightLoads
		}
		busy = fmt.Sprintf("worker still serving %d requests, %d loads", st.InflightRequests, loads)
	}
	return placing, busy
}
