// Package cordon implements `talonctl nodes cordon` and `nodes uncordon`,
// and the target selection (names and -l) that `nodes drain` shares.
// Every request goes to the coordinators' /api/v1 (the --server
// addresses); nothing is sent to an address a worker advertises.
package cordon

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cli/cmdutil"
	"github.com/talonhq/talon/internal/cli/nodes/list"
	"github.com/talonhq/talon/internal/cluster"
)

// Targets are the workers a command acts on: the names given and the
// workers a -l selector matches, each once, in the order given (the
// selector's in node ID order after them).
type Targets struct {
	Names     []string
	Selectors []string
	selector  string // the parsed -l, "" for none
}

// AddFlags adds -l/--selector to fs.
func (t *Targets) AddFlags(fs *pflag.FlagSet) {
	fs.StringArrayVarP(&t.Selectors, "selector", "l", nil, "also act on the workers whose labels match `SELECTOR` (the syntax of nodes list -l)")
}

// Parse checks the names and the selector: at least one of them, every
// name a valid node ID.
func (t *Targets) Parse(args []string) error {
	sel, err := list.ParseLabelSelector(t.Selectors)
	if err != nil {
		return err
	}
	if len(args) == 0 && sel == "" {
		return cmdutil.UsageErrorf("name at least one WORKER, or select workers with -l")
	}
	for _, a := range args {
		if err := cluster.ValidateID("WORKER", a); err != nil {
			return cmdutil.UsageError(err)
		}
	}
	t.Names, t.selector = slices.Compact(slices.Clone(args)), sel
	return nil
}

// Resolve returns the workers to act on, read from the coordinators: every
// name (a name that is not a live worker is an error for that name, which
// Resolve returns per name in bad) and every worker -l selects. A
// selector that matches no worker is an error.
func (t *Targets) Resolve(ctx context.Context, c *apiv1.Client) (nodes []apiv1.Node, bad map[string]error, err error) {
	bad = map[string]error{}
	seen := map[string]bool{}
	for _, name := range t.Names {
		if seen[name] {
			continue
		}
		seen[name] = true
		resp, err := c.Node(ctx, name, apiv1.WithRole(string(cluster.RoleWorker)))
		switch {
		case errors.Is(err, apiv1.ErrNotFound):
			bad[name] = notWorker(ctx, c, name)
		case err != nil:
			return nil, nil, err
		default:
			nodes = append(nodes, resp.Node)
		}
	}
	if t.selector == "" {
		return nodes, bad, nil
	}
	l, err := c.AllNodes(ctx, apiv1.NodeFilter{Role: string(cluster.RoleWorker), LabelSelector: t.selector})
	if err != nil {
		return nil, nil, err
	}
	if len(l.Items) == 0 {
		return nil, nil, &cmdutil.ExitError{Code: cmdutil.ExitFailure, Err: fmt.Errorf("-l %q selects no live worker", t.selector)}
	}
	for _, n := range l.Items {
		if !seen[n.NodeID] {
			seen[n.NodeID] = true
			nodes = append(nodes, n)
		}
	}
	return nodes, bad, nil
}

// notWorker says why name is not a live worker: a coordinator, or absent.
func notWorker(ctx context.Context, c *apiv1.Client, name string) error {
	if _, err := c.Node(ctx, name, apiv1.WithRole(string(cluster.RoleCoordinator))); err == nil {
		return fmt.Errorf("%s is a coordinator: only workers are cordoned (a coordinator leaves service when it is stopped)", name)
	}
	return fmt.Errorf("no live worker %s in the cluster (absent, or its lease expired)", name)
}

// CordonOptions are the parsed arguments and flags of `nodes cordon` and
// `nodes uncordon`.
type CordonOptions struct {
	IO     *cmdutil.IOStreams
	Client func() (*apiv1.Client, error)

	Targets Targets
	On      bool // cordon; false: uncordon
	Persist bool
	DryRun  bool
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
	opts := &CordonOptions{IO: &f.IO, Client: f.Client, On: on}
	cmd := &cobra.Command{
		Use:   "cordon [WORKER...] [-l SELECTOR]",
		Short: "Take workers out of placement (through the coordinators)",
		Long: `Ask the coordinators (the --server addresses, never an address a worker
advertises) to cordon each worker: the coordinator that answers marks the
worker's record in the shared store with who cordoned it and when, so every
coordinator leaves it out of placement at its next read of the store. The
worker learns it with its next heartbeat, over its own authenticated control
connection, and reports ready=false with reason cordoned; it keeps serving
the requests routed to it. Needs a token with the operate scope; each
cordon is an audit line on the coordinator that took it.

Name workers, select them with -l, or both; one line per worker:
"node/w-1 cordoned", or "already cordoned" when nothing changed. A worker
that cannot be cordoned is named on stderr and the others are still done;
the exit code is then non-zero. --dry-run prints what would change and
changes nothing.

A cordon lasts until uncordon; --persist also keeps it across restarts of
the worker. To wait until a worker serves nothing, use talonctl nodes drain.`,
		Example: `  talonctl nodes cordon w-1
  talonctl nodes cordon w-1 w-2 --persist
  talonctl nodes cordon -l zone=eu-1 --dry-run
  talonctl nodes uncordon w-1`,
		ValidArgsFunction: cmdutil.CompleteWorkerIDs(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.Targets.Parse(args); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			_, err := Run(cmd.Context(), opts)
			return err
		},
	}
	opts.Targets.AddFlags(cmd.Flags())
	_ = cmd.RegisterFlagCompletionFunc("selector", cmdutil.CompleteLabels(f))
	cmd.Flags().BoolVar(&opts.DryRun, "dry-run", false, "print what would change, change nothing")
	if on {
		cmd.Flags().BoolVar(&opts.Persist, "persist", false, "keep the cordon across restarts of the worker")
	} else {
		cmd.Use = "uncordon [WORKER...] [-l SELECTOR]"
		cmd.Short = "Return cordoned workers to placement (through the coordinators)"
		cmd.Long = `Ask the coordinators to lift each worker's cordon (persisted or not): the
mark leaves the worker's record, every coordinator places on it again at
its next read of the store, and the worker reports ready again after its
next heartbeat. Names, -l and --dry-run work as for cordon. Needs a token
with the operate scope; an audit line on the coordinator that took it.`
		cmd.Example = `  talonctl nodes uncordon w-1
  talonctl nodes uncordon -l zone=eu-1`
	}
	return cmd
}

// Run cordons or uncordons the targets, one line each, and returns the
// targets it acted on (for drain). A target that fails is named on
// ErrOut; Run then returns an error with the exit code of the first
// failure after doing the others.
func Run(ctx context.Context, opts *CordonOptions) ([]apiv1.Node, error) {
	c, err := opts.Client()
	if err != nil {
		return nil, err
	}
	nodes, bad, err := opts.Targets.Resolve(ctx, c)
	if err != nil {
		return nil, err
	}
	var failed []error
	for _, name := range opts.Targets.Names {
		if e, ok := bad[name]; ok {
			fmt.Fprintf(opts.IO.ErrOut, "talonctl: error: node/%s: %s\n", name, cmdutil.Message(e))
			failed = append(failed, &cmdutil.ExitError{Code: cmdutil.ExitFailure, Err: e})
		}
	}
	var done []apiv1.Node
	for _, n := range nodes {
		word, err := act(ctx, c, opts, &n)
		if err != nil {
			fmt.Fprintf(opts.IO.ErrOut, "talonctl: error: node/%s: %s\n", n.NodeID, cmdutil.Message(err))
			failed = append(failed, err)
			continue
		}
		fmt.Fprintf(opts.IO.Out, "node/%s %s\n", n.NodeID, word)
		done = append(done, n)
	}
	if len(failed) > 0 {
		return done, &cmdutil.ExitError{Code: cmdutil.ExitCode(failed[0]),
			Err: fmt.Errorf("%d of %d workers not %s: %w", len(failed), len(failed)+len(done), verb(opts.On), failed[0])}
	}
	return done, nil
}

// act cordons or uncordons n (or, with DryRun, says what that would do)
// and returns the word printed after "node/ID".
func act(ctx context.Context, c *apiv1.Client, opts *CordonOptions, n *apiv1.Node) (string, error) {
	if opts.DryRun {
		changed := n.Cordon == nil
		if !opts.On {
			changed = n.Cordon != nil
		} else if n.Cordon != nil && opts.Persist && !n.Cordon.Persist {
			changed = true
		}
		return outcome(opts.On, opts.Persist || (n.Cordon != nil && n.Cordon.Persist), changed) + " (dry run)", nil
	}
	var res *apiv1.Cordon
	var err error
	if opts.On {
		res, err = c.CordonNode(ctx, n.NodeID, opts.Persist)
	} else {
		res, err = c.UncordonNode(ctx, n.NodeID)
	}
	if err != nil {
		return "", err
	}
	return outcome(opts.On, res.Persisted, res.Changed), nil
}

// outcome is the word of a cordon or an uncordon, like kubectl's.
func outcome(on, persisted, changed bool) string {
	word := verb(on)
	if on && persisted {
		word += " (kept across restarts)"
	}
	if !changed {
		word = "already " + word
	}
	return word
}

func verb(on bool) string {
	if on {
		return "cordoned"
	}
	return "uncordoned"
}

// Poll is how often drain checks.
const Poll = 200 * time.Millisecond
