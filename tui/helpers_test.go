package tui

import (
	"fmt"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/testsupport"
)

// t0 is the fixed wall-clock time of the tests.
var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// newClock returns a settable clock for the model, at t0.
func newClock() *testsupport.FakeClock { return testsupport.NewFakeClock(t0) }

// view is the model's frame as plain text, as a terminal without colour
// (NO_COLOR) shows it.
func view(m *Model) string { return ansi.Strip(m.Frame()) }

// closed is a closed channel: with it as Options.Done, timer commands
// return nil at once, so tests can run the commands the model returns.
func closed() <-chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// testOptions are deterministic options: fixed clock, UTC, jitter 0.5
// (no jitter), no colour, timers that return at once.
func testOptions(c *testsupport.FakeClock) Options {
	return Options{
		Now:      c.Now,
		Location: time.UTC,
		Jitter:   func() float64 { return 0.5 },
		Done:     closed(),
	}
}

func newModel(t testing.TB, opts Options) *Model {
	t.Helper()
	m, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// send applies msgs in order and returns the last command.
func send(m *Model, msgs ...tea.Msg) tea.Cmd {
	var cmd tea.Cmd
	for _, msg := range msgs {
		_, cmd = m.Update(msg)
	}
	return cmd
}

// keys turns a string into key messages, one per rune; "\n" is enter,
// "\x1b" esc and "\b" backspace.
func keys(s string) []tea.Msg {
	var out []tea.Msg
	for _, r := range s {
		switch r {
		case '\n':
			out = append(out, tea.KeyPressMsg{Code: tea.KeyEnter})
		case '\x1b':
			out = append(out, tea.KeyPressMsg{Code: tea.KeyEscape})
		case '\b':
			out = append(out, tea.KeyPressMsg{Code: tea.KeyBackspace})
		default:
			out = append(out, tea.KeyPressMsg{Code: r, Text: string(r)})
		}
	}
	return out
}

// fixture is a small cluster at step (0, 1, ...): each step is two seconds
// later, and every worker served more. w-04 is degraded, w-05 has not
// heartbeated for 20s (late, unhealthy), w-06 is not ready.
func fixture(step int) *Poll {
	obs := t0.Add(time.Duration(step) * 2 * time.Second).Add(-500 * time.Millisecond)
	node := func(role, id, health string, ageMs int64, ready bool) apiv1.Node {
		upd := obs.UnixMilli() - ageMs
		return apiv1.Node{
			NodeID: id, Role: role, ClusterID: "prod", IncarnationID: "inc-" + id,
			Version: "1.4.2", Address: id + ".talon.internal:7500", AdminAddress: id + ".talon.internal:9090",
			StartTimeUnixMs: t0.Add(-time.Hour).UnixMilli(), HeartbeatSeq: uint64(100 + step),
			UpdatedAtUnixMs: upd, HeartbeatAtUnixMs: upd, HeartbeatAgeMs: ageMs, StatusAgeMs: ageMs, Health: health, ReportedHealth: health, Ready: ready,
			Labels: map[string]string{"zone": "z" + id[len(id)-1:]},
		}
	}
	var nodes []apiv1.Node
	for _, id := range []string{"coord-a", "coord-b"} {
		n := node("coordinator", id, "healthy", 300, true)
		n.Address = id + ".talon.internal:7400"
		n.Capacity.StoreHealthy = true
		n.Counters.PlacementLookupsTotal = uint64(1000 + 50*step)
		n.PlacementVersion, n.EligibleWorkers, n.Agree = "9f86d081884c7d65", 4, "yes"
		nodes = append(nodes, n)
	}
	for i := 1; i <= 6; i++ {
		id := fmt.Sprintf("w-%02d", i)
		health, age, ready := "healthy", int64(400+100*i), true
		switch i {
		case 4:
			health = "degraded"
		case 5:
			health, age = "unhealthy", 20_000
		case 6:
			ready = false
		}
		n := node("worker", id, health, age, ready)
		if i == 5 {
			// The late worker sent nothing new: its record, counters
			// included, is the same at every step.
			n.UpdatedAtUnixMs = t0.Add(-20500 * time.Millisecond).UnixMilli()
			n.HeartbeatAtUnixMs = n.UpdatedAtUnixMs
			n.HeartbeatAgeMs = obs.UnixMilli() - n.UpdatedAtUnixMs
			n.StatusAgeMs = n.HeartbeatAgeMs
			n.HeartbeatSeq = 100
			n.Counters = workerCounters(i, 0)
		} else {
			n.Counters = workerCounters(i, step)
		}
		n.Capacity = apiv1.Capacity{CapacityBytes: 64 << 30, ResidentBytes: uint64(i) * 9 << 30, Blocks: uint64(i) * 1000, Pages: uint64(i) * 16000}
		nodes = append(nodes, n)
	}
	return &Poll{
		Cluster: apiv1.Cluster{
			Meta: apiv1.Meta{
				SchemaVersion: 1, Revision: fmt.Sprintf("%d", 4200+step),
				ObservedAtUnixMs: obs.UnixMilli(), GeneratedAtUnixMs: obs.Add(500 * time.Millisecond).UnixMilli(),
			},
			ClusterID: "prod", ServedBy: "coord-a", PlacementVersion: "9f86d081884c7d65",
			EligibleWorkers: 4,
			Store:           apiv1.StoreStatus{Backend: "etcd", Healthy: true},
			Nodes: apiv1.ClusterNodes{
				Total:        8,
				Coordinators: apiv1.Counts{Total: 2, Healthy: 2, Ready: 2},
				Workers:      apiv1.Counts{Total: 6, Healthy: 4, Degraded: 1, Unhealthy: 1, Ready: 5},
			},
			Coordinators: apiv1.CoordinatorPresence{Expected: 2, Present: 2, Ready: 2, Missing: []apiv1.MissingCoordinator{}, Complete: true},
			Capacity: apiv1.ClusterCapacity{Workers: 6, CapacityBytes: 6 * 64 << 30, ResidentBytes: 189 << 30, HitRatio: ptrTo(0.9),
				RequestsPerSecond: ptrTo(float64(1000 + step)), BytesServedPerSecond: ptrTo(10.5e6), BackendErrorsPerSecond: ptrTo(0.0), RateWorkers: 6},
			Timing: apiv1.Timing{HeartbeatIntervalMs: 1000, UnhealthyAfterMs: 15000, LeaseTTLMs: 30000},
		},
		Nodes:  nodes,
		Server: "https://coord-a.talon.internal:9090",
	}
}

// workerCounters grow by a per-worker amount every two-second step:
// worker i serves 100*i requests, 1 MiB*i, with i*10 misses and i/2
// evictions per step.
func workerCounters(i, step int) apiv1.Counters {
	s := uint64(step + 10)
	u := uint64(i)
	return apiv1.Counters{
		RequestsTotal:    100 * u * s,
		HitsTotal:        90 * u * s,
		MissesTotal:      10 * u * s,
		BytesServedTotal: (1 << 20) * u * s,
		EvictionsTotal:   u * s / 2,
	}
}

// bigPoll is a cluster of n nodes: 3 coordinators and n-3 workers,
// every 97th one late.
func bigPoll(n, step int) *Poll {
	s := fixture(step)
	obs := s.Cluster.ObservedAtUnixMs
	nodes := make([]apiv1.Node, 0, n)
	for i := range n {
		role, id := "worker", fmt.Sprintf("w-%05d", i)
		if i < 3 {
			role, id = "coordinator", fmt.Sprintf("coord-%d", i)
		}
		age := int64(100 + i%900)
		health := "healthy"
		if i%97 == 0 {
			age, health = 16_000+int64(i), "unhealthy"
		}
		nodes = append(nodes, apiv1.Node{
			NodeID: id, Role: role, ClusterID: "prod", IncarnationID: "inc-" + id, Version: "1.4.2",
			Address: fmt.Sprintf("10.%d.%d.%d:7500", i/65536, i/256%256, i%256), HeartbeatSeq: uint64(step),
			UpdatedAtUnixMs: obs - age, HeartbeatAtUnixMs: obs - age, HeartbeatAgeMs: age, StatusAgeMs: age, Health: health, ReportedHealth: health, Ready: true,
			Labels:   map[string]string{"zone": fmt.Sprintf("z%d", i%3)},
			Capacity: apiv1.Capacity{CapacityBytes: 64 << 30, ResidentBytes: uint64(i%64) << 30},
			Counters: workerCounters(i%50+1, step),
		})
	}
	s.Nodes = nodes
	return s
}

func ptrTo[T any](v T) *T { return &v }
