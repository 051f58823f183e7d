package status

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cli/cmdutil"
)

// Formats are the -o values of `cluster status`.
var Formats = []string{cmdutil.OutputText, cmdutil.OutputJSON, cmdutil.OutputYAML}

// StatusOptions are the parsed flags of `cluster status`.
type StatusOptions struct {
	IO     *cmdutil.IOStreams
	Client func() (*apiv1.Client, error)

	Output     string
	AllowStale bool

	out *cmdutil.Output // parsed Output
}

// NewCmdStatus returns the command; runF replaces its run function in tests.
func NewCmdStatus(f *cmdutil.Factory, runF func(*StatusOptions) error) *cobra.Command {
	opts := &StatusOptions{IO: &f.IO, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Summarize the cluster: store health, snapshot age, placement version, node counts",
		Long: `Summarize the cluster from the answering coordinator's current snapshot of
the shared store: the store backend and its health, the snapshot's age (on a
terminal; its observation time when piped), the PlacementVersion, how many
workers placement may choose, and the live nodes counted by role, health and
readiness; the coordinators present against coordinator-replicas, naming
the missing ones; and the cluster's totals as the coordinator computes them
(resident of capacity, hit ratio, requests, bytes and backend errors per
second over the workers' last two status writes). -o jsonpath and
go-template see the whole answer.

When no coordinator can read the store the command fails with exit code 3;
--allow-stale shows the last good snapshot instead, marked stale.`,
		Args: cmdutil.NoArgs,
		Example: `  talonctl cluster status
  talonctl cluster status -o jsonpath='{.capacity.hitRatio}'
  talonctl cluster status -o jsonpath='{.coordinators.missing}'`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out, err := cmdutil.ParseOutput(opts.Output, Formats, nil)
			if err != nil {
				return err
			}
			opts.out = out
			if runF != nil {
				return runF(opts)
			}
			return statusRun(cmd.Context(), opts)
		},
	}
	cmdutil.AddOutputFlag(cmd, &opts.Output, Formats...)
	cmdutil.AllowStaleFlag(cmd, &opts.AllowStale)
	return cmd
}

func statusRun(ctx context.Context, opts *StatusOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	var raw []byte // the answer as sent: -o json and yaml print it, unknown fields included
	c, err := client.Cluster(ctx, append(cmdutil.CallOptions(opts.AllowStale), apiv1.RawBody(func(b []byte) { raw = b }))...)
	if err != nil {
		return err
	}
	cmdutil.WarnStale(opts.IO, c.Meta)
	if opts.Output != cmdutil.OutputText {
		return opts.out.Print(opts.IO.Out, raw, nil, false)
	}
	return writeText(opts.IO, c)
}

func writeText(s *cmdutil.IOStreams, c *apiv1.Cluster) error {
	cs := s.ColorScheme()
	ms := func(v int64) string { return cmdutil.Duration(time.Duration(v) * time.Millisecond) }

	store := c.Store.Backend + ", " + cs.Green("healthy")
	if !c.Store.Healthy {
		store = c.Store.Backend + ", " + cs.Red("unhealthy")
		if c.Store.ErrorCode != "" {
			store += " (" + c.Store.ErrorCode + ")"
		}
	}
	snapKey, snap := "Snapshot observed:", cmdutil.Timestamp(c.ObservedAtUnixMs)
	if s.IsStdoutTTY() {
		snapKey, snap = "Snapshot age:", ms(c.GeneratedAtUnixMs-c.ObservedAtUnixMs)
	}
	if c.Stale {
		snap += " " + cs.Yellow("(stale)")
	}
	kv := cmdutil.NewTable()
	kv.AddRow("Cluster:", c.ClusterID)
	kv.AddRow("Served by:", c.ServedBy)
	kv.AddRow("Store:", store)
	for _, a := range c.Store.Alarms {
		kv.AddRow("Store alarm:", cs.Red(a.Message))
	}
	if cp := c.Store.Capacity; cp != nil {
		kv.AddRow("Store database:", storeDatabase(cp))
	}
	kv.AddRow(snapKey, snap)
	kv.AddRow("Revision:", c.Revision)
	kv.AddRow("Placement version:", c.PlacementVersion)
	kv.AddRow("Eligible workers:", strconv.Itoa(c.EligibleWorkers))
	kv.AddRow("Timing:", fmt.Sprintf("heartbeat every %s, unhealthy after %s, lease TTL %s",
		ms(c.Timing.HeartbeatIntervalMs), ms(c.Timing.UnhealthyAfterMs), ms(c.Timing.LeaseTTLMs)))
	kv.AddRow("Live nodes:", strconv.Itoa(c.Nodes.Total))
	kv.AddRow("Coordinators:", presence(cs, c.Coordinators))
	kv.AddRow("Capacity:", capacity(c.Capacity))
	kv.AddRow("Hit ratio:", hitRatio(c.Capacity))
	kv.AddRow("Traffic:", traffic(c.Capacity))
	var b strings.Builder
	if err := kv.Render(&b, true); err != nil {
		return err
	}
	b.WriteByte('\n')
	counts := cmdutil.NewTable("ROLE", "TOTAL", "HEALTHY", "DEGRADED", "UNHEALTHY", "UNKNOWN", "READY")
	for _, r := range []struct {
		role string
		c    apiv1.Counts
	}{{"coordinator", c.Nodes.Coordinators}, {"worker", c.Nodes.Workers}} {
		n := r.c
		counts.AddRow(r.role, strconv.Itoa(n.Total), strconv.Itoa(n.Healthy),
			nonZero(cs.Yellow, n.Degraded), nonZero(cs.Red, n.Unhealthy), nonZero(cs.Gray, n.Unknown), strconv.Itoa(n.Ready))
	}
	if err := counts.Render(&b, false); err != nil {
		return err
	}
	_, err := io.WriteString(s.Out, b.String())
	return err
}

// nonZero colours a count when it is not zero.
func nonZero(color func(string) string, n int) string {
	if n == 0 {
		return "0"
	}
	return color(strconv.Itoa(n))
}

// storeDatabase renders the store's database size against its quota:
// "1.4 MiB of 2.0 GiB (0%), 0.8 MiB in use".
func storeDatabase(cp *apiv1.StoreCapacity) string {
	pct := ""
	if cp.QuotaBytes > 0 {
		pct = fmt.Sprintf(" (%d%%)", cp.DBSizeBytes*100/cp.QuotaBytes)
	}
	return fmt.Sprintf("%s of %s%s, %s in use", iec(cp.DBSizeBytes), iec(cp.QuotaBytes), pct, iec(cp.DBInUseBytes))
}

// iec renders a byte count with a binary unit and one decimal.
func iec(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n), -1
	for v >= unit && i < 3 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGT"[i])
}
