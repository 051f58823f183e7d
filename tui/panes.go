package tui

import (
	"fmt"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/format"
)

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

// eventsModel is the events sub-model: the answering coordinator's
// newest events, from the applied poll. It is a pane under the node
// table of a tall terminal and the whole body of the :events view; the
// parent routes no keys to it (esc, back to the nodes, is the parent's).
type eventsModel struct {
	st  styles
	loc *time.Location

	events   []apiv1.Event // oldest first
	servedBy string        // the coordinator that sent them
}

func newEvents(st styles, loc *time.Location) eventsModel {
	return eventsModel{st: st, loc: loc}
}

// Update takes the events of a poll the parent applied (PollMsg); other
// messages change nothing.
func (e eventsModel) Update(msg tea.Msg) eventsModel {
	if p, ok := msg.(PollMsg); ok && p.Poll != nil {
		e.events, e.servedBy = p.Poll.Events, p.Poll.Cluster.ServedBy
	}
	return e
}

// View renders the events pane for a terminal h rows high: a title and
// the newest events that fit in a quarter of h; none below
// eventsMinHeight rows or without events.
func (e eventsModel) View(w, h int, now time.Time) []string {
	if h < eventsMinHeight || len(e.events) == 0 {
		return nil
	}
	return e.newest(w, h/4-1, now)
}

// newest renders the title and the newest n events, one line each.
func (e eventsModel) newest(w, n int, now time.Time) []string {
	n = min(len(e.events), n)
	evs := e.events[len(e.events)-n:]
	lines := []string{e.st.colHeader.Render(fit(fmt.Sprintf("   EVENTS of %s, newest last (talonctl events -w for every coordinator)", orDash(e.servedBy)), w))}
	for _, ev := range evs {
		text, st := e.eventLine(ev, now)
		lines = append(lines, st.Render(strings.TrimRight(fit(text, w), " ")))
	}
	return lines
}

// eventsIndent is where a wrapped event's continuation lines start: under
// its type, after the time.
const eventsIndent = 13

// Body renders the :events view for a body h rows high: the title and the
// newest events that fit, each wrapped to w cells (continuation lines
// indented), so that nothing is cut; at least the newest event shows.
func (e eventsModel) Body(w, h int, now time.Time) []string {
	title := e.st.colHeader.Render(fit(fmt.Sprintf("   EVENTS of %s, newest last (talonctl events -w for every coordinator)", orDash(e.servedBy)), w))
	if len(e.events) == 0 {
		return []string{title, "   no events yet"}
	}
	var blocks [][]string
	used := 1
	for i := len(e.events) - 1; i >= 0; i-- {
		text, st := e.eventLine(e.events[i], now)
		wrapped := wrapIndent(text, w, eventsIndent)
		if used+len(wrapped) > h && len(blocks) > 0 {
			break
		}
		used += len(wrapped)
		for j, l := range wrapped {
			wrapped[j] = st.Render(l)
		}
		blocks = append(blocks, wrapped)
	}
	lines := []string{title}
	for i := len(blocks) - 1; i >= 0; i-- {
		lines = append(lines, blocks[i]...)
	}
	return lines
}

// eventLine is one event as a line of text, before fitting, and its style.
func (e eventsModel) eventLine(ev apiv1.Event, now time.Time) (string, lipgloss.Style) {
	node := "-"
	if ev.NodeID != "" {
		node = format.Text(ev.Role) + "/" + format.Text(ev.NodeID)
	}
	change := ev.New
	if ev.Old != "" {
		change = ev.Old + " -> " + ev.New
	}
	text := fmt.Sprintf("   %s  %-26s %-18s %-20s %s", formatClock(time.UnixMilli(ev.TimeUnixMs).In(e.loc), now.In(e.loc)), ev.Type, node, change, format.Text(ev.Reason))
	st := e.st.header
	switch ev.Type {
	case "node_expired_or_removed", "coordinator_unready", "store_unreachable", "node_revoked":
		st = e.st.bad
	case "node_cordoned":
		st = e.st.warn
	case "node_health_changed", "node_readiness_changed":
		if ev.New != "healthy" && ev.New != "ready" {
			st = e.st.warn
		}
	}
	return strings.TrimRight(text, " "), st
}

// wrapIndent wraps plain text to w cells at spaces (hard within a word
// longer than a line), continuation lines indented by indent cells.
func wrapIndent(s string, w, indent int) []string {
	if w <= indent+8 {
		indent = 0 // too narrow to indent
	}
	if w <= 0 {
		return []string{s}
	}
	first, rest, _ := strings.Cut(ansi.Wrap(s, w, ""), "\n")
	lines := []string{strings.TrimRight(first, " ")}
	if rest = strings.TrimSpace(strings.ReplaceAll(rest, "\n", " ")); rest != "" {
		pad := strings.Repeat(" ", indent)
		for _, l := range strings.Split(ansi.Wrap(rest, w-indent, ""), "\n") {
			lines = append(lines, pad+strings.TrimRight(l, " "))
		}
	}
	return lines
}
