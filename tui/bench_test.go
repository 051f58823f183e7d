package tui

import (
	"fmt"
	"testing"

	tea "charm.land/bubbletea/v2"

	"github.com/talonhq/talon/internal/apiv1"
)

const benchNodes = 5000

// scaleNodes is the cluster size of issue 30's top row.
const scaleNodes = 20_000

// benchModel is a model showing a cluster of n nodes in a 200x60
// terminal, with rates known.
func benchModel(b *testing.B, n int) *Model {
	b.Helper()
	m := newModel(b, testOptions(newClock()))
	send(m, tea.WindowSizeMsg{Width: 200, Height: 60},
		PollMsg{Seq: 1, Poll: bigPoll(n, 0)},
		PollMsg{Seq: 2, Poll: bigPoll(n, 1)})
	return m
}

// BenchmarkView measures one frame of a 5,000- and a 20,000-node
// cluster, fresh and stale (banner, dimmed rows); 500 nodes for
// comparison: the cost of a frame does not depend on the number of nodes.
func BenchmarkView(b *testing.B) {
	for _, n := range []int{500, benchNodes, scaleNodes} {
		b.Run(fmt.Sprintf("nodes=%d/fresh", n), func(b *testing.B) {
			m := benchModel(b, n)
			b.ReportAllocs()
			for b.Loop() {
				_ = m.Frame()
			}
		})
		b.Run(fmt.Sprintf("nodes=%d/stale", n), func(b *testing.B) {
			m := benchModel(b, n)
			send(m, FetchErrorMsg{Seq: 3, Err: apiv1.ErrUnavailable})
			b.ReportAllocs()
			for b.Loop() {
				_ = m.Frame()
			}
		})
	}
}

// BenchmarkApplyPoll measures the per-poll work (Update with a PollMsg)
// at 5,000 and 20,000 nodes: rates, cells, widths, filter and sort.
func BenchmarkApplyPoll(b *testing.B) {
	for _, n := range []int{benchNodes, scaleNodes} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			m := benchModel(b, n)
			polls := []*Poll{bigPoll(n, 2), bigPoll(n, 3)}
			seq := uint64(2)
			b.ReportAllocs()
			for b.Loop() {
				seq++
				send(m, PollMsg{Seq: seq, Poll: polls[seq%2]})
			}
		})
	}
}

// BenchmarkKeystroke measures one filter keystroke and one sort change at
// 5,000 nodes, each followed by a frame: what the operator waits for.
func BenchmarkKeystroke(b *testing.B) {
	b.Run("filter", func(b *testing.B) {
		m := benchModel(b, benchNodes)
		send(m, keys("/w-01")...)
		b.ReportAllocs()
		for b.Loop() {
			send(m, keys("2")...)
			send(m, tea.KeyPressMsg{Code: tea.KeyBackspace})
			_ = m.Frame()
		}
	})
	b.Run("sort", func(b *testing.B) {
		m := benchModel(b, benchNodes)
		b.ReportAllocs()
		for b.Loop() {
			send(m, keys("s")...)
			_ = m.Frame()
		}
	})
}
