package tui

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/talonhq/talon/internal/format"
)

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
