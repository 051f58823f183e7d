package coordinator

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/state/memory"
)

// TestEventLogKeepsAnIDOnce: a node event observed locally and read back
// from the store is listed once; evicted IDs may come back; the age bound
// hides old events.
func TestEventLogKeepsAnIDOnce(t *testing.T) {
	now := time.Unix(10_000, 0)
	l := newEventLog(2, time.Hour, func() time.Time { return now })
	if _, added := l.add(Event{NodeEvent: state.NodeEvent{Type: state.EventNodeRemoved, NodeID: "w1", ID: "x"}}); !added {
		t.Fatal("first add of x not added")
	}
	if _, added := l.add(Event{NodeEvent: state.NodeEvent{Type: state.EventNodeRemoved, NodeID: "w1", ID: "x", Coordinator: "c2"}}); added {
		t.Fatal("second add of x added")
	}
	l.add(Event{NodeEvent: state.NodeEvent{Type: state.EventSelfReady}})
	l.add(Event{NodeEvent: state.NodeEvent{Type: state.EventSelfReady}}) // evicts x
	if _, added := l.add(Event{NodeEvent: state.NodeEvent{Type: state.EventNodeRemoved, ID: "x"}}); !added {
		t.Fatal("x after its eviction not added")
	}
	l.add(Event{NodeEvent: state.NodeEvent{Type: state.EventNodeJoined, ID: "old", Time: now.Add(-2 * time.Hour)}})
	page, _ := l.query(EventQuery{})
	if len(page.Events) != 1 || page.Events[0].ID != "x" {
		t.Fatalf("query = %+v, want x only (old is past the age bound)", page.Events)
	}
}

// TestSharedEventsWriteOnceAndResync: two coordinators' shared logs on one
// store write an event once; a third (a restarted coordinator) reads it
// back; a full queue drops and counts instead of blocking.
func TestSharedEventsWriteOnceAndResync(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	store := memory.New(memory.Options{Clock: clock})
	t.Cleanup(func() { _ = store.Close() })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	newShared := func(self string) *sharedEvents {
		return newSharedEvents(store, "c", self, newEventLog(10, time.Hour, clock), log, time.Second)
	}
	a, b := newShared("a"), newShared("b")
	ctx := context.Background()
	e := Event{NodeEvent: state.NodeEvent{Type: state.EventNodeRemoved, Role: "worker", NodeID: "w1", ID: state.EventID(state.EventIdentity{ClusterID: "c", Type: state.EventNodeRemoved, NodeID: "w1"})}}
	for _, s := range []*sharedEvents{a, b} {
		stamped, _ := s.local.add(e)
		s.offer(stamped)
		s.write(ctx, <-s.queue)
	}
	if c := testutil.ToFloat64(a.written.WithLabelValues("created")) + testutil.ToFloat64(b.written.WithLabelValues("created")); c != 1 {
		t.Fatalf("created %v times, want 1", c)
	}
	if d := testutil.ToFloat64(b.written.WithLabelValues("duplicate")); d != 1 {
		t.Fatalf("b's duplicate = %v, want 1", d)
	}
	restarted := newShared("a")
	restarted.resync(ctx, time.Time{})
	page, _ := restarted.local.query(EventQuery{})
	if len(page.Events) != 1 || page.Events[0].ID != e.ID || page.Events[0].Coordinator != "" {
		t.Fatalf("restarted coordinator lists %+v, want the event once, as its own", page.Events)
	}
	for range sharedEventsQueue + 3 {
		restarted.offer(e)
	}
	if d := testutil.ToFloat64(restarted.dropped.WithLabelValues("queue_full")); d != 3 {
		t.Fatalf("queue_full drops = %v, want 3", d)
	}
}
