// Package get implements `talonctl nodes get`.
package get

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cli/cmdutil"
	"github.com/talonhq/talon/internal/cli/nodes/nodetable"
	"github.com/talonhq/talon/internal/cluster"
)

// GetOptions are the parsed arguments and flags of `nodes get`.
type GetOptions struct {
	IO     *cmdutil.IOStreams
	Client func() (*apiv1.Client, error)

	// NodeIDs are the nodes asked for, in order, without repeats.
	NodeIDs    []string
	Output     string
	out        *cmdutil.Output // Output parsed
	NoHeaders  bool
	AllowStale bool
	// LabelColumns (-L) and ShowLabels (--show-labels) add label columns.
	LabelColumns []string
	ShowLabels   bool
}

// NewCmdGet returns the command; runF replaces its run function in tests.
func NewCmdGet(f *cmdutil.Factory, runF func(*GetOptions) error) *cobra.Command {
	opts := &GetOptions{IO: &f.IO, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "get NODE_ID [NODE_ID...]",
		Short: "Show live nodes by node ID",
		Long: `Show one or more live nodes by node ID, in the order given (a repeated ID
is shown once).

With one ID, a node that is absent or whose lease expired is an error (exit
code 1), and -o json, -o yaml, jsonpath and go-template print and see the
node object itself, like kubectl get ({.nodeId}); the API's answer wraps it
with the snapshot metadata ({"node": ..., "revision": ...}), which
talonctl nodes get reports only through --allow-stale's warning.

With several IDs, the table lists every node found; -o json and -o yaml
print one list object like nodes list's (the metadata of the last answer and
an items array; jsonpath sees {.items[*].nodeId}). A missing node is reported
on stderr and the others are still printed, and the command then exits 1,
like kubectl get. Other failures (unreachable, 503, 401) end the command.

custom-columns print one row per node (.nodeId, .labels.zone).

` + cmdutil.TemplateFormatsHelp,
		Example: `  talonctl nodes get w-1
  talonctl nodes get w-1 -o yaml
  talonctl nodes get w-1 w-2 w-3 -o wide
  talonctl nodes get w-1 w-2 -o jsonpath='{.items[*].address}'`,
		Args:              cmdutil.MinimumArgs(1, "NODE_ID"),
		ValidArgsFunction: cmdutil.CompleteNodeIDs(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.NodeIDs = nil
			for _, id := range args {
				if err := cluster.ValidateID("NODE_ID", id); err != nil {
					return cmdutil.UsageError(err)
				}
				if !slices.Contains(opts.NodeIDs, id) {
					opts.NodeIDs = append(opts.NodeIDs, id)
				}
			}
			out, err := cmdutil.ParseOutput(opts.Output, nodetable.Formats, nil)
			if err != nil {
				return err
			}
			opts.out = out
			if runF != nil {
				return runF(opts)
			}
			return getRun(cmd.Context(), opts)
		},
	}
	cmdutil.AddTemplateOutputFlag(cmd, &opts.Output, nodetable.Formats...)
	cmd.Flags().StringSliceVarP(&opts.LabelColumns, "label-columns", "L", nil, "add a column with the value of each label `KEY` (repeat or comma-separate)")
	cmd.Flags().BoolVar(&opts.ShowLabels, "show-labels", false, "add a LABELS column to the table")
	cmd.Flags().Lookup("output").Usage += "; or jsonpath=, go-template=, custom-columns= (TEMPLATE), or their -file=FILE forms"
	cmd.Flags().BoolVar(&opts.NoHeaders, "no-headers", false, "omit the header row of table and wide output")
	cmdutil.AllowStaleFlag(cmd, &opts.AllowStale)
	return cmd
}

// answer is one node's answer: decoded and as the API sent it.
type answer struct {
	resp *apiv1.NodeResponse
	raw  []byte
}

func getRun(ctx context.Context, opts *GetOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	io := opts.IO
	var found []answer
	var missing []string
	for _, id := range opts.NodeIDs {
		var raw []byte
		call := append(cmdutil.CallOptions(opts.AllowStale), apiv1.RawBody(func(b []byte) { raw = b }))
		resp, err := client.Node(ctx, id, call...)
		switch {
		case err == nil:
			found = append(found, answer{resp: resp, raw: raw})
		case len(opts.NodeIDs) > 1 && errors.Is(err, apiv1.ErrNotFound):
			// Like kubectl: report it, show the others, fail at the end.
			fmt.Fprintf(io.ErrOut, "talonctl: %s\n", cmdutil.Message(err))
			missing = append(missing, id)
		default:
			return err
		}
	}
	if len(found) > 0 {
		if err := printAnswers(opts, found); err != nil {
			return err
		}
	}
	if len(missing) > 0 {
		return &cmdutil.ExitError{Code: cmdutil.ExitFailure,
			Err: fmt.Errorf("%d of %d nodes not found: %s", len(missing), len(opts.NodeIDs), strings.Join(missing, ", "))}
	}
	return nil
}

// printAnswers writes the answers found: one answer as the API sent it, several
// as one list object.
func printAnswers(opts *GetOptions, found []answer) error {
	io := opts.IO
	for _, a := range found {
		cmdutil.WarnStale(io, a.resp.Meta)
	}
	if opts.out.IsRaw() {
		obj, items, err := rawObject(opts, found)
		if err != nil {
			return err
		}
		return opts.out.Print(io.Out, obj, items, opts.NoHeaders)
	}
	nodes := make([]apiv1.Node, len(found))
	for i, a := range found {
		nodes[i] = a.resp.Node
	}
	last := found[len(found)-1].resp
	p := &nodetable.Printer{Format: opts.Output, TTY: io.IsStdoutTTY(), NoHeaders: opts.NoHeaders, Colors: io.ColorScheme(),
		LabelColumns: opts.LabelColumns, ShowLabels: opts.ShowLabels}
	return p.Write(io.Out, nodes, last.ObservedAtUnixMs)
}

// rawObject returns the object the raw formats print and the items of
// custom-columns. With one node asked for, it is the node object; with
// several, the last answer's object with its node replaced by an items
// array of every node found (the shape of a node list).
func rawObject(opts *GetOptions, found []answer) ([]byte, [][]byte, error) {
	items := make([][]byte, len(found))
	var last *cmdutil.RawObject
	for i, a := range found {
		obj, err := cmdutil.ParseRawObject(a.raw)
		if err != nil {
			return nil, nil, fmt.Errorf("admin api: node %s: %w", a.resp.Node.NodeID, err)
		}
		items[i], last = obj.Get("node"), obj
	}
	if len(opts.NodeIDs) == 1 {
		return items[0], items, nil // the object itself, unwrapped, like kubectl
	}
	joined := make([]json.RawMessage, len(items))
	for i, it := range items {
		joined[i] = it
	}
	ib, err := json.Marshal(joined)
	if err != nil {
		return nil, nil, err
	}
	last.Delete("node")
	last.Set("items", ib)
	b, err := last.MarshalJSON()
	return b, items, err
}
