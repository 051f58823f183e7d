package coordinator

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/state"
)

// TestEventLogBounded: the list keeps the last capacity events, numbers
// them without gaps, filters, pages and wakes watchers.
func TestEventLogBounded(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newEventLog(3, 0, func() time.Time { return now })
	page, changed := l.query(EventQuery{})
	if len(page.Events) != 0 || page.LastSeq != 0 || page.OldestSeq != 0 {
		t.Fatalf("empty log %+v", page)
	}
	for i, id := range []string{"a", "b", "c", "a", "b"} {
		now = time.Unix(1000+int64(i), 0)
		l.add(Event{NodeEvent: state.NodeEvent{Type: state.EventNodeJoined, NodeID: id}})
	}
	select {
	case <-changed:
	default:
		t.Fatal("an append did not wake the watcher")
	}
	page, _ = l.query(EventQuery{})
	if len(page.Events) != 3 || page.OldestSeq != 3 || page.LastSeq != 5 || page.Events[0].Seq != 3 || page.Events[2].Seq != 5 {
		t.Fatalf("bounded log %+v", page)
	}
	if got, _ := l.query(EventQuery{NodeID: "a"}); len(got.Events) != 1 || got.Events[0].Seq != 4 {
		t.Fatalf("node filter %+v", got)
	}
	if got, _ := l.query(EventQuery{AfterSeq: 4}); len(got.Events) != 1 || got.Events[0].Seq != 5 {
		t.Fatalf("after filter %+v", got)
	}
	// The largest AfterSeq means nothing newer: AfterSeq+1 wrapped to 0
	// and answered every event kept (issue 37).
	for _, after := range []uint64{5, 6, math.MaxUint64 - 1, math.MaxUint64} {
		if got, _ := l.query(EventQuery{AfterSeq: after}); len(got.Events) != 0 || got.LastSeq != 5 {
			t.Fatalf("after %d: %+v, want nothing newer", after, got)
		}
	}
	if got, _ := l.query(EventQuery{Since: time.Unix(1004, 0)}); len(got.Events) != 1 || got.Events[0].NodeID != "b" {
		t.Fatalf("since filter %+v", got)
	}
	if got, _ := l.query(EventQuery{Types: []state.NodeEventType{state.EventNodeRemoved}}); len(got.Events) != 0 {
		t.Fatalf("type filter %+v", got)
	}
	if got, _ := l.query(EventQuery{Limit: 2}); len(got.Events) != 2 || !got.More || got.Events[1].Seq != 4 {
		t.Fatalf("limit %+v", got)
	}
	long := make([]byte, 1000)
	for i := range long {
		long[i] = 'x'
	}
	l.add(Event{NodeEvent: state.NodeEvent{Type: state.EventStoreUnreachable, Reason: string(long)}})
	if got, _ := l.query(EventQuery{AfterSeq: 5}); len(got.Events[0].Reason) > maxEventReason+4 {
		t.Fatalf("reason of %d bytes kept", len(got.Events[0].Reason))
	}
}

// TestEventLogKeepsProtectedEvents: a flood of worker-driven events pushes
// the oldest of them out of the list, never an operator's cordon or a
// revocation (issue 47: a flood flushed them from every coordinator's
// list), and the list stays in Seq order across the two rings.
func TestEventLogKeepsProtectedEvents(t *testing.T) {
	l := newEventLog(4, 0, time.Now)
	l.add(Event{NodeEvent: state.NodeEvent{Type: state.EventNodeJoined, NodeID: "w1", ID: "j1"}})
	l.add(Event{NodeEvent: state.NodeEvent{Type: state.EventNodeCordoned, NodeID: "w1", ID: "c1"}})
	for i := range 10 {
		l.add(Event{NodeEvent: state.NodeEvent{Type: state.EventNodeReadiness, NodeID: "flood", ID: fmt.Sprint("r", i)}})
	}
	l.add(Event{NodeEvent: state.NodeEvent{Type: state.EventNodeRevoked, NodeID: "flood", ID: "v1"}})
	l.add(Event{NodeEvent: state.NodeEvent{Type: state.EventNodeReadiness, NodeID: "flood", ID: "r10"}})
	page, _ := l.query(EventQuery{})
	var got []string
	for i, e := range page.Events {
		got = append(got, e.ID)
		if i > 0 && e.Seq <= page.Events[i-1].Seq {
			t.Fatalf("events out of Seq order: %v", page.Events)
		}
	}
	if want := "c1 r7 r8 r9 v1 r10"; strings.Join(got, " ") != want {
		t.Fatalf("listed %v; want %s (the cordon and the revocation kept, the last 4 others)", got, want)
	}
	if page.OldestSeq != 2 || page.LastSeq != 14 {
		t.Fatalf("OldestSeq %d, LastSeq %d; want 2 (the cordon) and 14", page.OldestSeq, page.LastSeq)
	}
	if _, added := l.add(Event{NodeEvent: state.NodeEvent{Type: state.EventNodeCordoned, ID: "c1"}}); added {
		t.Fatal("a kept protected event was added again")
	}
	after, _ := l.query(EventQuery{AfterSeq: 12})
	if len(after.Events) != 2 || after.Events[0].ID != "v1" {
		t.Fatalf("after Seq 12: %v; want v1, r10", after.Events)
	}
}
