package state

import (
	"fmt"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/testsupport"
)

func TestObservations(t *testing.T) {
	t0 := time.Date(2026, 7, 23, 12, 0, 0, 0, time.UTC)
	clk := testsupport.NewFakeClock(t0)
	o := NewObservations(clk.Now)
	if at := o.See("a", "1", 0); !at.Equal(t0) {
		t.Fatalf("first sight at %v, want now %v", at, t0)
	}
	clk.Advance(10 * time.Second)
	if got := o.Age("a", "1"); got != 10*time.Second {
		t.Fatalf("unchanged version aged %v, want 10s", got)
	}
	if at := o.See("a", "2", 0); !at.Equal(t0.Add(10 * time.Second)) {
		t.Fatalf("new version seen at %v, want now", at)
	}
	if _, ok := o.ClockSkew(); ok {
		t.Fatal("a skew estimate without samples")
	}
	// Writers 30 s ahead, seen live: the estimate says so.
	o.See("b", "first", clk.Now().Add(-time.Hour).UnixMilli()) // first sight: no sample
	for i := range 5 {
		clk.Advance(time.Second)
		o.See("b", string(rune('0'+i)), clk.Now().Add(30*time.Second).UnixMilli())
	}
	if skew, ok := o.ClockSkew(); !ok || skew != 30*time.Second {
		t.Fatalf("ClockSkew = %v, %v; want 30s", skew, ok)
	}
	// Pruning keeps what was seen since.
	clk.Advance(time.Minute)
	o.See("b", "4", 0)
	o.Prune(clk.Now().Add(-time.Second))
	if _, kept := o.seen["b"]; len(o.seen) != 1 || !kept {
		t.Fatalf("after Prune %d slots, want only the one seen since", len(o.seen))
	}
}

// The clock's offset does not change ages: two tables whose clocks are a
// minute apart age the same sightings alike.
func TestObservationsIgnoreOffset(t *testing.T) {
	base := time.Date(2026, 7, 23, 12, 0, 0, 0, time.UTC)
	ahead, behind := testsupport.NewFakeClock(base.Add(30*time.Second)), testsupport.NewFakeClock(base.Add(-30*time.Second))
	a, b := NewObservations(ahead.Now), NewObservations(behind.Now)
	a.See("w", "7", 0)
	b.See("w", "7", 0)
	ahead.Advance(16 * time.Second)
	behind.Advance(16 * time.Second)
	if a.Age("w", "7") != b.Age("w", "7") {
		t.Fatalf("ages differ: %v and %v", a.Age("w", "7"), b.Age("w", "7"))
	}
}

// A reader that lags a write sees the older version at the time it was
// first seen, as every other reader of that version does.
func TestObservationsKeepRecentVersions(t *testing.T) {
	t0 := time.Date(2026, 7, 23, 12, 0, 0, 0, time.UTC)
	clk := testsupport.NewFakeClock(t0)
	o := NewObservations(clk.Now)
	o.See("a", "1", 0)
	clk.Advance(time.Second)
	o.See("a", "2", 0)
	clk.Advance(time.Second)
	if at := o.See("a", "1", 0); !at.Equal(t0) {
		t.Fatalf("older version re-read at %v, want its first sighting", at)
	}
	for i := range versionsKept {
		o.See("a", fmt.Sprint(10+i), 0)
	}
	if at := o.See("a", "1", 0); !at.Equal(clk.Now()) {
		t.Fatalf("a version past the kept ones counts from now, got %v", at)
	}
}

// TestObservationsSeeRev: a numeric version is one version of its own
// (same number, same first sight; another number, a new one), distinct
// from any string version of the slot.
func TestObservationsSeeRev(t *testing.T) {
	t0 := time.Date(2026, 7, 23, 12, 0, 0, 0, time.UTC)
	clk := testsupport.NewFakeClock(t0)
	o := NewObservations(clk.Now)
	o.SeeRev("a", 7, 0)
	clk.Advance(time.Second)
	if at := o.SeeRev("a", 7, 0); !at.Equal(t0) {
		t.Fatalf("revision 7 again: first seen %v, want %v", at, t0)
	}
	if at := o.SeeRev("a", 8, 0); !at.Equal(t0.Add(time.Second)) {
		t.Fatalf("revision 8: first seen %v, want now", at)
	}
	clk.Advance(time.Second)
	if at := o.See("a", "7", 0); !at.Equal(t0.Add(2 * time.Second)) {
		t.Fatalf(`string version "7" after revision 7: %v, want a new sighting`, at)
	}
}
