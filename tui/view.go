package tui

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
	"github.com/charmbracelet/x/ansi"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/format"
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

// eventsMinHeight is the terminal height from which the events pane shows.
const eventsMinHeight = 40

// Sizes from which the coordinators pane shows.
const (
	coordinatorsMinWidth  = 160
	coordinatorsMinHeight = 50
)

// coordinatorLines is the coordinators pane of a large terminal: each
// coordinator as its record shows it, with the placement it publishes
// (PlacementVersion, eligible) and whether that is the answering one's
// (AGREE, as talonctl coordinators list marks it; DISAGREES in words).
func (m *Model) coordinatorLines(w, h int) []string {
	if w < coordinatorsMinWidth || h < coordinatorsMinHeight || m.poll == nil {
		return nil
	}
	c := &m.poll.Cluster
	var rows []string
	for _, i := range m.coords {
		n := &m.poll.Nodes[i]
		ready := "ready"
		if !n.Ready {
			ready = "NOT READY"
			if n.NotReadyReason != "" {
				ready += " (" + n.NotReadyReason + ")"
			}
		}
		store := "reads the store"
		if !n.Capacity.StoreHealthy {
			store = "STORE READ FAILING"
		}
		view := coordinatorView(n, c)
		rows = append(rows, m.st.header.Render(strings.TrimRight(fit(fmt.Sprintf("   %-16s %-24s %-20s %-12s hb %-7s %s",
			format.Text(n.NodeID), ready, store, format.Text(n.Version), formatAgeMs(n.HeartbeatAgeMs), view), w), " ")))
		if len(rows) == 6 {
			break
		}
	}
	if len(rows) == 0 {
		return nil
	}
	title := m.st.colHeader.Render(fit("   COORDINATORS as their records show them, each with the placement it publishes (agree: the same as the answering one's)", w))
	return append([]string{title}, rows...)
}

// coordinatorView is the placement coordinator n publishes and whether
// the answering coordinator agrees: "placement 9f86d081884c7d65, 4
// eligible, agree yes"; the answering one adds its revision.
func coordinatorView(n *apiv1.Node, c *apiv1.Cluster) string {
	var parts []string
	if n.NodeID == c.ServedBy {
		parts = append(parts, "answering: revision "+orDash(c.Revision))
		parts = append(parts, fmt.Sprintf("placement %s, %d eligible", orDash(c.PlacementVersion), c.EligibleWorkers))
	} else if n.PlacementVersion != "" {
		parts = append(parts, fmt.Sprintf("placement %s, %d eligible", n.PlacementVersion, n.EligibleWorkers))
	}
	switch n.Agree {
	case "yes":
		parts = append(parts, "agree yes")
	case "no":
		parts = append(parts, "DISAGREES with "+c.ServedBy)
	case "-":
		parts = append(parts, "agree -")
	}
	return strings.Join(parts, ", ")
}

// eventLines is the events pane of a tall terminal: a title and the
// newest events that fit in a quarter of the height; none below
// eventsMinHeight rows or without events.
func (m *Model) eventLines(w, h int, now time.Time) []string {
	if h < eventsMinHeight || m.poll == nil || len(m.poll.Events) == 0 {
		return nil
	}
	n := min(len(m.poll.Events), h/4-1)
	evs := m.poll.Events[len(m.poll.Events)-n:]
	lines := []string{m.st.colHeader.Render(fit(fmt.Sprintf("   EVENTS of %s, newest last (talonctl events -w for every coordinator)", orDash(m.poll.Cluster.ServedBy)), w))}
	loc := m.opts.Location
	for _, e := range evs {
		node := "-"
		if e.NodeID != "" {
			node = format.Text(e.Role) + "/" + format.Text(e.NodeID)
		}
		change := e.New
		if e.Old != "" {
			change = e.Old + " -> " + e.New
		}
		text := fmt.Sprintf("   %s  %-26s %-18s %-20s %s", formatClock(time.UnixMilli(e.TimeUnixMs).In(loc), now.In(loc)), e.Type, node, change, format.Text(e.Reason))
		st := m.st.header
		switch e.Type {
		case "node_expired_or_removed", "coordinator_unready", "store_unreachable", "node_revoked":
			st = m.st.bad
		case "node_cordoned":
			st = m.st.warn
		case "node_health_changed", "node_readiness_changed":
			if e.New != "healthy" && e.New != "ready" {
				st = m.st.warn
			}
		}
		lines = append(lines, st.Render(strings.TrimRight(fit(text, w), " ")))
	}
	return lines
}

// topLines are the header, the summary and the banner.
func (m *Model) topLines(w int, now time.Time) []string {
	l1, l2, l3, l4 := m.headerText(now)
	data := m.st.header
	if m.Stale() {
		data = m.st.dim
	}
	// On a wide terminal each group of parts is one line; a narrow one
	// packs the parts into as many lines as the width needs, so that at
	// 80 columns nothing (the observation age least of all) is cut off.
	var texts []string
	if w >= wideHeader {
		for _, parts := range [][]string{l1, l2, l3, l4} {
			texts = append(texts, pack(parts, w)...)
		}
	} else {
		texts = pack(slices.Concat(l1, l2, l3, l4), w)
	}
	lines := make([]string, 0, len(texts)+4)
	for i, t := range texts {
		st := data
		if i == 0 {
			st = m.st.title
		}
		lines = append(lines, st.Render(fit(t, w)))
	}
	return append(lines, m.bannerLines(w, now)...)
}

// wideHeader is the width from which the header keeps its three lines
// and names the server's URL.
const wideHeader = 120

// pack joins parts with " · " into lines of at most w cells, starting a
// new line where the next part would not fit.
func pack(parts []string, w int) []string {
	var lines []string
	cur := ""
	for _, p := range parts {
		if p == "" {
			continue
		}
		switch {
		case cur == "":
			cur = p
		case ansi.StringWidth(cur)+3+ansi.StringWidth(p) <= w:
			cur += " · " + p
		default:
			lines = append(lines, cur)
			cur = p
		}
	}
	if cur != "" || len(lines) == 0 {
		lines = append(lines, cur)
	}
	return lines
}

// headerText returns the parts of the three header lines: who answered,
// the snapshot (its age first), and the counts.
func (m *Model) headerText(now time.Time) (l1, l2, l3, l4 []string) {
	refresh := "refresh " + formatInterval(m.opts.Refresh)
	if m.poll == nil {
		l2 = []string{"waiting for the first snapshot"}
		if m.err != nil {
			l2 = []string{"no snapshot yet"}
		}
		return []string{"talon top", refresh}, l2, nil, nil
	}
	c := &m.poll.Cluster
	served := "served by " + orDash(c.ServedBy)
	if w, _ := m.size(); m.poll.Server != "" && w >= wideHeader {
		served += " (" + m.poll.Server + ")"
	}
	l1 = []string{"talon top", "cluster " + orDash(c.ClusterID), served, refresh}

	// The store is healthy only as of a fresh answer: while fetches fail
	// (or the answer is the last good snapshot) the header says so.
	var store string
	switch {
	case m.err != nil:
		store = "store " + orDash(c.Store.Backend) + " UNKNOWN (no current answer)"
	case !c.Store.Healthy || c.Stale:
		store = "store " + orDash(c.Store.Backend) + " UNHEALTHY"
		if c.Store.ErrorCode != "" {
			store += " (" + c.Store.ErrorCode + ")"
		}
	default:
		store = "store " + orDash(c.Store.Backend) + " healthy"
	}
	observed := m.observedAt()
	l2 = []string{
		fmt.Sprintf("observed %s ago (%s)", formatAge(m.dataAge(now)), formatClock(observed, now.In(m.opts.Location))),
		store,
		"revision " + orDash(c.Revision),
		"placement " + orDash(c.PlacementVersion),
	}
	l3 = []string{
		"coordinators " + presenceText(c.Coordinators, c.Nodes.Coordinators),
		missingText(c.Coordinators),
		"workers " + countsText(c.Nodes.Workers),
		fmt.Sprintf("eligible %d", c.EligibleWorkers),
		fmt.Sprintf("late heartbeats (>%s) %d", formatInterval(m.threshold), m.lateCount),
	}
	return l1, l2, l3, totalsText(c.Capacity)
}

// presenceText is the coordinators' counts with the total as present of
// expected, "2/3: 2 healthy, 2 ready", like a Deployment's READY; the
// plain counts from a coordinator that sends no expected count.
func presenceText(p apiv1.CoordinatorPresence, c apiv1.Counts) string {
	s := countsText(c)
	if p.Expected == 0 {
		return s
	}
	return fmt.Sprintf("%d/%d", p.Present, p.Expected) + strings.TrimPrefix(s, fmt.Sprint(c.Total))
}

// missingText names the missing coordinators in capitals (it must not
// rely on colour), or says how many when the answering one knows no name.
func missingText(p apiv1.CoordinatorPresence) string {
	switch {
	case p.Expected == 0 || p.Present >= p.Expected:
		return ""
	case len(p.Missing) > 0:
		return "MISSING " + strings.Join(p.Missing, ", ")
	}
	return fmt.Sprintf("MISSING %d", p.Expected-p.Present)
}

// totalsText are the cluster's totals: resident of capacity, hit ratio,
// request, byte and backend error rates ("-" until known).
func totalsText(c apiv1.ClusterCapacity) []string {
	if c.Workers == 0 {
		return nil
	}
	parts := []string{fmt.Sprintf("resident %s/%s", format.BytesShort(c.ResidentBytes), format.BytesShort(c.CapacityBytes))}
	hit := "-"
	if c.HitRatio != nil {
		hit = format.Percent(*c.HitRatio)
	}
	parts = append(parts, "hit "+hit)
	rate := func(v *float64, unit string) string {
		if v == nil {
			return unit + " -"
		}
		return unit + " " + format.Rate(*v)
	}
	return append(parts, rate(c.RequestsPerSecond, "req/s"), rate(c.BytesServedPerSecond, "bytes/s"), rate(c.BackendErrorsPerSecond, "backend err/s"))
}

func countsText(c apiv1.Counts) string {
	s := fmt.Sprintf("%d: %d healthy", c.Total, c.Healthy)
	for _, x := range []struct {
		n    int
		what string
	}{{c.Degraded, "degraded"}, {c.Unhealthy, "unhealthy"}, {c.Unknown, "unknown"}} {
		if x.n > 0 {
			s += fmt.Sprintf(", %d %s", x.n, x.what)
		}
	}
	return s + fmt.Sprintf(", %d ready", c.Ready)
}

// observedAt is the snapshot's observation time (server clock) in the
// display zone.
func (m *Model) observedAt() time.Time {
	return time.UnixMilli(m.poll.Cluster.ObservedAtUnixMs).In(m.opts.Location)
}

// dataAge is how old the data on screen is: the time since it arrived
// (local clock) plus how old it already was when the server sent it (the
// server's generation minus observation time, both on its clock), so that
// clock skew between server and terminal does not enter.
func (m *Model) dataAge(now time.Time) time.Duration {
	c := &m.poll.Cluster
	return now.Sub(m.receivedAt) + time.Duration(max(c.GeneratedAtUnixMs-c.ObservedAtUnixMs, 0))*time.Millisecond
}

// bannerLines is the STALE (or NO DATA) banner, empty when the data is
// current.
func (m *Model) bannerLines(w int, now time.Time) []string {
	if !m.Stale() {
		return nil
	}
	var title, what string
	switch {
	case m.poll == nil:
		title, what = " NO DATA ", "no snapshot received yet"
	case m.err == nil:
		title = " STALE "
		what = fmt.Sprintf("the coordinator answered from its last good snapshot, observed %s (%s ago); data below may not be current",
			formatClock(m.observedAt(), now.In(m.opts.Location)), formatAge(m.dataAge(now)))
	default:
		title = " STALE "
		what = fmt.Sprintf("showing the last good snapshot, observed %s (%s ago); data below is not current",
			formatClock(m.observedAt(), now.In(m.opts.Location)), formatAge(m.dataAge(now)))
	}
	inner := max(w-4, 10) // border and padding
	text := []string{m.st.bannerTitle.Render(title) + " " + fit(what, inner-len(title)-1)}
	if m.err != nil {
		text = append(text, wrap("error: "+flagWords(oneLine(m.err.Error())), inner, 2)...)
		since := formatClock(m.failingAt.In(m.opts.Location), now.In(m.opts.Location))
		retry := "retrying now"
		if !m.nextAt.IsZero() {
			retry = fmt.Sprintf("next retry in %s (%s)", formatCountdown(m.nextAt.Sub(now)), formatClock(m.nextAt.In(m.opts.Location), now.In(m.opts.Location)))
		}
		text = append(text, fit(fmt.Sprintf("%d failed %s since %s · %s · backoff up to %s · r retries now",
			m.failures, plural(m.failures, "attempt", "attempts"), since, retry, formatInterval(m.backoff.Max)), inner))
	} else {
		store := "store " + orDash(m.poll.Cluster.Store.Backend) + " unavailable"
		if code := m.poll.Cluster.Store.ErrorCode; code != "" {
			store += " (" + code + ")"
		}
		text = append(text, fit(store, inner))
		if !m.nextAt.IsZero() {
			text = append(text, fit("next refresh in "+formatCountdown(m.nextAt.Sub(now)), inner))
		}
	}
	if w < 12 {
		return text
	}
	return strings.Split(m.st.banner.Width(w).Render(strings.Join(text, "\n")), "\n")
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

// detailLines renders the selected node's detail pane in n lines.
func (m *Model) detailLines(w, n int, now time.Time) []string {
	text := m.detailAll(now)
	off := min(m.detailOffset, max(len(text)-n, 0))
	text = text[off:min(len(text), off+n)]
	out := make([]string, len(text))
	for j, t := range text {
		out[j] = fit(t, w)
		if j == 0 && off == 0 {
			out[j] = m.st.title.Render(out[j])
		}
	}
	return out
}

// detailAll is every line of the detail pane.
func (m *Model) detailAll(now time.Time) []string {
	i, ok := m.index[m.selected]
	if !ok {
		return []string{fmt.Sprintf("%s %s is not in the current snapshot · esc back", m.selected.role, m.selected.id)}
	}
	return m.detailText(&m.rows[i], now)
}

func (m *Model) detailText(r *row, now time.Time) []string {
	n := r.node
	loc := m.opts.Location
	ms := func(v int64) string {
		if v == 0 {
			return "-"
		}
		return formatClock(time.UnixMilli(v).In(loc), now.In(loc))
	}
	kv := func(k, v string) string { return fmt.Sprintf("  %-13s %s", k, v) }
	hb := fmt.Sprintf("seq %d, accepted %s, age %s at observation", n.HeartbeatSeq, ms(n.HeartbeatAtUnixMs), formatAgeMs(n.HeartbeatAgeMs))
	if r.late {
		hb += fmt.Sprintf(" — LATE (marked by the store, or above %s)", formatInterval(m.threshold))
	}
	status := fmt.Sprintf("written %s, age %s: capacity, counters and rates are as of then", ms(n.StatusAtUnixMs), formatAgeMs(n.StatusAgeMs))
	if si := m.poll.Cluster.Timing.StatusIntervalMs; si > 0 {
		status += fmt.Sprintf(" (quiet nodes write it every %s)", formatInterval(time.Duration(si)*time.Millisecond))
	}
	ready := "no"
	if n.Ready {
		ready = "yes"
	}
	labels := make([]string, 0, len(n.Labels))
	for _, k := range slices.Sorted(maps.Keys(n.Labels)) {
		labels = append(labels, format.Text(k)+"="+format.Text(n.Labels[k]))
	}
	t := format.Text
	lines := []string{
		fmt.Sprintf("%s %s · esc back", t(n.Role), t(n.NodeID)),
		"",
		kv("cluster", orDash(t(n.ClusterID))),
		kv("incarnation", orDash(t(n.IncarnationID))),
		kv("version", orDash(t(n.Version))),
		kv("address", orDash(t(n.Address))),
		kv("admin", orDash(t(n.AdminAddress))),
		kv("started", ms(n.StartTimeUnixMs)),
		kv("heartbeat", hb),
		kv("status", status),
		kv("health", fmt.Sprintf("%s (reported %s)", n.Health, orDash(n.ReportedHealth))),
		kv("ready", ready),
		kv("labels", orDash(strings.Join(labels, ", "))),
	}
	if c := n.Cordon; c != nil {
		lines = append(lines, kv("cordoned", fmt.Sprintf("by %s at %s", orDash(t(c.By)), ms(c.AtUnixMs))))
	}
	cp, ct := n.Capacity, n.Counters
	if r.worker {
		pct := "-"
		if cp.CapacityBytes > 0 {
			pct = fmt.Sprintf("%.0f%%", 100*fill(cp))
		}
		lines = append(lines,
			kv("capacity", fmt.Sprintf("resident %s of %s (%s), %d blocks, %d pages, %d loads in flight",
				format.BytesShort(cp.ResidentBytes), format.BytesShort(cp.CapacityBytes), pct, cp.Blocks, cp.Pages, cp.InflightLoads)),
			kv("rates", m.ratesText(r)),
			kv("requests", fmt.Sprintf("%d total, %d errors", ct.RequestsTotal, ct.ErrorsTotal)),
			kv("cache", fmt.Sprintf("%d hits, %d misses, %d evictions, %s served", ct.HitsTotal, ct.MissesTotal, ct.EvictionsTotal, format.BytesShort(ct.BytesServedTotal))),
			kv("backend", fmt.Sprintf("%d fetches, %d errors", ct.BackendFetchesTotal, ct.BackendErrorsTotal)),
		)
	} else {
		sh := "no"
		if cp.StoreHealthy {
			sh = "yes"
		}
		lines = append(lines, kv("store read", sh))
	}
	lines = append(lines,
		kv("placement", fmt.Sprintf("%d lookups, %d errors", ct.PlacementLookupsTotal, ct.PlacementErrorsTotal)),
		kv("store errors", fmt.Sprintf("%d", ct.StoreErrorsTotal)),
	)
	return lines
}

func (m *Model) ratesText(r *row) string {
	if !r.rates.known {
		return "- (needs two heartbeats of this incarnation)"
	}
	hit := format.Percent(r.rates.hitRatio)
	return fmt.Sprintf("%s requests/s, hit ratio %s, %s bytes/s, %s evictions/s",
		format.Rate(r.rates.reqPerSec), hit, format.Rate(r.rates.bytesPerSec), format.Rate(r.rates.evictPerSec))
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
