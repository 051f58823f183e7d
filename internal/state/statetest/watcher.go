package statetest

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

// watcher reads one watch channel for a case.
type watcher struct {
	t      testing.TB
	desc   string
	ch     <-chan state.WatchBatch
	cancel context.CancelFunc
	buf    []state.Event // received, not yet consumed
	err    error         // terminal error, once received
	closed bool          // the channel was closed
}

// watch opens a watch that the case's cleanup cancels; cleanup also checks
// that the channel then closes.
func (e *env) watch(clusterID string, after state.Revision) *watcher {
	e.t.Helper()
	ctx, cancel := context.WithCancel(e.t.Context())
	w := &watcher{
		t:      e.t,
		desc:   fmt.Sprintf("Watch(%s, after %q)", clusterID, after.String()),
		ch:     e.s.Watch(ctx, clusterID, after),
		cancel: cancel,
	}
	if w.ch == nil {
		cancel()
		e.t.Fatalf("%s returned a nil channel", w.desc)
	}
	e.t.Cleanup(w.stop)
	return w
}

// fill receives until n events are buffered, the watch ends or timeout.
func (w *watcher) fill(n int, timeout time.Duration) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for len(w.buf) < n && w.err == nil && !w.closed {
		select {
		case b, ok := <-w.ch:
			if !ok {
				w.closed = true
				return
			}
			w.buf = append(w.buf, b.Events...)
			if b.Err != nil {
				w.err = b.Err
			}
		case <-timer.C:
			return
		}
	}
}

// next returns the next n events, failing the case if they do not arrive.
func (w *watcher) next(n int) []state.Event {
	w.t.Helper()
	w.fill(n, watchWait)
	if len(w.buf) < n {
		switch {
		case w.err != nil:
			w.t.Fatalf("%s ended with %q after %d of %d expected events: %s", w.desc, w.err, len(w.buf), n, describeEvents(w.buf))
		case w.closed:
			w.t.Fatalf("%s closed after %d of %d expected events: %s", w.desc, len(w.buf), n, describeEvents(w.buf))
		default:
			w.t.Fatalf("%s delivered %d of %d expected events within %s: %s", w.desc, len(w.buf), n, watchWait, describeEvents(w.buf))
		}
	}
	got := w.buf[:n:n]
	w.buf = w.buf[n:]
	return got
}

// expect checks that the next events are exactly want.
func (w *watcher) expect(want ...wantEvent) {
	w.t.Helper()
	checkEvents(w.t, w.desc, w.next(len(want)), want)
}

// terminal waits for the watch to end with an error, failing the case if
// it delivers events first, ends without an error or does not end.
func (w *watcher) terminal() error {
	w.t.Helper()
	w.fill(math.MaxInt, watchWait)
	switch {
	case len(w.buf) > 0:
		w.t.Fatalf("%s delivered events, want only a terminal error: %s", w.desc, describeEvents(w.buf))
	case w.err == nil && w.closed:
		w.t.Fatalf("%s closed without an error", w.desc)
	case w.err == nil:
		w.t.Fatalf("%s did not end within %s", w.desc, watchWait)
	}
	// The channel must close after the error, with nothing after it.
	timer := time.NewTimer(watchWait)
	defer timer.Stop()
	select {
	case b, ok := <-w.ch:
		if ok {
			w.t.Fatalf("%s delivered a batch after its terminal error %q: %s (error %v)", w.desc, w.err, describeEvents(b.Events), b.Err)
		}
		w.closed = true
	case <-timer.C:
		w.t.Fatalf("%s did not close its channel after the terminal error %q", w.desc, w.err)
	}
	return w.err
}

// stop cancels the watch and checks that its channel closes.
func (w *watcher) stop() {
	w.cancel()
	timer := time.NewTimer(watchWait)
	defer timer.Stop()
	for !w.closed {
		select {
		case _, ok := <-w.ch:
			if !ok {
				w.closed = true
			}
		case <-timer.C:
			w.t.Errorf("%s: channel not closed within %s after its context was canceled", w.desc, watchWait)
			return
		}
	}
}

// wantEvent is an expected watch event.
type wantEvent struct {
	typ state.EventType
	key cluster.Key
	rec *cluster.Record // EventPut: the record, UpdatedAtUnixMs included
	rev state.Revision  // zero: not checked
}

// putOf is the event an accepted upsert must produce.
func putOf(res state.WriteResult) wantEvent {
	return wantEvent{typ: state.EventPut, key: res.Record.Key(), rec: res.Record, rev: res.Revision}
}

// deleteOf is the event an accepted removal must produce. Its revision is
// not compared with the removal's: a Kubernetes delete does not return the
// revision at which the object went away.
func deleteOf(key cluster.Key, _ state.WriteResult) wantEvent {
	return wantEvent{typ: state.EventDelete, key: key}
}

// checkEvents checks got against want, and that every revision is set and
// distinct.
func checkEvents(t testing.TB, what string, got []state.Event, want []wantEvent) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d events, want %d: %s", what, len(got), len(want), describeEvents(got))
	}
	seen := make(map[state.Revision]int)
	for i, ev := range got {
		w := want[i]
		if ev.Revision.IsZero() {
			t.Fatalf("%s: event %d (%s) has the zero revision", what, i, describeEvent(ev))
		}
		if j, dup := seen[ev.Revision]; dup {
			t.Fatalf("%s: events %d and %d share revision %s: %s", what, j, i, ev.Revision, describeEvents(got))
		}
		seen[ev.Revision] = i
		if ev.Type != w.typ || ev.Key != w.key {
			t.Fatalf("%s: event %d is %s, want %s %s; all: %s", what, i, describeEvent(ev), w.typ, w.key, describeEvents(got))
		}
		if !w.rev.IsZero() && ev.Revision != w.rev {
			t.Fatalf("%s: event %d (%s) has revision %s, want the write's revision %s", what, i, describeEvent(ev), ev.Revision, w.rev)
		}
		switch ev.Type {
		case state.EventPut:
			if ev.Record == nil {
				t.Fatalf("%s: put event %d has no record", what, i)
			}
			if ev.Record.Key() != ev.Key {
				t.Fatalf("%s: put event %d for %s carries the record of %s", what, i, ev.Key, ev.Record.Key())
			}
			if w.rec != nil && !sameRecord(ev.Record, w.rec) {
				t.Fatalf("%s: put event %d carries %s, want %s", what, i, describe(ev.Record), describe(w.rec))
			}
		case state.EventDelete:
			if ev.Record != nil {
				t.Fatalf("%s: delete event %d carries a record: %s", what, i, describe(ev.Record))
			}
		default:
			t.Fatalf("%s: event %d has type %d", what, i, ev.Type)
		}
	}
}

func describeEvent(ev state.Event) string {
	s := fmt.Sprintf("%s %s @%s", ev.Type, ev.Key, ev.Revision)
	if ev.Record != nil {
		s += fmt.Sprintf(" (incarnation %s seq %d)", ev.Record.IncarnationID, ev.Record.HeartbeatSeq)
	}
	return s
}

func describeEvents(evs []state.Event) string {
	if len(evs) == 0 {
		return "[]"
	}
	parts := make([]string, len(evs))
	for i, ev := range evs {
		parts[i] = describeEvent(ev)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
