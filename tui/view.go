package tui

import (
	"io"
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
		lines = append(lines, m.nodeTable.viewAll(w, m.Stale())...)
		return strings.Join(lines, "\n") + "\n"
	}
	bottom := m.bottomLines(w)
	nodesView := !m.detail && m.view == viewNodes
	var coords, events []string
	if nodesView {
		coords, events = m.coordinatorLines(w, h), m.events.View(w, h, now)
	}
	n := max(h-len(lines)-len(coords)-len(events)-len(bottom), 1)
	var body []string
	if nodesView {
		// A table shorter than its room gives the rest to the events
		// pane (more events), rather than to blank lines.
		body = m.nodeTable.View(w, n, m.Stale())
		if spare := n - len(body); spare > 0 && len(events) > 0 {
			more := m.events.newest(w, len(events)-1+spare, now)
			n -= len(more) - len(events)
			events = more
		}
	}
	bottom = append(append(coords, events...), bottom...)
	switch {
	case m.view == viewEvents:
		body = m.events.Body(w, n, now) // the whole body, wrapped
	case m.view == viewCoordinators:
		body = m.coordinatorLines(coordinatorsMinWidth, coordinatorsMinHeight)
		if len(body) == 0 {
			body = []string{"no coordinator records"}
		}
	case m.detail:
		sel, r := m.nodeTable.selection()
		body = m.detailPane.View(w, n, now, sel, r)
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
		chrome += len(m.coordinatorLines(w, h)) + len(m.events.View(w, h, now))
	}
	return max(h-chrome, 1)
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
	if f := m.filterLine.View(); f != "" {
		parts = append(parts, f)
	}
	parts = append(parts, m.nodeTable.statusParts(w)...)
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
