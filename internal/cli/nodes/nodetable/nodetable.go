// Package nodetable renders /api/v1 nodes for talonctl: the table and
// wide columns, the name format, sorting and the sort keys. It is shared
// by `nodes list` and `nodes get`, so that both print a node the same way.
package nodetable

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cli/cmdutil"
	"github.com/talonhq/talon/internal/format"
)

// Formats are the -o values of node commands; table is the default.
var Formats = []string{cmdutil.OutputTable, cmdutil.OutputWide, cmdutil.OutputJSON, cmdutil.OutputYAML, cmdutil.OutputName}

// Sort keys of --sort-by.
const (
	SortName     = "name"
	SortRole     = "role"
	SortHealth   = "health"
	SortReady    = "ready"
	SortAge      = "age" // heartbeat age, youngest first
	SortVersion  = "version"
	SortAddress  = "address"
	SortUptime   = "uptime" // longest running first
	SortCapacity = "capacity"
	SortResident = "resident"
	SortHitRatio = "hit-ratio"
)

// SortKeys lists the --sort-by values.
var SortKeys = []string{SortName, SortRole, SortHealth, SortReady, SortAge, SortVersion, SortAddress, SortUptime, SortCapacity, SortResident, SortHitRatio}

// healthRank orders health from best to worst.
func healthRank(h string) int {
	switch h {
	case "healthy":
		return 0
	case "degraded":
		return 1
	case "unhealthy":
		return 2
	}
	return 3
}

// hitRatio is hits/(hits+misses), or -1 when there were none.
func hitRatio(n *apiv1.Node) float64 {
	return format.HitRatio(n.Counters.HitsTotal, n.Counters.MissesTotal)
}

// SortHelp documents --sort-by for the flag's help.
var SortHelp = "sort by `KEY`: " + strings.Join(SortKeys, ", ") +
	"; a leading - reverses the order (-name: Z to A, -capacity: smallest first)"

// CheckSortBy returns a usage error unless by is a sort key, optionally
// with a leading - (reversed).
func CheckSortBy(by string) error {
	key := strings.TrimPrefix(by, "-")
	if !slices.Contains(SortKeys, key) {
		return cmdutil.UsageErrorf("--sort-by %q: must be one of %s, optionally with a leading - to reverse the order", by, strings.Join(SortKeys, ", "))
	}
	return nil
}

// Sort orders nodes by key, stably, so that equal nodes keep the API's
// order (role, then node ID). Quantities sort largest first, except the
// heartbeat age (youngest first); health sorts from healthy to unknown;
// ready nodes come first. A leading - reverses the key's order (equal
// nodes still keep the API's order). An empty key keeps the API's order.
func Sort(nodes []apiv1.Node, by string) {
	key, desc := strings.CutPrefix(by, "-")
	var less func(a, b *apiv1.Node) int
	switch key {
	case "":
		return
	case SortName:
		less = func(a, b *apiv1.Node) int { return strings.Compare(a.NodeID, b.NodeID) }
	case SortRole:
		less = func(a, b *apiv1.Node) int { return strings.Compare(a.Role, b.Role) }
	case SortHealth:
		less = func(a, b *apiv1.Node) int { return cmp.Compare(healthRank(a.Health), healthRank(b.Health)) }
	case SortReady:
		less = func(a, b *apiv1.Node) int { return cmp.Compare(boolRank(a.Ready), boolRank(b.Ready)) }
	case SortAge:
		less = func(a, b *apiv1.Node) int { return cmp.Compare(a.HeartbeatAgeMs, b.HeartbeatAgeMs) }
	case SortVersion:
		less = func(a, b *apiv1.Node) int { return strings.Compare(a.Version, b.Version) }
	case SortAddress:
		less = func(a, b *apiv1.Node) int { return strings.Compare(a.Address, b.Address) }
	case SortUptime:
		less = func(a, b *apiv1.Node) int { return cmp.Compare(a.StartTimeUnixMs, b.StartTimeUnixMs) }
	case SortCapacity:
		less = func(a, b *apiv1.Node) int { return cmp.Compare(b.Capacity.CapacityBytes, a.Capacity.CapacityBytes) }
	case SortResident:
		less = func(a, b *apiv1.Node) int { return cmp.Compare(b.Capacity.ResidentBytes, a.Capacity.ResidentBytes) }
	case SortHitRatio:
		less = func(a, b *apiv1.Node) int { return cmp.Compare(hitRatio(b), hitRatio(a)) }
	default:
		panic(fmt.Sprintf("nodetable: unknown sort key %q", key)) // callers validate against SortKeys
	}
	if desc {
		slices.SortStableFunc(nodes, func(a, b apiv1.Node) int { return less(&b, &a) })
		return
	}
	slices.SortStableFunc(nodes, func(a, b apiv1.Node) int { return less(&a, &b) })
}

func boolRank(ready bool) int {
	if ready {
		return 0
	}
	return 1
}

// Printer writes nodes in the table, wide and name formats.
type Printer struct {
	// Format is table, wide or name.
	Format string
	// TTY selects relative times (heartbeat age, uptime); otherwise
	// absolute RFC 3339 timestamps in UTC.
	TTY       bool
	NoHeaders bool
	Colors    *cmdutil.ColorScheme
}

// Headers returns the column headers of the format.
func (p *Printer) Headers() []string {
	hb := "LAST HEARTBEAT"
	if p.TTY {
		hb = "HEARTBEAT AGE"
	}
	h := []string{"NODE", "ROLE", "HEALTH", "READY", hb, "VERSION", "ADDRESS"}
	if p.Format == cmdutil.OutputWide {
		started := "STARTED"
		if p.TTY {
			started = "UPTIME"
		}
		h = append(h, "INCARNATION", started, "CAPACITY", "RESIDENT", "HIT RATIO", "LABELS")
	}
	return h
}

// Row returns the cells of n. observedAtUnixMs is the response's
// observation time, against which uptime is measured (both on server
// clocks, so the client's clock does not matter).
func (p *Printer) Row(n *apiv1.Node, observedAtUnixMs int64) []string {
	cs := p.Colors
	if cs == nil {
		cs = &cmdutil.ColorScheme{}
	}
	hb := cmdutil.Timestamp(n.UpdatedAtUnixMs)
	if p.TTY {
		hb = cmdutil.Duration(time.Duration(n.HeartbeatAgeMs) * time.Millisecond)
	}
	// Text fields come from records: escape anything a terminal would
	// act on (an older server may have stored it).
	row := []string{format.Text(n.NodeID), format.Text(n.Role), cs.Health(n.Health), cs.Ready(n.Ready), hb, orDash(format.Text(n.Version)), orDash(format.Text(n.Address))}
	if p.Format != cmdutil.OutputWide {
		return row
	}
	started := cmdutil.Timestamp(n.StartTimeUnixMs)
	if p.TTY && n.StartTimeUnixMs != 0 {
		started = cmdutil.Duration(time.Duration(observedAtUnixMs-n.StartTimeUnixMs) * time.Millisecond)
	}
	capacity, resident := "-", "-"
	if n.Capacity.CapacityBytes != 0 || n.Capacity.ResidentBytes != 0 {
		capacity, resident = format.Bytes(n.Capacity.CapacityBytes), format.Bytes(n.Capacity.ResidentBytes)
	}
	ratio := format.Percent(hitRatio(n))
	return append(row, orDash(format.Text(n.IncarnationID)), started, capacity, resident, ratio, formatLabels(n.Labels))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func formatLabels(labels map[string]string) string {
	if len(labels) == 0 {
		return "<none>"
	}
	parts := make([]string, 0, len(labels))
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		parts = append(parts, format.Text(k)+"="+format.Text(labels[k]))
	}
	return strings.Join(parts, ",")
}

// Write prints nodes: one node ID a line for name, else a table.
func (p *Printer) Write(w io.Writer, nodes []apiv1.Node, observedAtUnixMs int64) error {
	if p.Format == cmdutil.OutputName {
		var b strings.Builder
		for i := range nodes {
			b.WriteString(nodes[i].NodeID)
			b.WriteByte('\n')
		}
		_, err := io.WriteString(w, b.String())
		return err
	}
	t := cmdutil.NewTable(p.Headers()...)
	for i := range nodes {
		t.AddRow(p.Row(&nodes[i], observedAtUnixMs)...)
	}
	return t.Render(w, p.NoHeaders)
}
