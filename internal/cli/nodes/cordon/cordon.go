// Package cordon implements `talonctl nodes cordon` and `nodes uncordon`,
// and the worker lookup that `nodes drain` shares.
package cordon

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cli/cmdutil"
	"github.com/talonhq/talon/internal/cluster"
)

// CordonOptions are the parsed arguments and flags of `nodes cordon` and
// `nodes uncordon`.
type CordonOptions struct {
	IO *cmdutil.IOStreams
	// Worker finds a worker's admin client by node ID.
	Worker func(ctx context.Context, nodeID string) (*apiv1.Client, *apiv1.Node, error)

	NodeID  string
	On      bool // cordon; false: uncordon
	Persist bool
}

// Worker returns the function that finds a worker's admin listener: its
// record (read from the coordinators) names its admin address, which is
// asked with the connection's token and TLS settings.
func Worker(f *cmdutil.Factory) func(ctx context.Context, nodeID string) (*apiv1.Client, *apiv1.Node, error) {
	return func(ctx context.Context, nodeID string) (*apiv1.Client, *apiv1.Node, error) {
		client, err := f.Client()
		if err != nil {
			return nil, nil, err
		}
		resp, err := client.Node(ctx, nodeID)
		if err != nil {
			return nil, nil, err
		}
		n := &resp.Node
		switch {
		case n.Role != "worker":
			return nil, nil, cmdutil.UsageErrorf("NODE_ID %q is a %s: only workers are cordoned (a coordinator leaves service when it is stopped)", nodeID, n.Role)
		case n.AdminAddress == "":
			return nil, nil, fmt.Errorf("worker %s advertises no admin address (its admin-listen is off), so it cannot be asked to cordon itself", nodeID)
		}
		wc, _, err := f.AdminClient(n.AdminAddress)
		if err != nil {
			return nil, nil, err
		}
		return wc, n, nil
	}
}

// NewCmdCordon returns `nodes cordon`; runF replaces its run function in tests.
func NewCmdCordon(f *cmdutil.Factory, runF func(*CordonOptions) error) *cobra.Command {
	return newCmd(f, runF, true)
}

// NewCmdUncordon returns `nodes uncordon`; runF replaces its run function in tests.
func NewCmdUncordon(f *cmdutil.Factory, runF func(*CordonOptions) error) *cobra.Command {
	return newCmd(f, runF, false)
}

func newCmd(f *cmdutil.Factory, runF func(*CordonOptions) error, on bool) *cobra.Command {
	opts := &CordonOptions{IO: &f.IO, Worker: Worker(f), On: on}
	cmd := &cobra.Command{
		Use:   "cordon WORKER",
		Short: "Take a worker out of placement: it reports ready=false, reason cordoned",
		Long: `Ask a worker, through its own admin listener (the address its record
advertises, with this connection's token and TLS settings), to report itself
not ready with reason cordoned until it is uncordoned. The worker heartbeats
at once, so every coordinator leaves it out of placement within one store
write; it keeps serving the requests routed to it, and its record and
talonctl nodes describe say why it is not ready. The coordinators' API stays
read-only: the worker itself takes the request, and logs an audit line.

A cordon lasts until uncordon or the worker's restart; --persist keeps it
across restarts (a file in the worker's cache directory).

To wait until no coordinator places on it and its requests finish, use
talonctl nodes drain.`,
		Example: `  talonctl nodes cordon w-1
  talonctl nodes cordon w-1 --persist
  talonctl nodes uncordon w-1`,
		Args:              cmdutil.ExactArgs(1, "WORKER"),
		ValidArgsFunction: cmdutil.CompleteNodeIDs(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := cluster.ValidateID("WORKER", args[0]); err != nil {
				return cmdutil.UsageError(err)
			}
			opts.NodeID = args[0]
			if runF != nil {
				return runF(opts)
			}
			_, err := Run(cmd.Context(), opts)
			return err
		},
	}
	if on {
		cmd.Flags().BoolVar(&opts.Persist, "persist", false, "keep the cordon across restarts of the worker (stored in its cache directory)")
	} else {
		cmd.Use = "uncordon WORKER"
		cmd.Short = "Return a cordoned worker to placement"
		cmd.Long = `Lift a worker's cordon (persisted or not): it reports ready again with its
next heartbeat, sent at once, and placement includes it again. Logged as an
audit line by the worker.`
		cmd.Example = `  talonctl nodes uncordon w-1`
	}
	return cmd
}

// Run cordons or uncordons the worker and prints the outcome like
// kubectl: "node/w-1 cordoned" or "node/w-1 already cordoned".
func Run(ctx context.Context, opts *CordonOptions) (*apiv1.Client, error) {
	wc, _, err := opts.Worker(ctx, opts.NodeID)
	if err != nil {
		return nil, err
	}
	var c *apiv1.Cordon
	if opts.On {
		c, err = wc.Cordon(ctx, opts.Persist)
	} else {
		c, err = wc.Uncordon(ctx)
	}
	if err != nil {
		return nil, err
	}
	word := "uncordoned"
	if opts.On {
		word = "cordoned"
		if c.Persisted {
			word = "cordoned (persisted across restarts)"
		}
	}
	if !c.Changed {
		word = "already " + word
	}
	fmt.Fprintf(opts.IO.Out, "node/%s %s\n", c.NodeID, word)
	return wc, nil
}

// Poll is how often drain checks.
const Poll = 200 * time.Millisecond
