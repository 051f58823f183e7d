package statetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/state"
)

// runEvents checks the shared event log (state.EventLog): an event is
// written once however many writers append it, listed oldest first,
// bounded in count and in age.
func runEvents(t *testing.T, newHarness Factory) {
	t.Run("DedupAcrossWriters", func(t *testing.T) { caseEventsDedup(t, newHarness) })
	t.Run("Ordering", func(t *testing.T) { caseEventsOrdering(t, newHarness) })
	t.Run("CountBound", func(t *testing.T) { caseEventsCountBound(t, newHarness) })
	t.Run("OperatorEventsOutliveAFlood", func(t *testing.T) { caseEventsOperatorOutliveFlood(t, newHarness) })
	t.Run("AgeBound", func(t *testing.T) { caseEventsAgeBound(t, newHarness) })
	t.Run("WatchedFromAPeer", func(t *testing.T) { caseEventsWatched(t, newHarness) })
}

// caseEventsWatched: a store that streams its event log (state.EventWatcher)
// delivers an event a peer writes within a second, and not the events
// written before the watch began again and again.
func caseEventsWatched(t *testing.T, newHarness Factory) {
	e, log := eventSetup(t, newHarness)
	watcher, ok := log.(state.EventWatcher)
	if !ok {
		t.Skipf("%s store does not stream its event log", e.s.Backend())
	}
	peer, ok := e.h.Peer(t, 0).(state.EventLog)
	if !ok {
		t.Fatal("the peer store has no event log")
	}
	for i := range 5 {
		e.appendEvent(log, e.event(fmt.Sprint("old-", i), uint64(i), e.now()), true)
	}
	ctx, cancel := context.WithCancel(e.ctx())
	defer cancel()
	ch := watcher.WatchEvents(ctx, e.cluster)
	time.Sleep(200 * time.Millisecond) // the watch is established
	ev := e.event("w-new", 99, e.now())
	written := time.Now()
	e.appendEvent(peer, ev, true)
	timeout := time.After(10 * time.Second)
	replayed := 0
	for {
		select {
		case got, ok := <-ch:
			if !ok {
				t.Fatal("the event watch closed before the peer's event arrived")
			}
			if got.ID != ev.ID {
				replayed++
				continue
			}
			took := time.Since(written)
			t.Logf("peer's event delivered after %s (%d earlier events first)", took.Round(time.Millisecond), replayed)
			if took > time.Second {
				t.Errorf("a peer's event arrived %s after it was written: want within a second", took)
			}
			if replayed > 0 {
				t.Errorf("the watch sent %d events written before it began", replayed)
			}
			cancel()
			for range ch { // closed when ctx ends
			}
			return
		case <-timeout:
			t.Fatal("a peer's event was not delivered within 10s")
		}
	}
}

// eventSetup returns the case's env and its store's event log; it skips
// a store that keeps no shared event log.
func eventSetup(t *testing.T, newHarness Factory) (*env, state.EventLog) {
	t.Helper()
	e := setup(t, newHarness)
	log, ok := e.s.(state.EventLog)
	if !ok {
		t.Skipf("%s store has no shared event log", e.s.Backend())
	}
	return e, log
}

func (e *env) now() time.Time {
	if e.h.Now != nil {
		return e.h.Now()
	}
	return time.Now()
}

// event returns a node event of the case's cluster, of incarnation inc
// and sequence seq, observed at at.
func (e *env) event(node string, seq uint64, at time.Time) state.NodeEvent {
	id := state.EventIdentity{ClusterID: e.cluster, Type: "node_expired_or_removed", Role: "worker", NodeID: node, Incarnation: "inc-a", Seq: seq}
	return state.NodeEvent{ID: state.EventID(id), ClusterID: e.cluster, Time: at, Type: id.Type, Role: id.Role, NodeID: node,
		Reason: fmt.Sprintf("seq %d", seq), Coordinator: "c1"}
}

func (e *env) appendEvent(log state.EventLog, ev state.NodeEvent, want bool) {
	e.t.Helper()
	created, err := log.AppendEvent(e.ctx(), ev)
	if err != nil {
		e.t.Fatalf("AppendEvent(%s): %v", ev.ID, err)
	}
	if created != want {
		e.t.Fatalf("AppendEvent(%s) created = %t, want %t", ev.ID, created, want)
	}
}

func (e *env) listEvents(log state.EventLog, since time.Time, limit int) []state.NodeEvent {
	e.t.Helper()
	got, err := log.ListEvents(e.ctx(), e.cluster, since, limit)
	if err != nil {
		e.t.Fatalf("ListEvents: %v", err)
	}
	return got
}

func caseEventsDedup(t *testing.T, newHarness Factory) {
	e, log := eventSetup(t, newHarness)
	peer, ok := e.h.Peer(t, 0).(state.EventLog)
	if !ok {
		t.Fatal("the peer store has no event log")
	}
	ev := e.event("w1", 7, e.now())
	e.appendEvent(log, ev, true)
	second := ev
	second.Time, second.Coordinator = ev.Time.Add(time.Second), "c2" // another coordinator, a moment later
	e.appendEvent(peer, second, false)
	e.appendEvent(log, ev, false)
	got := e.listEvents(log, time.Time{}, 0)
	if len(got) != 1 || got[0].ID != ev.ID || got[0].Coordinator != "c1" || !got[0].Time.Equal(ev.Time) {
		t.Fatalf("ListEvents = %+v, want the first writer's event only", got)
	}
	if got[0].NodeID != "w1" || got[0].Role != "worker" || got[0].Type != ev.Type || got[0].Reason != ev.Reason {
		t.Fatalf("ListEvents[0] = %+v, want the fields of %+v", got[0], ev)
	}
	if other := e.listEvents(log, time.Time{}, 0); len(other) != 1 {
		t.Fatalf("second ListEvents = %d events, want 1", len(other))
	}
}

func caseEventsOrdering(t *testing.T, newHarness Factory) {
	e, log := eventSetup(t, newHarness)
	base := e.now().Add(-time.Minute).Truncate(time.Millisecond)
	// Appended out of order: listed by time.
	for _, i := range []int{2, 0, 3, 1} {
		e.appendEvent(log, e.event(fmt.Sprint("w", i), uint64(i), base.Add(time.Duration(i)*time.Second)), true)
	}
	got := e.listEvents(log, time.Time{}, 0)
	if len(got) != 4 {
		t.Fatalf("ListEvents = %d events, want 4", len(got))
	}
	for i, ev := range got {
		if want := fmt.Sprint("w", i); ev.NodeID != want {
			t.Fatalf("ListEvents[%d] is about %s, want %s (oldest first)", i, ev.NodeID, want)
		}
	}
	if since := e.listEvents(log, base.Add(2*time.Second), 0); len(since) != 2 || since[0].NodeID != "w2" {
		t.Fatalf("ListEvents(since w2) = %+v, want w2, w3", since)
	}
	if newest := e.listEvents(log, time.Time{}, 1); len(newest) != 1 || newest[0].NodeID != "w3" {
		t.Fatalf("ListEvents(limit 1) = %+v, want the newest, w3", newest)
	}
}

func caseEventsCountBound(t *testing.T, newHarness Factory) {
	if testing.Short() {
		t.Skip("appends more than a thousand events")
	}
	e, log := eventSetup(t, newHarness)
	const extra = 40
	base := e.now().Add(-10 * time.Minute)
	for i := range state.DefaultEventMax + extra {
		e.appendEvent(log, e.event("w1", uint64(i), base.Add(time.Duration(i)*time.Millisecond)), true)
	}
	got := e.listEvents(log, time.Time{}, 0)
	if len(got) != state.DefaultEventMax {
		t.Fatalf("ListEvents = %d events, want the bound %d", len(got), state.DefaultEventMax)
	}
	if first := e.event("w1", extra, base); got[0].ID != first.ID {
		t.Fatalf("oldest listed = %s (%s), want the event of seq %d: the oldest go first", got[0].ID, got[0].Reason, extra)
	}
}

// caseEventsOperatorOutliveFlood: three flooding workers' events, more
// than the bound, evict each other's oldest, never an operator's cordon
// or a revocation written before them (issue 47: the flood flushed them).
func caseEventsOperatorOutliveFlood(t *testing.T, newHarness Factory) {
	if testing.Short() {
		t.Skip("appends more than a thousand events")
	}
	e, log := eventSetup(t, newHarness)
	base := e.now().Add(-10 * time.Minute)
	var ops []state.NodeEvent
	for i, typ := range []state.NodeEventType{state.EventNodeCordoned, state.EventNodeRevoked, state.EventNodeUncordoned} {
		ev := e.event("w-ops", uint64(i), base.Add(time.Duration(i)*time.Millisecond))
		ev.Type = typ
		ev.ID = state.EventID(state.EventIdentity{ClusterID: e.cluster, Type: typ, Role: "worker", NodeID: "w-ops", Seq: uint64(i)})
		ops = append(ops, ev)
		e.appendEvent(log, ev, true)
	}
	for i := range state.DefaultEventMax + 60 {
		node := fmt.Sprint("w-flood-", i%3)
		e.appendEvent(log, e.event(node, uint64(i), base.Add(time.Second+time.Duration(i)*time.Millisecond)), true)
	}
	got := e.listEvents(log, time.Time{}, 0)
	if len(got) != state.DefaultEventMax {
		t.Fatalf("ListEvents = %d events, want the bound %d", len(got), state.DefaultEventMax)
	}
	for _, op := range ops {
		found := false
		for _, ev := range got {
			found = found || ev.ID == op.ID
		}
		if !found {
			t.Errorf("the operator's %s event was evicted by the flood", op.Type)
		}
	}
}

func caseEventsAgeBound(t *testing.T, newHarness Factory) {
	e, log := eventSetup(t, newHarness)
	old := e.event("w-old", 1, e.now().Add(-state.DefaultEventMaxAge-time.Minute))
	if _, err := log.AppendEvent(e.ctx(), old); err != nil {
		t.Fatalf("AppendEvent(old): %v", err)
	}
	fresh := e.event("w-new", 2, e.now())
	e.appendEvent(log, fresh, true)
	got := e.listEvents(log, time.Time{}, 0)
	if len(got) != 1 || got[0].ID != fresh.ID {
		t.Fatalf("ListEvents = %+v, want only the event younger than %s", got, state.DefaultEventMaxAge)
	}
}
