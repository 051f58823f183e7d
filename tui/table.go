package tui

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	"github.com/charmbracelet/x/ansi"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/format"
)

// column is one column of the node table.
type column int

// Columns of the node table, in display order.
const (
	colRole column = iota
	colNode
	colHealth
	colReady
	colAge
	colVersion
	colAddress
	colReqs
	colHit
	colBytes
	colEvict
	colResident
	numColumns
)

// title is the column's header.
func (c column) title() string {
	switch c {
	case colRole:
		return "ROLE"
	case colNode:
		return "NODE"
	case colHealth:
		return "HEALTH"
	case colReady:
		return "READY"
	case colAge:
		return "HB AGE"
	case colVersion:
		return "VERSION"
	case colAddress:
		return "ADDRESS"
	case colReqs:
		return "REQ/S"
	case colHit:
		return "HIT%"
	case colBytes:
		return "BYTES/S"
	case colEvict:
		return "EVICT/S"
	case colResident:
		return "RESIDENT/CAP"
	}
	return "?"
}

// name is how the footer names the sort column.
func (c column) name() string {
	switch c {
	case colAge:
		return "status age"
	case colReqs:
		return "requests/s"
	case colHit:
		return "hit ratio"
	case colBytes:
		return "bytes/s"
	case colEvict:
		return "evictions/s"
	case colResident:
		return "resident/capacity"
	}
	return strings.ToLower(c.title())
}

// right reports whether the column is right-aligned (numbers).
func (c column) right() bool {
	switch c {
	case colAge, colReqs, colHit, colBytes, colEvict, colResident:
		return true
	}
	return false
}

// maxWidth caps a column's width; longer cells are truncated with "…".
func (c column) maxWidth() int {
	switch c {
	case colNode:
		return 28
	case colVersion:
		return 16
	case colAddress:
		return 28
	}
	return 20
}

// defaultDesc is the order a column sorts in when first selected: worst
// or largest first where that is what an operator looks for.
func (c column) defaultDesc() bool {
	switch c {
	case colHealth, colAge, colReqs, colBytes, colEvict, colResident:
		return true
	}
	return false
}

// row is one node with everything the table needs, computed once per
// poll.
type row struct {
	node   *apiv1.Node
	key    nodeKey
	worker bool
	late   bool // heartbeat age above the unhealthy threshold
	rates  rates
	// search is the lower-cased text the filter matches against, built
	// the first time a filter asks (searchText): most polls have none.
	search string
	cells  [numColumns]string
}

// problem reports whether the row needs attention: not healthy, not ready
// or late.
func (r *row) problem() bool {
	return r.node.Health != "healthy" || !r.node.Ready || r.late
}

func healthRank(h string) int { return apiv1.HealthRank(h) }

// isLate reports whether a node's heartbeats are late: the store marked
// it late (effective health unhealthy while it reported otherwise), or
// its last heartbeat is older than thresholdMs (unhealthy-after plus a
// heartbeat interval: a renewal through another coordinator reaches the
// answering one's heartbeat time within about unhealthy-after).
func isLate(n *apiv1.Node, thresholdMs int64) bool {
	return (n.Health == "unhealthy" && n.ReportedHealth != "unhealthy") || n.HeartbeatAgeMs > thresholdMs
}

// buildRows turns a poll's nodes into rows; thresholdMs is the record
// age above which a row is late (isLate).
func buildRows(nodes []apiv1.Node, rs []rates, thresholdMs int64) []row {
	rows := make([]row, len(nodes))
	for i := range nodes {
		n := &nodes[i]
		r := &rows[i]
		r.node, r.key, r.rates = n, keyOf(n), rs[i]
		r.worker = n.Role == "worker"
		r.late = isLate(n, thresholdMs)
		r.cells = cellsOf(r)
	}
	return rows
}

// searchText returns the lower-cased text the filter matches r against:
// role, node ID, address, version, health, labels, and the words late and
// not-ready when they apply.
func (r *row) searchText() string {
	if r.search != "" {
		return r.search
	}
	n := r.node
	var b strings.Builder
	b.WriteString(strings.ToLower(n.Role + " " + n.NodeID + " " + n.Address + " " + n.Version + " " + n.Health))
	for _, k := range slices.Sorted(maps.Keys(n.Labels)) {
		b.WriteString(" " + strings.ToLower(k+"="+n.Labels[k]))
	}
	if r.late {
		b.WriteString(" late")
	}
	if !r.node.Ready {
		b.WriteString(" not-ready")
	}
	r.search = b.String()
	return r.search
}

func cellsOf(r *row) [numColumns]string {
	n := r.node
	var c [numColumns]string
	c[colRole] = n.Role
	if c[colRole] == "coordinator" {
		c[colRole] = "coord"
	}
	c[colNode] = format.Text(n.NodeID)
	c[colHealth] = n.Health
	c[colReady] = "no"
	if n.Ready {
		c[colReady] = "yes"
	}
	c[colAge] = formatAgeMs(n.HeartbeatAgeMs)
	c[colVersion] = format.Text(n.Version)
	c[colAddress] = format.Text(n.Address)
	if !r.worker {
		return c
	}
	if r.rates.known {
		c[colReqs] = format.Rate(r.rates.reqPerSec)
		c[colBytes] = format.Rate(r.rates.bytesPerSec)
		c[colEvict] = format.Rate(r.rates.evictPerSec)
		c[colHit] = format.Percent(r.rates.hitRatio)
	} else {
		c[colReqs], c[colHit], c[colBytes], c[colEvict] = "-", "-", "-", "-"
	}
	c[colResident] = format.BytesShort(n.Capacity.ResidentBytes) + "/" + format.BytesShort(n.Capacity.CapacityBytes)
	return c
}

// cellWidth is a cell's display width: its length for printable ASCII
// (the common case, measured without decoding graphemes).
func cellWidth(s string) int {
	if format.PrintableASCII(s) {
		return len(s)
	}
	return ansi.StringWidth(s)
}

// cellWidths returns each column's widest cell, capped by maxWidth.
func cellWidths(rows []row) [numColumns]int {
	var w [numColumns]int
	for i := range rows {
		for c := range numColumns {
			w[c] = max(w[c], cellWidth(rows[i].cells[c]))
		}
	}
	for c := range numColumns {
		w[c] = min(w[c], c.maxWidth())
	}
	return w
}

// missing reports rows without a value in c (coordinators' worker
// columns, unknown rates): they sort last in either order.
func missing(r *row, c column) bool {
	switch c {
	case colReqs, colBytes, colEvict:
		return !r.worker || !r.rates.known
	case colHit:
		return !r.worker || !r.rates.known || r.rates.hitRatio < 0
	case colResident:
		return !r.worker
	}
	return false
}

// compareBy compares two rows by column c.
func compareBy(a, b *row, c column) int {
	switch c {
	case colRole:
		return cmp.Compare(a.node.Role, b.node.Role)
	case colNode:
		return cmp.Compare(a.node.NodeID, b.node.NodeID)
	case colHealth:
		return cmp.Compare(healthRank(a.node.Health), healthRank(b.node.Health))
	case colReady:
		return cmpBool(a.node.Ready, b.node.Ready)
	case colAge:
		return cmp.Compare(a.node.HeartbeatAgeMs, b.node.HeartbeatAgeMs)
	case colVersion:
		return cmp.Compare(a.node.Version, b.node.Version)
	case colAddress:
		return cmp.Compare(a.node.Address, b.node.Address)
	case colReqs:
		return cmp.Compare(a.rates.reqPerSec, b.rates.reqPerSec)
	case colHit:
		return cmp.Compare(a.rates.hitRatio, b.rates.hitRatio)
	case colBytes:
		return cmp.Compare(a.rates.bytesPerSec, b.rates.bytesPerSec)
	case colEvict:
		return cmp.Compare(a.rates.evictPerSec, b.rates.evictPerSec)
	case colResident:
		return cmp.Compare(fill(a.node.Capacity), fill(b.node.Capacity))
	}
	return 0
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

// fill is resident/capacity, 0 for no capacity.
func fill(c apiv1.Capacity) float64 {
	if c.CapacityBytes == 0 {
		return 0
	}
	return float64(c.ResidentBytes) / float64(c.CapacityBytes)
}

// order returns the indices of the rows that pass keep, sorted by column
// c (descending when desc), ties broken by role then node ID ascending.
func order(rows []row, keep func(*row) bool, c column, desc bool) []int {
	idx := make([]int, 0, len(rows))
	for i := range rows {
		if keep(&rows[i]) {
			idx = append(idx, i)
		}
	}
	slices.SortFunc(idx, func(i, j int) int {
		a, b := &rows[i], &rows[j]
		am, bm := missing(a, c), missing(b, c)
		if am != bm {
			if am {
				return 1
			}
			return -1
		}
		if !am {
			if r := compareBy(a, b, c); r != 0 {
				if desc {
					return -r
				}
				return r
			}
		}
		if r := cmp.Compare(a.node.Role, b.node.Role); r != 0 {
			return r
		}
		return cmp.Compare(a.node.NodeID, b.node.NodeID)
	})
	return idx
}

// matchFilter reports whether search contains every whitespace-separated
// word of the lower-cased filter.
func matchFilter(search string, words []string) bool {
	for _, w := range words {
		if !strings.Contains(search, w) {
			return false
		}
	}
	return true
}
