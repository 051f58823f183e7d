package coordinator

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/state"
)

// TestTrackerAppliesReadsInStartOrder: a read that finishes after a
// later-started one is not applied and answers with the later read's view
// (or an error when that read failed): no answer carries a view the
// coordinator did not apply.
func TestTrackerAppliesReadsInStartOrder(t *testing.T) {
	tr := newTracker(time.Second, time.Hour, tolerances{})
	t0 := time.Unix(1_800_000_000, 0)
	v1 := &View{Snapshot: &state.Snapshot{Revision: state.NewRevision("1")}}
	v2 := &View{Snapshot: &state.Snapshot{Revision: state.NewRevision("2")}}
	if a := tr.good(2, t0.Add(time.Millisecond), t0.Add(time.Millisecond), v2); !a.ok || !a.first {
		t.Fatalf("read 2: %+v", a)
	}
	if a := tr.good(1, t0, t0, v1); a.ok {
		t.Fatal("read 1, started before read 2, was applied after it")
	}
	if got := tr.newest(); got != v2 {
		t.Fatalf("a late read answers with %v, want the applied read 2's view", got)
	}
	if ok, _ := tr.failed(3, errors.New("down")); !ok {
		t.Fatal("read 3's failure not applied")
	}
	if got := tr.newest(); got != nil {
		t.Fatalf("after a later failed read, a late read answers with %v, want nothing (fail closed)", got)
	}
	if tr.state().lastGood != v2 {
		t.Fatal("the last good view is kept for diagnostics")
	}
}

// TestTrackerRecoveryHold: after a failure, or a gap between reads longer
// than maxGap, the hold lasts until a read hold after recovery began and
// an own-record write accepted after it began.
func TestTrackerRecoveryHold(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	v := &View{Snapshot: &state.Snapshot{}}
	for _, cause := range []string{"failure", "gap"} {
		t.Run(cause, func(t *testing.T) {
			tr := newTracker(time.Second, 3*time.Second, tolerances{})
			tr.good(1, at(0), at(0), v)
			tr.selfWritten(at(0))
			seq, start := uint64(2), at(10*time.Second) // gap: 10 s without a read
			if cause == "failure" {
				tr.failed(2, errors.New("down"))
				seq, start = 3, at(2*time.Second)
			}
			a := tr.good(seq, start, start, v)
			if a.recovered != (cause == "failure") || a.gap != (cause == "gap") {
				t.Fatalf("applied %+v", a)
			}
			if r := tr.recoveryReason(start); !strings.Contains(r, "own record") {
				t.Fatalf("reason %q, want the own record to be awaited", r)
			}
			tr.selfWritten(start.Add(100 * time.Millisecond))
			seq++
			tr.good(seq, start.Add(500*time.Millisecond), start.Add(500*time.Millisecond), v)
			if r := tr.recoveryReason(start.Add(500 * time.Millisecond)); !strings.Contains(r, "observing") {
				t.Fatalf("reason %q within the hold", r)
			}
			seq++
			tr.good(seq, start.Add(time.Second), start.Add(time.Second), v)
			if tr.isRecovering() {
				t.Fatalf("still recovering after the hold and an accepted own write: %q", tr.recoveryReason(start.Add(time.Second)))
			}
		})
	}
	t.Run("reads within maxGap are no gap", func(t *testing.T) {
		tr := newTracker(time.Second, 3*time.Second, tolerances{})
		for i := range 10 {
			if a := tr.good(uint64(i+1), at(time.Duration(i)*2*time.Second), at(time.Duration(i)*2*time.Second), v); a.gap {
				t.Fatalf("read %d two seconds after the last counted as a gap", i)
			}
		}
	})
}
