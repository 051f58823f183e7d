package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/tui"
)

// topScaleNodes is the cluster size of issue 30's talonctl top row.
const topScaleNodes = 20_000

// topScalePoll is one poll of a cluster of n workers (bench.Record, as
// the API returns them) and one coordinator; step advances the counters.
func topScalePoll(n int, step uint64, now time.Time) *tui.Poll {
	obs := now.UnixMilli()
	p := &tui.Poll{Cluster: apiv1.Cluster{Meta: apiv1.Meta{Revision: "42", ObservedAtUnixMs: obs}, ClusterID: "top", ServedBy: "coord-0", PlacementVersion: "0123456789abcdef", EligibleWorkers: n}}
	coord := reportRecord("top", "coord-0", step)
	coord.Role = cluster.RoleCoordinator
	p.Nodes = append(p.Nodes, apiv1.NodeFromRecord(coord, obs))
	for i := range n {
		rec := reportRecord("top", fmt.Sprintf("worker-%05d", i), step)
		rec.Counters.RequestsTotal += step * uint64(1000+i%500)
		rec.Counters.HitsTotal += step * uint64(900+i%400)
		rec.UpdatedAtUnixMs = obs - int64(i%1000)
		p.Nodes = append(p.Nodes, apiv1.NodeFromRecord(rec, obs))
	}
	return p
}

// topScaleRow measures talonctl top's model at 20,000 nodes in a 200x60
// terminal, as pure functions: Update with a poll (rates, cells, sort)
// and View (one frame), the work of each refresh and of each redraw.
func topScaleRow(t *testing.T) reportRow {
	t.Helper()
	now := time.Now()
	m, err := tui.New(tui.Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	polls := []*tui.Poll{topScalePoll(topScaleNodes, 1, now), topScalePoll(topScaleNodes, 2, now)}
	m.Update(tea.WindowSizeMsg{Width: 200, Height: 60})
	m.Update(tui.PollMsg{Seq: 1, Poll: polls[0]})
	frame := ansi.Strip(m.Frame())
	if lines := strings.Count(frame, "\n") + 1; lines != 60 {
		t.Errorf("a frame has %d lines, want 60", lines)
	}
	if want := fmt.Sprintf("%d of %d nodes", topScaleNodes+1, topScaleNodes+1); !strings.Contains(frame, want) {
		t.Errorf("the frame does not say %q:\n%s", want, frame)
	}
	if rows := strings.Count(frame, " worker-"); rows < 10 || rows > 60 {
		t.Errorf("the frame shows %d worker rows, want one screen", rows)
	}
	seq := uint64(1)
	update := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			seq++
			m.Update(tui.PollMsg{Seq: seq, Poll: polls[seq%2]})
		}
	})
	view := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = m.View()
		}
	})
	key := testing.Benchmark(func(b *testing.B) {
		for b.Loop() {
			m.Update(tea.KeyPressMsg{Code: tea.KeyDown})
			_ = m.View()
		}
	})
	ms := func(r testing.BenchmarkResult) float64 { return float64(r.NsPerOp()) / 1e6 }
	return reportRow{path: "talonctl top, 20,000 nodes, 200x60 terminal: View() per frame (Update per poll, key+frame)",
		talon: fmt.Sprintf("View %.2f ms, %d allocs; Update(poll) %.0f ms, %.1f MB allocated; cursor key + frame %.2f ms", ms(view), view.AllocsPerOp(), ms(update), float64(update.AllocedBytesPerOp())/1e6, ms(key)),
		limit: "—", ratio: "—", goal: "Update(poll) ≤ 50 ms", met: ms(update) <= 50}
}
