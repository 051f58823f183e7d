package tui

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/format"
)

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
		upgradeText(c.Upgrade),
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

// upgradeText says, in capitals (it must not rely on colour), that the
// cluster is mid-upgrade, with the cluster's feature level and how many
// processes run each build version; "" when one build runs or the
// coordinator sends no survey.
func upgradeText(u *apiv1.Upgrade) string {
	if u == nil || !u.Mixed {
		return ""
	}
	counts := map[string]int{}
	var order []string
	for _, v := range u.Versions {
		if _, ok := counts[v.Version]; !ok {
			order = append(order, v.Version)
		}
		counts[v.Version] += v.Count
	}
	parts := make([]string, len(order))
	for i, v := range order {
		parts[i] = fmt.Sprintf("%s ×%d", orDash(v), counts[v])
	}
	return fmt.Sprintf("MID-UPGRADE level %d: %s", u.FeatureLevel, strings.Join(parts, ", "))
}

// missingText names the missing coordinators in capitals (it must not
// rely on colour), or says how many when the answering one knows no name.
func missingText(p apiv1.CoordinatorPresence) string {
	switch {
	case p.Expected == 0 || p.Present >= p.Expected:
		return ""
	case len(p.Missing) > 0:
		return "MISSING " + strings.Join(apiv1.MissingNames(p.Missing), ", ")
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
