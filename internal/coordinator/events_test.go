package coordinator_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/coordinator"
	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/state/memory"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/coordtest"
)

// TestMembershipEvents: the coordinator logs one structured line when a
// worker joins, turns unhealthy and expires, and when the
// PlacementVersion changes.
func TestMembershipEvents(t *testing.T) {
	clock := testsupport.NewFakeClock(time.Now())
	store := memory.New(memory.Options{Clock: clock.Now})
	t.Cleanup(func() { store.Close() })
	var logs testsupport.SyncBuffer
	timing := cluster.Timing{HeartbeatInterval: 100 * time.Millisecond, UnhealthyAfter: time.Second, LeaseTTL: 2 * time.Second}
	c := coordtest.Start(t, coordtest.Options{Store: store, Timing: timing, WaitReady: true, StoreClock: clock.Now,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	lookup := func() { _, _, _ = c.Lookup(context.Background(), "k#0", 1) }
	has := func(substrs ...string) func() bool {
		return func() bool {
			lookup()
			for _, line := range strings.Split(logs.String(), "\n") {
				all := true
				for _, s := range substrs {
					all = all && strings.Contains(line, s)
				}
				if all {
					return true
				}
			}
			return false
		}
	}
	rec := &cluster.Record{ClusterID: "test", NodeID: "w1", Role: cluster.RoleWorker, IncarnationID: "i", Address: "10.0.0.1:7500", Version: "v", Health: cluster.HealthHealthy, Ready: true}
	if _, err := store.UpsertNode(context.Background(), rec, timing.LeaseTTL); err != nil {
		t.Fatal(err)
	}
	testsupport.WaitFor(t, 5*time.Second, "join logged", has(`msg="node joined"`, "node=w1", "address=10.0.0.1:7500"))
	testsupport.WaitFor(t, 5*time.Second, "version change logged", has(`msg="placement version changed"`, "eligible_workers=1"))
	// w1 falls silent: after unhealthy-after of observation the store marks
	// it late, after lease-ttl it is expired (the store's own clock stands
	// still: the coordinator's proposals do both).
	testsupport.WaitFor(t, 5*time.Second, "unhealthy logged", has(`msg="node health changed"`, "node=w1", "now=unhealthy"))
	testsupport.WaitFor(t, 5*time.Second, "expiry logged", has(`msg="node expired or removed"`, "node=w1"))

	// The same changes are events, in order, with the readiness and
	// placement changes the log does not name one by one.
	page, _ := c.Events(coordinator.EventQuery{NodeID: "w1"})
	var types []state.NodeEventType
	for _, e := range page.Events {
		types = append(types, e.Type)
	}
	want := []state.NodeEventType{state.EventNodeJoined, state.EventNodeHealth, state.EventNodeRemoved}
	if len(types) != len(want) {
		t.Fatalf("events of w1: %v, want %v", types, want)
	}
	for i := range want {
		if types[i] != want[i] {
			t.Fatalf("events of w1: %v, want %v", types, want)
		}
	}
	if h := page.Events[1]; h.Old != "healthy" || h.New != "unhealthy" || h.Reason == "" {
		t.Fatalf("health event %+v", h)
	}
	pv, _ := c.Events(coordinator.EventQuery{Types: []state.NodeEventType{state.EventPlacementVersion}})
	if len(pv.Events) < 2 || pv.Events[len(pv.Events)-1].Reason != "0 eligible workers" {
		t.Fatalf("placement version events %+v", pv.Events)
	}
	self, _ := c.Events(coordinator.EventQuery{Types: []state.NodeEventType{state.EventSelfReady}})
	if len(self.Events) == 0 {
		t.Fatal("no coordinator_ready event")
	}
}

// TestReadinessEvents: a worker's readiness change is an event with its
// reason, and so is a restart (a new incarnation).
func TestReadinessEvents(t *testing.T) {
	store := memory.New(memory.Options{})
	t.Cleanup(func() { store.Close() })
	timing := cluster.Timing{HeartbeatInterval: 100 * time.Millisecond, UnhealthyAfter: time.Second, LeaseTTL: time.Hour}
	c := coordtest.Start(t, coordtest.Options{Store: store, Timing: timing, WaitReady: true, FrozenLiveness: true})
	rec := &cluster.Record{ClusterID: "test", NodeID: "w2", Role: cluster.RoleWorker, IncarnationID: "i1", Address: "10.0.0.2:7500", Version: "v", StartTimeUnixMs: 1_784_800_000_000, Health: cluster.HealthHealthy, Ready: true}
	put := func() {
		t.Helper()
		if _, err := store.UpsertNode(context.Background(), rec, timing.LeaseTTL); err != nil {
			t.Fatal(err)
		}
	}
	find := func(typ state.NodeEventType) func() bool {
		return func() bool {
			_, _, _ = c.Lookup(context.Background(), "k#0", 1)
			page, _ := c.Events(coordinator.EventQuery{NodeID: "w2", Types: []state.NodeEventType{typ}})
			return len(page.Events) > 0
		}
	}
	put()
	testsupport.WaitFor(t, 5*time.Second, "join event", find(state.EventNodeJoined))
	rec.Ready, rec.NotReadyReason, rec.HeartbeatSeq = false, "cordoned", 1
	put()
	testsupport.WaitFor(t, 5*time.Second, "readiness event", find(state.EventNodeReadiness))
	page, _ := c.Events(coordinator.EventQuery{NodeID: "w2", Types: []state.NodeEventType{state.EventNodeReadiness}})
	if e := page.Events[0]; e.Old != "ready" || e.New != "not_ready" || e.Reason != "cordoned" || e.Revision == "" {
		t.Fatalf("readiness event %+v", e)
	}
	rec.IncarnationID, rec.HeartbeatSeq = "i2", 0
	put()
	testsupport.WaitFor(t, 5*time.Second, "restart event", find(state.EventNodeRestarted))
}

// TestCordonRoundsAreEachAnEvent: three cordon and uncordon rounds of one
// worker are three pairs of placement_version_changed events, not one
// (issue 47: their identity was the two versions alone), and a worker
// that left and joined again under the same incarnation joins twice.
func TestCordonRoundsAreEachAnEvent(t *testing.T) {
	store := memory.New(memory.Options{})
	t.Cleanup(func() { store.Close() })
	timing := cluster.Timing{HeartbeatInterval: 100 * time.Millisecond, UnhealthyAfter: time.Second, LeaseTTL: time.Hour}
	c := coordtest.Start(t, coordtest.Options{Store: store, Timing: timing, WaitReady: true, FrozenLiveness: true})
	put := func(id, addr string) *cluster.Record {
		rec := &cluster.Record{ClusterID: "test", NodeID: id, Role: cluster.RoleWorker, IncarnationID: "i1", Address: addr, Version: "v",
			StartTimeUnixMs: 1_784_800_000_000, Health: cluster.HealthHealthy, Ready: true, FeatureLevel: cluster.BuildLevel}
		if _, err := store.UpsertNode(context.Background(), rec, timing.LeaseTTL); err != nil {
			t.Fatal(err)
		}
		return rec
	}
	put("w1", "10.0.0.1:7500")
	w2 := put("w2", "10.0.0.2:7500")
	count := func(typ state.NodeEventType, node string) int {
		_, _, _ = c.Lookup(context.Background(), "k#0", 1) // a fresh view
		page, _ := c.Events(coordinator.EventQuery{NodeID: node, Types: []state.NodeEventType{typ}})
		return len(page.Events)
	}
	testsupport.WaitFor(t, 5*time.Second, "both joined", func() bool {
		return count(state.EventNodeJoined, "w1") == 1 && count(state.EventNodeJoined, "w2") == 1
	})
	base := count(state.EventPlacementVersion, "")
	for round := 1; round <= 3; round++ {
		for _, on := range []bool{true, false} {
			m := state.MarkChange{SetCordon: true}
			if on {
				m.Cordon = state.Cordon{By: "ops", AtUnixMs: int64(1_784_900_000_000 + round)}
			}
			if _, err := store.SetMarks(context.Background(), w2.Key(), "", m); err != nil {
				t.Fatal(err)
			}
			want := base + 2*(round-1) + 1
			if !on {
				want++
			}
			testsupport.WaitFor(t, 5*time.Second, fmt.Sprintf("round %d (cordon %v): %d placement events", round, on, want), func() bool {
				return count(state.EventPlacementVersion, "") == want
			})
		}
	}
	// w2 leaves and joins again under the same incarnation.
	if _, err := store.RemoveNode(context.Background(), w2.Key(), "i1"); err != nil {
		t.Fatal(err)
	}
	testsupport.WaitFor(t, 5*time.Second, "w2 removed", func() bool { return count(state.EventNodeRemoved, "w2") == 1 })
	put("w2", "10.0.0.2:7500")
	testsupport.WaitFor(t, 5*time.Second, "w2 joined a second time", func() bool { return count(state.EventNodeJoined, "w2") == 2 })
}

// TestOperatorEventsProtected: the shared log's protected types
// (state.ProtectedEventTypes, which no worker-driven flood evicts) are
// exactly the coordinator's operator and security events.
func TestOperatorEventsProtected(t *testing.T) {
	want := []state.NodeEventType{state.EventNodeCordoned, state.EventNodeUncordoned, state.EventNodeRevoked,
		state.EventJobStarted, state.EventJobEnded}
	if got := state.ProtectedEventTypes; !slices.Equal(got, want) {
		t.Fatalf("state.ProtectedEventTypes = %v; want the operator and security events %v", got, want)
	}
}
