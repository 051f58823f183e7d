// Package explain implements `talonctl placement explain`.
package explain

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cli/cmdutil"
)

// Formats are the -o values of `placement explain`.
var Formats = []string{cmdutil.OutputTable, cmdutil.OutputJSON, cmdutil.OutputYAML}

// ExplainOptions are the parsed arguments and flags of `placement explain`.
type ExplainOptions struct {
	IO     *cmdutil.IOStreams
	Client func() (*apiv1.Client, error)

	Key        string
	Replicas   int
	Output     string
	NoHeaders  bool
	AllowStale bool
}

// NewCmdExplain returns the command; runF replaces its run function in tests.
func NewCmdExplain(f *cmdutil.Factory, runF func(*ExplainOptions) error) *cobra.Command {
	opts := &ExplainOptions{IO: &f.IO, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "explain KEY",
		Short: "Show the owners of a key, the ranking of every eligible worker and why others are excluded",
		Long: fmt.Sprintf(`Explain the placement of KEY (1 to %d bytes) for --replicas owners (1 to %d):
the owners a PlacementLookup would return from the answering coordinator's
current snapshot, the PlacementVersion of that answer, every eligible worker
ranked by its HRW score (highest first, ties to the lower node ID), and the
workers left out of placement with the reason (unhealthy, not_ready, expired).

An outcome of no_workers (no eligible worker) is an answer, not an error.`, apiv1.MaxPlacementKeyBytes, apiv1.MaxPlacementReplicas),
		Example: `  talonctl placement explain objects/2026/11/01/a.parquet#17
  talonctl placement explain my-key --replicas 3 -o json`,
		Args:              cmdutil.ExactArgs(1, "KEY"),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Key = args[0]
			if n := len(opts.Key); n == 0 || n > apiv1.MaxPlacementKeyBytes {
				return cmdutil.UsageErrorf("KEY of %d bytes: must be 1 to %d bytes", n, apiv1.MaxPlacementKeyBytes)
			}
			if cmd.Flags().Changed("replicas") && (opts.Replicas < 1 || opts.Replicas > apiv1.MaxPlacementReplicas) {
				return cmdutil.UsageErrorf("--replicas %d: must be an integer from 1 to %d", opts.Replicas, apiv1.MaxPlacementReplicas)
			}
			if err := cmdutil.CheckEnum("output", opts.Output, Formats); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return explainRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.IntVarP(&opts.Replicas, "replicas", "r", 0, fmt.Sprintf("number of owners, 1 to %d (default: the cluster's placement-replicas, as its clients read)", apiv1.MaxPlacementReplicas))
	cmdutil.AddOutputFlag(cmd, &opts.Output, Formats...)
	fl.BoolVar(&opts.NoHeaders, "no-headers", false, "omit the header rows of the tables")
	cmdutil.AllowStaleFlag(cmd, &opts.AllowStale)
	_ = cmd.RegisterFlagCompletionFunc("replicas", cobra.NoFileCompletions)
	return cmd
}

func explainRun(ctx context.Context, opts *ExplainOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	var raw []byte // the answer as sent: -o json and yaml print it, unknown fields included
	p, err := client.Placement(ctx, opts.Key, opts.Replicas, append(cmdutil.CallOptions(opts.AllowStale), apiv1.RawBody(func(b []byte) { raw = b }))...)
	if err != nil {
		return err
	}
	cmdutil.WarnStale(opts.IO, p.Meta)
	if p.Outcome == apiv1.OutcomeOK && len(p.Owners) < p.Replicas {
		fmt.Fprintf(opts.IO.ErrOut, "warning: only %d of the %d owners asked for: %d workers are eligible (a lookup returns fewer owners, not an error)\n",
			len(p.Owners), p.Replicas, len(p.Candidates))
	}
	if opts.Output != cmdutil.OutputTable {
		return (&cmdutil.Output{Kind: opts.Output}).Print(opts.IO.Out, raw, nil, false)
	}
	return writeTable(opts, p)
}

func writeTable(opts *ExplainOptions, p *apiv1.Placement) error {
	cs := opts.IO.ColorScheme()
	owners := make([]string, len(p.Owners))
	isOwner := map[string]bool{}
	for i, o := range p.Owners {
		owners[i] = o.NodeID
		isOwner[o.NodeID] = true
	}
	outcome := cs.Green(p.Outcome)
	switch {
	case p.Outcome != apiv1.OutcomeOK:
		outcome = cs.Red(p.Outcome)
	case len(p.Owners) < p.Replicas:
		outcome = cs.Yellow(fmt.Sprintf("ok, but only %d of %d owners (%d eligible workers)", len(p.Owners), p.Replicas, len(p.Candidates)))
	}
	ownerList := strings.Join(owners, ", ")
	if ownerList == "" {
		ownerList = "none"
	}
	var b strings.Builder
	kv := cmdutil.NewTable()
	kv.AddRow("Key:", strconv.Quote(p.Key))
	kv.AddRow("Replicas:", strconv.Itoa(p.Replicas))
	kv.AddRow("Placement version:", p.PlacementVersion)
	kv.AddRow("Outcome:", outcome)
	kv.AddRow("Owners:", ownerList)
	if err := kv.Render(&b, true); err != nil {
		return err
	}
	b.WriteByte('\n')
	if len(p.Candidates) == 0 {
		b.WriteString("No eligible workers.\n")
	} else {
		t := cmdutil.NewTable("RANK", "NODE", "SCORE", "ADDRESS", "OWNER")
		for _, c := range p.Candidates {
			owner := "no"
			if isOwner[c.NodeID] {
				owner = cs.Green("yes")
			}
			t.AddRow(strconv.Itoa(c.Rank), c.NodeID, c.Score, c.Address, owner)
		}
		if err := t.Render(&b, opts.NoHeaders); err != nil {
			return err
		}
	}
	b.WriteByte('\n')
	if len(p.Excluded) == 0 {
		b.WriteString("No workers excluded.\n")
	} else {
		t := cmdutil.NewTable("EXCLUDED", "REASON", "HEALTH")
		for _, e := range p.Excluded {
			t.AddRow(e.NodeID, cs.Yellow(e.Reason), cs.Health(e.Health))
		}
		if err := t.Render(&b, opts.NoHeaders); err != nil {
			return err
		}
	}
	_, err := io.WriteString(opts.IO.Out, b.String())
	return err
}
