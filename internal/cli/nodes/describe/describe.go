// Package describe implements `talonctl nodes describe`.
package describe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cli/cmdutil"
	"github.com/talonhq/talon/internal/cli/eventtable"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/format"
)

// DescribeOptions are the parsed arguments and flags of `nodes describe`.
type DescribeOptions struct {
	IO           *cmdutil.IOStreams
	Client       func() (*apiv1.Client, error)
	Coordinators func(context.Context) ([]*cmdutil.Endpoint, error, error)
	Now          func() time.Time

	NodeIDs    []string
	Events     int
	AllowStale bool
}

// NewCmdDescribe returns the command; runF replaces its run function in tests.
func NewCmdDescribe(f *cmdutil.Factory, runF func(*DescribeOptions) error) *cobra.Command {
	opts := &DescribeOptions{IO: &f.IO, Client: f.Client, Coordinators: f.Coordinators, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "describe NODE_ID [NODE_ID...]",
		Short: "Show nodes in detail, with their recent events from every coordinator",
		Long: `Show everything nodes get shows of each node, laid out for reading (labels,
capacity, counters, readiness and why not), followed by the node's recent
events as every coordinator that answers observed them (see talonctl
events). A coordinator that does not answer is named on stderr; its events
are missing.

A node that is absent or whose lease expired is an error (exit code 1); the
others are still described. For machine-readable output use nodes get -o
json and talonctl events --for NODE_ID -o json.`,
		Example: `  talonctl nodes describe w-1
  talonctl nodes describe w-1 w-2 --events 5`,
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
			if opts.Events < 0 || opts.Events > apiv1.MaxEventLimit {
				return cmdutil.UsageErrorf("--events %d: must be from 0 to %d", opts.Events, apiv1.MaxEventLimit)
			}
			if runF != nil {
				return runF(opts)
			}
			return describeRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().IntVar(&opts.Events, "events", 20, "show the node's last `N` events per coordinator (0: none)")
	cmdutil.AllowStaleFlag(cmd, &opts.AllowStale)
	return cmd
}

func describeRun(ctx context.Context, opts *DescribeOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	var eps []*cmdutil.Endpoint
	if opts.Events > 0 {
		var listErr error
		if eps, listErr, err = opts.Coordinators(ctx); err != nil {
			return err
		}
		_ = listErr // the failover client's own error below says more
	}
	var missing []string
	for i, id := range opts.NodeIDs {
		resp, err := client.Node(ctx, id, cmdutil.CallOptions(opts.AllowStale)...)
		switch {
		case err == nil:
		case errors.Is(err, apiv1.ErrNotFound):
			fmt.Fprintf(opts.IO.ErrOut, "talonctl: %s\n", cmdutil.Message(err))
			missing = append(missing, id)
			continue
		default:
			return err
		}
		cmdutil.WarnStale(opts.IO, resp.Meta)
		if i > 0 {
			fmt.Fprintln(opts.IO.Out)
		}
		var evs *eventtable.Result
		if opts.Events > 0 {
			r := eventtable.Gather(ctx, eps, apiv1.EventFilter{NodeID: id}, opts.Events)
			eventtable.WarnFailed(opts.IO.ErrOut, r.Failed)
			evs = &r
		}
		if err := write(opts, &resp.Node, resp.ObservedAtUnixMs, evs); err != nil {
			return err
		}
	}
	if len(missing) > 0 {
		return &cmdutil.ExitError{Code: cmdutil.ExitFailure,
			Err: fmt.Errorf("%d of %d nodes not found: %s", len(missing), len(opts.NodeIDs), strings.Join(missing, ", "))}
	}
	return nil
}

func write(opts *DescribeOptions, n *apiv1.Node, observedAt int64, evs *eventtable.Result) error {
	s := opts.IO
	cs := s.ColorScheme()
	tty := s.IsStdoutTTY()
	when := func(ms int64) string {
		if ms == 0 {
			return "-"
		}
		if tty {
			return cmdutil.Duration(time.Duration(observedAt-ms)*time.Millisecond) + " ago (" + cmdutil.Timestamp(ms) + ")"
		}
		return cmdutil.Timestamp(ms)
	}
	ready := cs.Ready(n.Ready)
	if !n.Ready && n.NotReadyReason != "" {
		ready += " (" + n.NotReadyReason + ")"
	}
	health := cs.Health(n.Health)
	if n.ReportedHealth != n.Health {
		health += " (reported " + n.ReportedHealth + ")"
	}
	kv := cmdutil.NewTable()
	kv.AddRow("Name:", n.NodeID)
	kv.AddRow("Role:", n.Role)
	kv.AddRow("Cluster:", n.ClusterID)
	kv.AddRow("Incarnation:", n.IncarnationID)
	kv.AddRow("Version:", dash(n.Version))
	kv.AddRow("Address:", n.Address)
	kv.AddRow("Admin address:", dash(n.AdminAddress))
	kv.AddRow("Started:", when(n.StartTimeUnixMs))
	kv.AddRow("Last heartbeat:", fmt.Sprintf("seq %d, accepted %s (age %s)", n.HeartbeatSeq, cmdutil.Timestamp(n.HeartbeatAtUnixMs),
		cmdutil.Duration(time.Duration(n.HeartbeatAgeMs)*time.Millisecond)))
	if n.StatusAtUnixMs != 0 {
		kv.AddRow("Status written:", when(n.StatusAtUnixMs)+" (capacity and counters below are as of then)")
	}
	kv.AddRow("Health:", health)
	kv.AddRow("Ready:", ready)
	markRows(kv, n, when)
	keys := slices.Sorted(maps.Keys(n.Labels))
	if len(keys) == 0 {
		kv.AddRow("Labels:", "<none>")
	}
	for i, k := range keys {
		label := ""
		if i == 0 {
			label = "Labels:"
		}
		kv.AddRow(label, k+"="+n.Labels[k])
	}
	c := n.Capacity
	kv.AddRow("Capacity:", fmt.Sprintf("%s of %s resident, %d blocks, %d pages, %d loads in flight",
		format.Bytes(c.ResidentBytes), format.Bytes(c.CapacityBytes), c.Blocks, c.Pages, c.InflightLoads))
	k := n.Counters
	ratio := "-"
	if k.HitsTotal+k.MissesTotal > 0 {
		ratio = strconv.FormatFloat(100*float64(k.HitsTotal)/float64(k.HitsTotal+k.MissesTotal), 'f', 1, 64) + "%"
	}
	kv.AddRow("Requests:", fmt.Sprintf("%d (%d errors), hits %d, misses %d, hit ratio %s (since start)", k.RequestsTotal, k.ErrorsTotal, k.HitsTotal, k.MissesTotal, ratio))
	kv.AddRow("Served:", fmt.Sprintf("%s; backend fetches %d (%d errors); evictions %d", format.Bytes(k.BytesServedTotal), k.BackendFetchesTotal, k.BackendErrorsTotal, k.EvictionsTotal))
	if n.Role == "coordinator" {
		kv.AddRow("Placement:", fmt.Sprintf("%d lookups (%d errors); store errors %d", k.PlacementLookupsTotal, k.PlacementErrorsTotal, k.StoreErrorsTotal))
	}
	var b strings.Builder
	if err := kv.Render(&b, true); err != nil {
		return err
	}
	if evs != nil {
		if len(evs.Events) == 0 {
			b.WriteString("Events:           <none>\n")
		} else {
			b.WriteString("Events:\n")
			var t strings.Builder
			p := &eventtable.Printer{TTY: tty, Colors: cs, Now: opts.Now(), NoNode: true}
			if err := p.Write(&t, evs.Events); err != nil {
				return err
			}
			for _, line := range strings.SplitAfter(t.String(), "\n") {
				if line != "" {
					b.WriteString("  " + line)
				}
			}
		}
	}
	_, err := io.WriteString(s.Out, b.String())
	return err
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// markRows adds a worker's operator and coordinator marks: who cordoned
// it and when (through the coordinators), whether it is drained, and a
// revocation of its credential.
func markRows(kv *cmdutil.Table, n *apiv1.Node, when func(int64) string) {
	if n.Role != "worker" {
		return
	}
	cordon := "no"
	if c := n.Cordon; c != nil {
		cordon = "by " + dash(c.By) + ", " + when(c.AtUnixMs)
		if c.Persist {
			cordon += ", kept across restarts"
		}
		drained := "no (serving requests or loading blocks, or has not learned the cordon yet)"
		if n.Drained {
			drained = "yes (serves no request, loads no block)"
		}
		kv.AddRow("Cordoned:", cordon)
		kv.AddRow("Drained:", drained)
	} else {
		kv.AddRow("Cordoned:", cordon)
	}
	if r := n.Revocation; r != nil {
		kv.AddRow("Revoked:", "by "+r.By+": credential on its deny list ("+r.Reason+"); out of placement on every coordinator")
	}
}
