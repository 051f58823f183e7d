package simulate

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cli/cmdutil"
	"github.com/talonhq/talon/internal/format"
)

// Formats are the -o values of `placement simulate`.
var Formats = []string{cmdutil.OutputTable, cmdutil.OutputJSON, cmdutil.OutputYAML}

// Limits of the flags.
const (
	DefaultSamples = 100000
	MaxSamples     = 10000000
	MaxAdd         = 1000
	// maxFileBytes bounds a --from file (a node list of 1000s of nodes is
	// a few MB).
	maxFileBytes = 64 << 20
)

// SimulateOptions are the parsed flags of `placement simulate`.
type SimulateOptions struct {
	IO     *cmdutil.IOStreams
	Client func() (*apiv1.Client, error)

	Drain     []string
	Add       int
	AddPrefix string
	Replicas  int
	Samples   int
	From      string
	Top       int
	Output    string
}

// NewCmdSimulate returns the command; runF replaces its run function in tests.
func NewCmdSimulate(f *cmdutil.Factory, runF func(*SimulateOptions) error) *cobra.Command {
	opts := &SimulateOptions{IO: &f.IO, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "simulate [--drain W...] [--add N] [--replicas R]",
		Short: "Predict how many blocks move, and the load per worker, if workers were drained or added",
		Long: fmt.Sprintf(`Simulate a change of membership over the live one (the coordinators' node
list) or a saved one (--from, the output of talonctl nodes list -o json):
--drain takes the named workers out of placement, --add N adds N workers
named PREFIX1..PREFIXN (--add-prefix, default new-). The eligible workers
are chosen by the coordinators' rule, and owners by the same HRW code the
coordinators run, over --samples block keys (default %d) named
%s for i = 0..samples-1: the answer is exact for those
keys, and for a drain the same for any keys up to sampling error.

Printed: the share of blocks whose owners change (and of block copies, with
--replicas above 1), the load per worker before and after (copies of the
sample it owns: min, max, mean, standard deviation) and the workers that
gain most. An added worker's own share depends on its node ID: the
simulation is exact for the IDs it names.`, DefaultSamples, strings.Replace(KeyFormat, "%d", "<i>", 1)),
		Example: `  talonctl placement simulate --drain w-3
  talonctl placement simulate --drain w-3,w-4 --replicas 2 -o json
  talonctl nodes list -o json > nodes.json; talonctl placement simulate --from nodes.json --add 2`,
		Args:              cmdutil.NoArgs,
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.check(cmd); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return simulateRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&opts.Drain, "drain", nil, "workers to take out of placement (repeat or comma-separate)")
	fl.IntVar(&opts.Add, "add", 0, fmt.Sprintf("workers to add, 0 to %d", MaxAdd))
	fl.StringVar(&opts.AddPrefix, "add-prefix", "new-", "node ID prefix of the added workers")
	fl.IntVarP(&opts.Replicas, "replicas", "r", 0, fmt.Sprintf("owners per block, 1 to %d (default: the cluster's placement-replicas; 1 with --from)", apiv1.MaxPlacementReplicas))
	fl.IntVar(&opts.Samples, "samples", DefaultSamples, fmt.Sprintf("block keys to place, 1 to %d", MaxSamples))
	fl.StringVar(&opts.From, "from", "", "read the membership from this file (talonctl nodes list -o json) instead of the coordinators")
	fl.IntVar(&opts.Top, "top", 5, "workers listed under most gained (0: every worker)")
	cmdutil.AddOutputFlag(cmd, &opts.Output, Formats...)
	_ = cmd.RegisterFlagCompletionFunc("drain", cmdutil.CompleteWorkerIDs(f))
	_ = cmd.MarkFlagFilename("from", "json")
	return cmd
}

func (o *SimulateOptions) check(cmd *cobra.Command) error {
	switch {
	case o.Add < 0 || o.Add > MaxAdd:
		return cmdutil.UsageErrorf("--add %d: must be an integer from 0 to %d", o.Add, MaxAdd)
	case cmd.Flags().Changed("replicas") && (o.Replicas < 1 || o.Replicas > apiv1.MaxPlacementReplicas):
		return cmdutil.UsageErrorf("--replicas %d: must be an integer from 1 to %d", o.Replicas, apiv1.MaxPlacementReplicas)
	case o.Samples < 1 || o.Samples > MaxSamples:
		return cmdutil.UsageErrorf("--samples %d: must be an integer from 1 to %d", o.Samples, MaxSamples)
	case o.Top < 0:
		return cmdutil.UsageErrorf("--top %d: must not be negative", o.Top)
	case o.Add > 0 && o.AddPrefix == "":
		return cmdutil.UsageErrorf("--add-prefix \"\": must not be empty")
	}
	return cmdutil.CheckEnum("output", o.Output, Formats)
}

func simulateRun(ctx context.Context, opts *SimulateOptions) error {
	nodes, replicas, version, err := membership(ctx, opts)
	if err != nil {
		return err
	}
	if opts.Replicas > 0 {
		replicas = opts.Replicas
	}
	eligible, _ := Eligible(nodes)
	plan := Plan{Drain: opts.Drain, Replicas: replicas, Samples: opts.Samples}
	for i := range opts.Add {
		plan.Add = append(plan.Add, opts.AddPrefix+strconv.Itoa(i+1))
	}
	res, err := Simulate(eligible, plan)
	if err != nil {
		return cmdutil.UsageError(err)
	}
	if version != "" && version != res.Before.PlacementVersion {
		// The node list was read after the cluster summary, on another
		// snapshot (or page by page over several).
		fmt.Fprintf(opts.IO.ErrOut, "warning: the membership changed while it was read (placement version %s, then %s): run again for a consistent answer\n",
			version, res.Before.PlacementVersion)
	}
	if opts.Output != cmdutil.OutputTable {
		return cmdutil.WriteData(opts.IO.Out, opts.Output, res)
	}
	return writeTable(opts, res)
}

// membership reads the nodes, from the file or the coordinators, with
// the replicas to use by default and (live) the cluster's
// PlacementVersion.
func membership(ctx context.Context, opts *SimulateOptions) (nodes []apiv1.Node, replicas int, version string, err error) {
	if opts.From != "" {
		nodes, err := readNodes(opts.From)
		return nodes, 1, "", err
	}
	client, err := opts.Client()
	if err != nil {
		return nil, 0, "", err
	}
	c, err := client.Cluster(ctx)
	if err != nil {
		return nil, 0, "", err
	}
	list, err := client.AllNodes(ctx, apiv1.NodeFilter{Role: "worker"})
	if err != nil {
		return nil, 0, "", err
	}
	return list.Items, max(1, c.PlacementReplicas), c.PlacementVersion, nil
}

// readNodes reads a node list saved with talonctl nodes list -o json (or
// nodes get with several IDs).
func readNodes(path string) ([]apiv1.Node, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, cmdutil.UsageErrorf("--from: %v", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("--from %s: %w", path, err)
	}
	if len(b) > maxFileBytes {
		return nil, cmdutil.UsageErrorf("--from %s: larger than %d bytes", path, maxFileBytes)
	}
	var list apiv1.NodeList
	if err := json.Unmarshal(b, &list); err != nil || list.Items == nil {
		return nil, cmdutil.UsageErrorf("--from %s: not a node list (talonctl nodes list -o json): %v", path, reasonOf(err))
	}
	return list.Items, nil
}

func reasonOf(err error) string {
	if err == nil {
		return "no items"
	}
	return err.Error()
}

var trailingSpace = regexp.MustCompile(` +\n`)

func writeTable(opts *SimulateOptions, r *Result) error {
	cs := opts.IO.ColorScheme()
	var b strings.Builder
	kv := cmdutil.NewTable()
	kv.AddRow("Samples:", fmt.Sprintf("%d block keys (%s for i < %d), %d replicas", r.Samples, strings.Replace(r.KeyFormat, "%d", "<i>", 1), r.Samples, r.Replicas))
	kv.AddRow("Drained:", list(r.Drained))
	kv.AddRow("Added:", list(r.Added))
	kv.AddRow("Workers:", fmt.Sprintf("%d -> %d", r.Before.Workers, r.After.Workers))
	kv.AddRow("Placement version:", r.Before.PlacementVersion+" -> "+r.After.PlacementVersion)
	kv.AddRow("Blocks moved:", cs.Bold(fmt.Sprintf("%s (%d of %d)", format.Percent(r.MovedShare), r.MovedBlocks, r.Samples)))
	if r.Replicas > 1 {
		kv.AddRow("Copies moved:", fmt.Sprintf("%s (%d of %d)", format.Percent(r.MovedCopyShare), r.MovedCopies, r.Samples*r.Replicas))
	}
	if err := kv.Render(&b, true); err != nil {
		return err
	}
	b.WriteByte('\n')
	t := cmdutil.NewTable("LOAD", "MIN", "MAX", "MEAN", "STDDEV")
	t.AddRow("before", strconv.Itoa(r.Before.Load.Min), strconv.Itoa(r.Before.Load.Max), fmt.Sprintf("%.1f", r.Before.Load.Mean), fmt.Sprintf("%.1f", r.Before.Load.Stddev))
	t.AddRow("after", strconv.Itoa(r.After.Load.Min), strconv.Itoa(r.After.Load.Max), fmt.Sprintf("%.1f", r.After.Load.Mean), fmt.Sprintf("%.1f", r.After.Load.Stddev))
	if err := t.Render(&b, false); err != nil {
		return err
	}
	b.WriteByte('\n')
	w := cmdutil.NewTable("WORKER", "BEFORE", "AFTER", "CHANGE", "NOTE")
	for i, l := range r.Workers {
		if opts.Top > 0 && i >= opts.Top {
			break
		}
		note := ""
		switch {
		case l.Drained:
			note = cs.Yellow("drained")
		case l.Added:
			note = cs.Green("added")
		}
		w.AddRow(l.NodeID, strconv.Itoa(l.Before), strconv.Itoa(l.After), fmt.Sprintf("%+d", l.Change), note)
	}
	if err := w.Render(&b, false); err != nil {
		return err
	}
	// A row without a note has no padding after its last column.
	_, err := io.WriteString(opts.IO.Out, trailingSpace.ReplaceAllString(b.String(), "\n"))
	return err
}

func list(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
