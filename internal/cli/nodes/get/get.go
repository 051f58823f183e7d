// Package get implements `talonctl nodes get`.
package get

import (
	"context"
	"fmt"

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

	NodeID     string
	Output     string
	out        *cmdutil.Output // Output parsed
	NoHeaders  bool
	AllowStale bool
}

// NewCmdGet returns the command; runF replaces its run function in tests.
func NewCmdGet(f *cmdutil.Factory, runF func(*GetOptions) error) *cobra.Command {
	opts := &GetOptions{IO: &f.IO, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "get NODE_ID",
		Short: "Show one live node",
		Long: `Show one live node by node ID. A node that is absent or whose lease expired
is an error (exit code 1). -o json and -o yaml print the API's answer: the
node and the snapshot metadata. custom-columns print the node (.nodeId,
.labels.zone); jsonpath and go-template see the answer ({.node.nodeId}).

` + cmdutil.TemplateFormatsHelp,
		Example: `  talonctl nodes get w-1
  talonctl nodes get w-1 -o yaml`,
		Args:              cmdutil.ExactArgs(1, "NODE_ID"),
		ValidArgsFunction: cmdutil.CompleteNodeIDs(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.NodeID = args[0]
			if err := cluster.ValidateID("NODE_ID", opts.NodeID); err != nil {
				return cmdutil.UsageError(err)
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
	cmdutil.AddOutputFlag(cmd, &opts.Output, nodetable.Formats...)
	cmd.Flags().Lookup("output").Usage += "; or jsonpath=, go-template=, custom-columns= (TEMPLATE), or their -file=FILE forms"
	cmd.Flags().BoolVar(&opts.NoHeaders, "no-headers", false, "omit the header row of table and wide output")
	cmdutil.AllowStaleFlag(cmd, &opts.AllowStale)
	return cmd
}

func getRun(ctx context.Context, opts *GetOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	var raw []byte
	call := append(cmdutil.CallOptions(opts.AllowStale), apiv1.RawBody(func(b []byte) { raw = b }))
	resp, err := client.Node(ctx, opts.NodeID, call...)
	if err != nil {
		return err
	}
	io := opts.IO
	cmdutil.WarnStale(io, resp.Meta)
	if opts.out.IsRaw() {
		obj, err := cmdutil.ParseRawObject(raw)
		if err != nil {
			return fmt.Errorf("admin api: node %s: %w", opts.NodeID, err)
		}
		return opts.out.Print(io.Out, raw, [][]byte{obj.Get("node")}, opts.NoHeaders)
	}
	p := &nodetable.Printer{Format: opts.Output, TTY: io.IsStdoutTTY(), NoHeaders: opts.NoHeaders, Colors: io.ColorScheme()}
	return p.Write(io.Out, []apiv1.Node{resp.Node}, resp.ObservedAtUnixMs)
}
