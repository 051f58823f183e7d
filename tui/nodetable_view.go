package tui

import (
	"fmt"
	"slices"
	"strings"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
)

// View renders the column header and the window of n-1 visible rows
// around the cursor, marked; faint dims them (stale data). Its cost
// depends on n, not on the number of rows.
func (t nodeTable) View(w, n int, faint bool) []string {
	start := max(min(t.offset, len(t.visible)-(n-1)), 0)
	end := min(start+n-1, len(t.visible))
	return t.lines(w, start, end, true, faint)
}

// viewAll renders the column header and every visible row, unmarked
// (talonctl top --once).
func (t nodeTable) viewAll(w int, faint bool) []string {
	return t.lines(w, 0, len(t.visible), false, faint)
}

// lines renders the column header and visible rows start..end.
func (t *nodeTable) lines(w, start, end int, cursor, faint bool) []string {
	lines := make([]string, 0, end-start+1)
	lines = append(lines, t.st.colHeader.Render(fit(t.headerRow(w), w)))
	if len(t.visible) == 0 {
		return append(lines, t.emptyText())
	}
	widths := t.columnWidths()
	cols := t.layout(w)
	var b strings.Builder
	for v := start; v < end; v++ {
		r := &t.rows[t.visible[v]]
		sel := cursor && v == t.cursor
		b.Reset()
		b.WriteString(marks(sel, r.late))
		for i, c := range cols {
			if i > 0 {
				b.WriteString("  ")
			}
			pad(&b, r.cells[c], widths[c], c.right())
		}
		line := strings.TrimRight(fit(b.String(), w), " ")
		lines = append(lines, t.rowStyle(r, sel, faint).Render(line))
	}
	return lines
}

// emptyText is what the table shows without visible rows: nothing before
// the first poll.
func (t *nodeTable) emptyText() string {
	switch {
	case !t.polled:
		return ""
	case len(t.rows) > 0:
		return "no nodes match the filter and toggles"
	}
	return "no nodes"
}

// marks are a row's first three cells: the cursor, the late mark (colour
// must not be the only sign) and a space.
func marks(sel, late bool) string {
	switch {
	case sel && late:
		return ">! "
	case sel:
		return ">  "
	case late:
		return " ! "
	}
	return "   "
}

// rowStyle is a row's style: red when late or unhealthy, yellow when not
// healthy or not ready, reversed under the cursor, faint when stale.
func (t *nodeTable) rowStyle(r *row, sel, faint bool) lipgloss.Style {
	st := t.st.header
	switch {
	case r.late || r.node.Health == "unhealthy":
		st = t.st.bad
	case r.node.Health != "healthy" || !r.node.Ready:
		st = t.st.warn
	}
	if sel {
		st = st.Inherit(t.st.selected)
	}
	if faint {
		st = st.Faint(true)
	}
	return st
}

// columnWidths returns each column's width: its widest cell, at least its
// title (with the sort arrow on the sort column).
func (t *nodeTable) columnWidths() [numColumns]int {
	var w [numColumns]int
	for c := range numColumns {
		n := ansi.StringWidth(c.title())
		if c == t.sortCol {
			n += 2
		}
		w[c] = max(t.cellW[c], n)
	}
	return w
}

// dropOrder is the order in which columns leave a table too wide for the
// terminal: identity and rates stay longest, since they are what top is
// for; the pinned columns never leave.
var dropOrder = []column{colAddress, colVersion, colAge, colResident, colEvict, colBytes, colHit, colReqs}

// pinned are the columns that never leave or scroll: who and how it is.
// READY is one (issue 38): a cordoned or drained worker is healthy and
// differs from the others only by it, which colour alone must not say.
var pinned = []column{colRole, colNode, colHealth, colReady}

// scrollable are the columns that horizontal scrolling moves through, in
// display order; the pinned ones stay on the left.
var scrollable = []column{colAge, colVersion, colAddress, colReqs, colHit, colBytes, colEvict, colResident}

// lineWidth is the width of a table line with cols.
func lineWidth(widths [numColumns]int, cols []column) int {
	n := 3 // cursor, late mark, space
	for i, c := range cols {
		if i > 0 {
			n += 2
		}
		n += widths[c]
	}
	return n
}

// layout returns the columns shown at width w, in display order. Unscrolled
// (hscroll 0), every column that fits: when the table is too wide, columns
// leave in dropOrder. Scrolled right by k, ROLE and NODE then the
// scrollable columns from the k-th on, as many as fit (at least one).
func (t *nodeTable) layout(w int) []column {
	widths := t.columnWidths()
	if t.hscroll == 0 {
		shown := [numColumns]bool{}
		for c := range numColumns {
			shown[c] = true
		}
		cols := func() []column {
			var out []column
			for c := range numColumns {
				if shown[c] {
					out = append(out, c)
				}
			}
			return out
		}
		for _, d := range dropOrder {
			if lineWidth(widths, cols()) <= w {
				break
			}
			shown[d] = false
		}
		return cols()
	}
	cols := slices.Clone(pinned)
	for i, c := range scrollable[min(t.hscroll, len(scrollable)-1):] {
		if i > 0 && lineWidth(widths, append(cols, c)) > w {
			break
		}
		cols = append(cols, c)
	}
	return cols
}

// hiddenColumns is how many columns layout leaves out at width w.
func (t *nodeTable) hiddenColumns(w int) int { return int(numColumns) - len(t.layout(w)) }

func (t *nodeTable) headerRow(w int) string {
	widths := t.columnWidths()
	var b strings.Builder
	b.WriteString("   ")
	for i, c := range t.layout(w) {
		if i > 0 {
			b.WriteString("  ")
		}
		title := c.title()
		if c == t.sortCol {
			title += " " + t.arrow()
		}
		pad(&b, title, widths[c], c.right())
	}
	return strings.TrimRight(b.String(), " ")
}

// arrow is the sort direction's mark.
func (t *nodeTable) arrow() string {
	if t.sortDesc {
		return "▼"
	}
	return "▲"
}

// statusParts are the table's parts of the status line at width w: the
// row count and position, the sort, hidden columns and the toggles.
func (t *nodeTable) statusParts(w int) []string {
	var parts []string
	if t.polled {
		pos := ""
		if len(t.visible) > 0 {
			pos = fmt.Sprintf(", row %d", t.cursor+1)
		}
		parts = append(parts, fmt.Sprintf("%d of %d nodes%s", len(t.visible), len(t.rows), pos))
	}
	parts = append(parts, fmt.Sprintf("sort %s %s (s/S column, o order)", t.sortCol.name(), t.arrow()))
	if hidden := t.hiddenColumns(w); hidden > 0 || t.hscroll > 0 {
		parts = append(parts, fmt.Sprintf("%d %s hidden (←/→ scroll)", hidden, plural(hidden, "column", "columns")))
	}
	if t.hideCoordinators {
		parts = append(parts, "coordinators hidden (c)")
	}
	if t.hideWorkers {
		parts = append(parts, "workers hidden (w)")
	}
	if t.problemsOnly {
		parts = append(parts, "problem nodes only (u)")
	}
	return parts
}

// pad writes s into b padded or truncated to width w.
func pad(b *strings.Builder, s string, w int, right bool) {
	sw := len(s)
	if !isASCII(s) {
		sw = ansi.StringWidth(s)
	}
	if sw > w {
		s, sw = ansi.Truncate(s, w, "…"), w
	}
	if right {
		b.WriteString(strings.Repeat(" ", w-sw))
		b.WriteString(s)
		return
	}
	b.WriteString(s)
	b.WriteString(strings.Repeat(" ", w-sw))
}
