package tui

import (
	"fmt"
	"io"
	"slices"
	"strings"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
	"github.com/charmbracelet/x/ansi"
)

// View renders the screen: header, STALE banner when the data is not
// current, the visible window of the node table (or the detail pane),
// footer and help, on the alternate screen. Its cost depends on the
// window size, not on the number of nodes.
func (m *Model) View() tea.View {
	v := tea.NewView(m.render(false))
	v.AltScreen = true
	return v
}

// Frame returns the screen View draws, as text with styles.
func (m *Model) Frame() string { return m.render(false) }

// ViewAll renders one frame with every visible row and no footer, for
// printing once (talonctl top --once); the height is ignored.
func (m *Model) ViewAll() string { return m.render(true) }

// WriteAll writes ViewAll to w with its styles downsampled to profile:
// NoTTY and Ascii write no escape sequences.
func (m *Model) WriteAll(w io.Writer, profile colorprofile.Profile) error {
	_, err := io.WriteString(&colorprofile.Writer{Forward: w, Profile: profile}, m.ViewAll())
	return err
}

func (m *Model) size() (w, h int) {
	w, h = m.width, m.height
	if w <= 0 {
		w = defaultWidth
	}
	if h <= 0 {
		h = defaultHeight
	}
	return w, h
}

func (m *Model) render(all bool) string {
	w, h := m.size()
	now := m.opts.Now()
	lines := m.topLines(w, now)
	if all {
		lines = append(lines, m.tableLines(w, 0, len(m.visible), false)...)
		return strings.Join(lines, "\n") + "\n"
	}
	bottom := m.bottomLines(w)
	if !m.detail && m.view == viewNodes {
		bottom = append(append(m.coordinatorLines(w, h), m.eventLines(w, h, now)...), bottom...)
	}
	n := max(h-len(lines)-len(bottom), 1)
	var body []string
	switch {
	case m.view == viewEvents:
		body = m.eventLines(w, (n+1)*4, now) // the whole body
	case m.view == viewCoordinators:
		body = m.coordinatorLines(coordinatorsMinWidth, coordinatorsMinHeight)
		if len(body) == 0 {
			body = []string{"no coordinator records"}
		}
	case m.detail:
		body = m.detailLines(w, n, now)
	default:
		start := max(min(m.offset, len(m.visible)-(n-1)), 0)
		end := min(start+n-1, len(m.visible))
		body = m.tableLines(w, start, end, true)
	}
	for len(body) < n {
		body = append(body, "")
	}
	lines = append(lines, body...)
	lines = append(lines, bottom...)
	if len(lines) > h {
		lines = lines[:h] // a terminal too small for the chrome: keep the top
	}
	return strings.Join(lines, "\n")
}

// tableRows is how many node rows fit under the chrome.
func (m *Model) tableRows() int {
	w, h := m.size()
	now := m.opts.Now()
	chrome := len(m.topLines(w, now)) + len(m.bottomLines(w)) + 1 // +1: column header
	if !m.detail && m.view == viewNodes {
		chrome += len(m.coordinatorLines(w, h)) + len(m.eventLines(w, h, now))
	}
	return max(h-chrome, 1)
}

// tableLines renders the column header and visible rows start..end.
func (m *Model) tableLines(w, start, end int, cursor bool) []string {
	lines := make([]string, 0, end-start+1)
	lines = append(lines, m.st.colHeader.Render(fit(m.headerRow(w), w)))
	if len(m.visible) == 0 {
		msg := "no nodes"
		if m.poll == nil {
			msg = ""
		} else if len(m.rows) > 0 {
			msg = "no nodes match the filter and toggles"
		}
		return append(lines, msg)
	}
	stale := m.Stale()
	widths := m.columnWidths()
	cols := m.layout(w)
	var b strings.Builder
	for v := start; v < end; v++ {
		r := &m.rows[m.visible[v]]
		sel := cursor && v == m.cursor
		b.Reset()
		switch {
		case sel:
			b.WriteByte('>')
		default:
			b.WriteByte(' ')
		}
		if r.late {
			b.WriteByte('!')
		} else {
			b.WriteByte(' ')
		}
		b.WriteByte(' ')
		for i, c := range cols {
			if i > 0 {
				b.WriteString("  ")
			}
			pad(&b, r.cells[c], widths[c], c.right())
		}
		line := strings.TrimRight(fit(b.String(), w), " ")
		st := m.st.header
		switch {
		case r.late || r.node.Health == "unhealthy":
			st = m.st.bad
		case r.node.Health != "healthy" || !r.node.Ready:
			st = m.st.warn
		}
		if sel {
			st = st.Inherit(m.st.selected)
		}
		if stale {
			st = st.Faint(true)
		}
		lines = append(lines, st.Render(line))
	}
	return lines
}

// columnWidths returns each column's width: its widest cell, at least its
// title (with the sort arrow on the sort column).
func (m *Model) columnWidths() [numColumns]int {
	var w [numColumns]int
	for c := range numColumns {
		t := ansi.StringWidth(c.title())
		if c == m.sortCol {
			t += 2
		}
		w[c] = max(m.cellW[c], t)
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
func (m *Model) layout(w int) []column {
	widths := m.columnWidths()
	if m.hscroll == 0 {
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
	for i, c := range scrollable[min(m.hscroll, len(scrollable)-1):] {
		if i > 0 && lineWidth(widths, append(cols, c)) > w {
			break
		}
		cols = append(cols, c)
	}
	return cols
}

// hiddenColumns is how many columns layout leaves out at width w.
func (m *Model) hiddenColumns(w int) int { return int(numColumns) - len(m.layout(w)) }

func (m *Model) headerRow(w int) string {
	widths := m.columnWidths()
	var b strings.Builder
	b.WriteString("   ")
	for i, c := range m.layout(w) {
		if i > 0 {
			b.WriteString("  ")
		}
		t := c.title()
		if c == m.sortCol {
			if m.sortDesc {
				t += " ▼"
			} else {
				t += " ▲"
			}
		}
		pad(&b, t, widths[c], c.right())
	}
	return strings.TrimRight(b.String(), " ")
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

// bottomLines are the status line and the help.
func (m *Model) bottomLines(w int) []string {
	var parts []string
	switch {
	case m.commanding:
		parts = append(parts, m.st.filterS.Render(":"+m.command+"█")+" (nodes, events, coordinators; enter switch, esc cancel)")
	case m.view != viewNodes:
		parts = append(parts, ":"+views[m.view].name+" (: switch, esc back to nodes)")
	}
	switch {
	case m.filtering:
		parts = append(parts, m.st.filterS.Render("/"+m.filter+"█")+" (enter keep, esc clear)")
	case m.filter != "":
		parts = append(parts, fmt.Sprintf("filter %q (/ edit, esc clear)", m.filter))
	}
	if m.poll != nil {
		pos := ""
		if len(m.visible) > 0 {
			pos = fmt.Sprintf(", row %d", m.cursor+1)
		}
		parts = append(parts, fmt.Sprintf("%d of %d nodes%s", len(m.visible), len(m.rows), pos))
	}
	dir := "▲"
	if m.sortDesc {
		dir = "▼"
	}
	parts = append(parts, fmt.Sprintf("sort %s %s (s/S column, o order)", m.sortCol.name(), dir))
	if hidden := m.hiddenColumns(w); hidden > 0 || m.hscroll > 0 {
		parts = append(parts, fmt.Sprintf("%d %s hidden (←/→ scroll)", hidden, plural(hidden, "column", "columns")))
	}
	if m.hideCoordinators {
		parts = append(parts, "coordinators hidden (c)")
	}
	if m.hideWorkers {
		parts = append(parts, "workers hidden (w)")
	}
	if m.problemsOnly {
		parts = append(parts, "problem nodes only (u)")
	}
	lines := []string{m.st.footer.Render(fit(strings.Join(parts, " · "), w))}
	return append(lines, strings.Split(m.help.View(m.keys), "\n")...)
}

// fit truncates plain text to w cells.
func fit(s string, w int) string {
	if w <= 0 {
		return ""
	}
	if len(s) <= w && isASCII(s) {
		return s
	}
	return ansi.Truncate(s, w, "…")
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// wrap breaks plain text into at most n lines of w cells, at spaces where
// it can; the last line is truncated with "…".
func wrap(s string, w, n int) []string {
	lines := strings.Split(ansi.Wrap(s, w, " /"), "\n")
	if len(lines) > n {
		lines[n-1] = fit(strings.Join(lines[n-1:], " "), w)
		lines = lines[:n]
	}
	return lines
}

// flagWords names the command line's flag where an API message names its
// query parameter: top's --allow-stale, not allowStale=true.
func flagWords(s string) string {
	return strings.ReplaceAll(s, "add allowStale=true", "rerun with --allow-stale")
}

func oneLine(s string) string { return strings.ReplaceAll(strings.TrimSpace(s), "\n", "; ") }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
