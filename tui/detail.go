package tui

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/talonhq/talon/internal/format"
)

// detailModel is the detail pane sub-model: the selected node's record
// in full, scrolled by offset. The parent opens it over the node table
// (open), sets the poll's timing it explains (threshold, statusInterval)
// and, before each key, how far the text can scroll (maxOffset); it gives
// View the selected node and its row.
type detailModel struct {
	keys keyMap
	st   styles
	loc  *time.Location

	// threshold is the late threshold of the applied poll;
	// statusInterval how often quiet nodes write their status (0:
	// unknown). The parent sets both per poll.
	threshold, statusInterval time.Duration
	// maxOffset is the largest offset: the text's length less the rows
	// it has. The parent sets it before each key.
	maxOffset int
	offset    int
}

func newDetail(k keyMap, st styles, loc *time.Location) detailModel {
	return detailModel{keys: k, st: st, loc: loc}
}

// open shows the pane from its first line.
func (d detailModel) open() detailModel {
	d.offset = 0
	return d
}

// Update applies one key while the pane is open; closed reports that the
// key closes it (esc, enter).
func (d detailModel) Update(msg tea.KeyPressMsg) (_ detailModel, closed bool) {
	k := d.keys
	switch {
	case key.Matches(msg, k.Back, k.Detail):
		return d, true
	case key.Matches(msg, k.Up):
		d.offset = max(d.offset-1, 0)
	case key.Matches(msg, k.Down):
		d.offset = min(d.offset+1, d.maxOffset)
	case key.Matches(msg, k.Top):
		d.offset = 0
	}
	return d, false
}

// View renders the pane of node sel (r its row, nil when the node is not
// in the applied poll) in n lines of w cells.
func (d detailModel) View(w, n int, now time.Time, sel nodeKey, r *row) []string {
	text := d.text(sel, r, now)
	off := min(d.offset, max(len(text)-n, 0))
	text = text[off:min(len(text), off+n)]
	out := make([]string, len(text))
	for j, t := range text {
		out[j] = fit(t, w)
		if j == 0 && off == 0 {
			out[j] = d.st.title.Render(out[j])
		}
	}
	return out
}

// text is every line of the pane.
func (d detailModel) text(sel nodeKey, r *row, now time.Time) []string {
	if r == nil {
		return []string{fmt.Sprintf("%s %s is not in the current snapshot · esc back", sel.role, sel.id)}
	}
	return d.detailText(r, now)
}

func (d detailModel) detailText(r *row, now time.Time) []string {
	n := r.node
	loc := d.loc
	ms := func(v int64) string {
		if v == 0 {
			return "-"
		}
		return formatClock(time.UnixMilli(v).In(loc), now.In(loc))
	}
	kv := func(k, v string) string { return fmt.Sprintf("  %-13s %s", k, v) }
	hb := fmt.Sprintf("seq %d, accepted %s, age %s at observation", n.HeartbeatSeq, ms(n.HeartbeatAtUnixMs), formatAgeMs(n.HeartbeatAgeMs))
	if r.late {
		hb += fmt.Sprintf(" — LATE (marked by the store, or above %s)", formatInterval(d.threshold))
	}
	status := fmt.Sprintf("written %s, age %s: capacity, counters and rates are as of then", ms(n.StatusAtUnixMs), formatAgeMs(n.StatusAgeMs))
	if d.statusInterval > 0 {
		status += fmt.Sprintf(" (quiet nodes write it every %s)", formatInterval(d.statusInterval))
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
			kv("rates", ratesText(r)),
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

func ratesText(r *row) string {
	if !r.rates.known {
		return "- (needs two heartbeats of this incarnation)"
	}
	hit := format.Percent(r.rates.hitRatio)
	return fmt.Sprintf("%s requests/s, hit ratio %s, %s bytes/s, %s evictions/s",
		format.Rate(r.rates.reqPerSec), hit, format.Rate(r.rates.bytesPerSec), format.Rate(r.rates.evictPerSec))
}
