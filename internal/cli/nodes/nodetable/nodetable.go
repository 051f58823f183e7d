// Package nodetable renders /api/v1 nodes for talonctl: the table and
// wide columns, the name format, sorting and the sort keys. It is shared
// by `nodes list` and `nodes get`, so that both print a node the same way.
package nodetable

import (
	"cmp"
	"encoding/json"
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
func healthRank(h string) int { return apiv1.HealthRank(h) }

// hitRatio is hits/(hits+misses), or -1 when there were none.
func hitRatio(n *apiv1.Node) float64 {
	return format.HitRatio(n.Counters.HitsTotal, n.Counters.MissesTotal)
}

// SortHelp documents --sort-by for the flag's help.
var SortHelp = "sort by `KEY`, ascending like kubectl: a JSONPath over the API's node object (.capacity.residentBytes, {.labels.zone}) or one of " +
	strings.Join(SortKeys, ", ") + "; a leading - reverses the order (-name: Z to A, -capacity: largest first)"

// CheckSortBy returns a usage error unless by is a sort key or a JSONPath
// (.a.b or {.a.b}), optionally with a leading - (reversed).
func CheckSortBy(by string) error {
	key := strings.TrimPrefix(by, "-")
	if isPath(key) {
		if _, err := parsePath(key); err != nil {
			return cmdutil.UsageErrorf("--sort-by %q: %v", by, err)
		}
		return nil
	}
	if !slices.Contains(SortKeys, key) {
		return cmdutil.UsageErrorf("--sort-by %q: must be a JSONPath such as .capacity.residentBytes, or one of %s; optionally with a leading - to reverse the order", by, strings.Join(SortKeys, ", "))
	}
	return nil
}

// isPath reports whether a --sort-by value is a JSONPath, not a keyword.
func isPath(key string) bool { return strings.HasPrefix(key, ".") || strings.HasPrefix(key, "{") }

// parsePath splits a JSONPath of field names (.a.b, {.a.b}) into its
// names. Sorting needs one value per node: filters, wildcards and ranges
// are refused.
func parsePath(key string) ([]string, error) {
	p := key
	if strings.HasPrefix(p, "{") {
		if !strings.HasSuffix(p, "}") {
			return nil, fmt.Errorf("a JSONPath that opens with { must close with }")
		}
		p = strings.TrimSuffix(strings.TrimPrefix(p, "{"), "}")
	}
	if !strings.HasPrefix(p, ".") || p == "." {
		return nil, fmt.Errorf("must be a JSONPath of field names, such as .capacity.residentBytes")
	}
	names := strings.Split(strings.TrimPrefix(p, "."), ".")
	for _, n := range names {
		if n == "" || strings.ContainsAny(n, "[]*?@() ") {
			return nil, fmt.Errorf("field %q: only plain field names sort (one value per node): no wildcards, indexes or filters", n)
		}
	}
	return names, nil
}

// pathValue returns the value at path in n's JSON form (nil when absent).
func pathValue(n *apiv1.Node, path []string) any {
	b, err := json.Marshal(n)
	if err != nil {
		return nil
	}
	var v any
	if json.Unmarshal(b, &v) != nil {
		return nil
	}
	for _, name := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[name]
	}
	return v
}

// compareValues orders JSON values: absent first, then booleans (false
// first), numbers, strings, and anything else by its JSON text.
func compareValues(a, b any) int {
	rank := func(v any) int {
		switch v.(type) {
		case nil:
			return 0
		case bool:
			return 1
		case float64:
			return 2
		case string:
			return 3
		}
		return 4
	}
	if ra, rb := rank(a), rank(b); ra != rb {
		return cmp.Compare(ra, rb)
	}
	switch x := a.(type) {
	case bool:
		return cmp.Compare(boolRank(!x), boolRank(!b.(bool)))
	case float64:
		return cmp.Compare(x, b.(float64))
	case string:
		return strings.Compare(x, b.(string))
	case nil:
		return 0
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return strings.Compare(string(ja), string(jb))
}

// Sort orders nodes by key, stably, so that equal nodes keep the API's
// order (role, then node ID). Like kubectl, values sort ascending: a
// JSONPath's values, and the keywords' quantities (smallest capacity,
// youngest heartbeat, lowest hit ratio first; uptime: longest running
// first); health sorts from healthy to unknown; ready nodes come first. A
// leading - reverses the order (equal nodes still keep the API's order).
// An empty key keeps the API's order.
func Sort(nodes []apiv1.Node, by string) {
	key, desc := strings.CutPrefix(by, "-")
	var less func(a, b *apiv1.Node) int
	switch {
	case key == "":
		return
	case isPath(key):
		path, err := parsePath(key)
		if err != nil {
			panic(fmt.Sprintf("nodetable: sort path %q: %v", key, err)) // callers validate with CheckSortBy
		}
		// Each node's value is computed once; a permutation is sorted.
		idx := make([]int, len(nodes))
		keys := make([]any, len(nodes))
		for i := range nodes {
			idx[i], keys[i] = i, pathValue(&nodes[i], path)
		}
		slices.SortStableFunc(idx, func(a, b int) int {
			if desc {
				return compareValues(keys[b], keys[a])
			}
			return compareValues(keys[a], keys[b])
		})
		sorted := make([]apiv1.Node, len(nodes))
		for i, j := range idx {
			sorted[i] = nodes[j]
		}
		copy(nodes, sorted)
		return
	}
	switch key {
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
		less = func(a, b *apiv1.Node) int { return cmp.Compare(a.Capacity.CapacityBytes, b.Capacity.CapacityBytes) }
	case SortResident:
		less = func(a, b *apiv1.Node) int { return cmp.Compare(a.Capacity.ResidentBytes, b.Capacity.ResidentBytes) }
	case SortHitRatio:
		less = func(a, b *apiv1.Node) int { return cmp.Compare(hitRatio(a), hitRatio(b)) }
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
	// LabelColumns adds one column per label key (-L), after the others.
	LabelColumns []string
	// ShowLabels adds a LABELS column (--show-labels) to the table format
	// (wide has one already).
	ShowLabels bool
}

// Headers returns the column headers of the format. They are the same on
// a terminal and in a pipe; only the time cells differ (an age, or a
// timestamp).
func (p *Printer) Headers() []string {
	h := []string{"NODE", "ROLE", "HEALTH", "READY", "HEARTBEAT", "VERSION", "ADDRESS"}
	if p.Format == cmdutil.OutputWide {
		h = append(h, "INCARNATION", "STARTED", "CAPACITY", "RESIDENT", "HIT RATIO", "LABELS")
	} else if p.ShowLabels {
		h = append(h, "LABELS")
	}
	for _, k := range p.LabelColumns {
		h = append(h, strings.ToUpper(k))
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
		hb = cmdutil.Duration(time.Duration(n.HeartbeatAgeMs)*time.Millisecond) + " ago"
	}
	// Text fields come from records: escape anything a terminal would
	// act on (an older server may have stored it).
	row := []string{format.Text(n.NodeID), format.Text(n.Role), cs.Health(n.Health), cs.Ready(n.Ready), hb, orDash(format.Text(n.Version)), orDash(format.Text(n.Address))}
	if p.Format != cmdutil.OutputWide {
		if p.ShowLabels {
			row = append(row, formatLabels(n.Labels))
		}
		return p.labelCells(row, n)
	}
	started := cmdutil.Timestamp(n.StartTimeUnixMs)
	if p.TTY && n.StartTimeUnixMs != 0 {
		started = cmdutil.Duration(time.Duration(observedAtUnixMs-n.StartTimeUnixMs)*time.Millisecond) + " ago"
	}
	capacity, resident := "-", "-"
	if n.Capacity.CapacityBytes != 0 || n.Capacity.ResidentBytes != 0 {
		capacity, resident = format.Bytes(n.Capacity.CapacityBytes), format.Bytes(n.Capacity.ResidentBytes)
	}
	ratio := format.Percent(hitRatio(n))
	return p.labelCells(append(row, orDash(format.Text(n.IncarnationID)), started, capacity, resident, ratio, formatLabels(n.Labels)), n)
}

// labelCells appends the -L columns' cells.
func (p *Printer) labelCells(row []string, n *apiv1.Node) []string {
	for _, k := range p.LabelColumns {
		row = append(row, format.Text(n.Labels[k]))
	}
	return row
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
			b.WriteString("node/" + nodes[i].NodeID)
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
