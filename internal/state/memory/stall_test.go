package memory_test

import (
	"context"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/state/memory"
	"github.com/talonhq/talon/internal/state/statetest"
)

// TestContractWithStallThreshold runs the contract suite with the stall
// threshold on, as `talon dev` runs the store: the clock moves in ticks the
// store observes (a sweep each), so its own lease expiry works as without.
func TestContractWithStallThreshold(t *testing.T) {
	statetest.Run(t, func(t *testing.T) *statetest.Harness {
		h := newHarness(t)
		clk := newFakeClock()
		s := memory.New(memory.Options{Clock: clk.Now, StallThreshold: 5 * time.Second, SweepInterval: -1})
		t.Cleanup(func() { _ = s.Close() })
		h.Store = s
		h.Advance = func(d time.Duration) { tick(clk.Advance, s, d) }
		h.Fault = func(t testing.TB, f statetest.Fault) (state.Store, func()) {
			s.SetFault(faultErrors[f])
			return s, s.ClearFault
		}
		h.Compact = func(testing.TB) { s.CompactAll() }
		h.Peer = func(testing.TB, time.Duration) state.Store { return s }
		return h
	})
}

// tick advances the clock by d in steps of a second, each observed by a
// sweep (the ticks of an open watch).
func tick(advance func(time.Duration), s *memory.Store, d time.Duration) {
	for d > 0 {
		step := min(d, time.Second)
		advance(step)
		s.Sweep()
		d -= step
	}
}

func TestStallDoesNotExpire(t *testing.T) {
	const ttl = 30 * time.Second
	for _, tc := range []struct {
		name     string
		advance  func(f *fixture, d time.Duration)
		wantLeft int
	}{
		// The whole process was stopped for 2×TTL: the store observed none
		// of it, so nothing expires.
		{"StallOfTwiceTheTTL", func(f *fixture, d time.Duration) { f.clk.Advance(d); f.s.Sweep() }, 1},
		// An idle store whose ticks run observes the time: a silent record
		// expires.
		{"IdleWithTicks", func(f *fixture, d time.Duration) { tick(f.clk.Advance, f.s, d) }, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, memory.Options{StallThreshold: 5 * time.Second, SweepInterval: -1})
			f.upsert(record("w1", "inc-a", 1), ttl)
			tc.advance(f, 2*ttl)
			if n := len(f.snapshot().Records); n != tc.wantLeft {
				t.Fatalf("after %s: %d records, want %d", 2*ttl, n, tc.wantLeft)
			}
		})
	}

	t.Run("DeadlineMovesByTheUnobservedTimeOnly", func(t *testing.T) {
		f := newFixture(t, memory.Options{StallThreshold: 5 * time.Second, SweepInterval: -1})
		f.upsert(record("w1", "inc-a", 1), ttl)
		tick(f.clk.Advance, f.s, 10*time.Second) // observed: 10 s
		f.clk.Advance(time.Minute)               // a stall: 5 s of it count
		f.s.Sweep()
		tick(f.clk.Advance, f.s, 14*time.Second) // observed: 29 s in all
		if n := len(f.snapshot().Records); n != 1 {
			t.Fatalf("after 29 s of observed time: %d records, want 1", n)
		}
		tick(f.clk.Advance, f.s, 2*time.Second) // 31 s
		if n := len(f.snapshot().Records); n != 0 {
			t.Fatalf("after 31 s of observed time: %d records, want 0 (the lease is 30 s)", n)
		}
	})

	t.Run("OffByDefaultWithAnInjectedClock", func(t *testing.T) {
		f := newFixture(t, memory.Options{SweepInterval: -1})
		f.upsert(record("w1", "inc-a", 1), ttl)
		f.clk.Advance(2 * ttl)
		if n := len(f.snapshot().Records); n != 0 {
			t.Fatalf("%d records, want 0: an injected clock's steps count in full unless StallThreshold is set", n)
		}
	})

	t.Run("LateKeepsTheDeadline", func(t *testing.T) {
		f := newFixture(t, memory.Options{SweepInterval: -1})
		rec := record("w1", "inc-a", 1)
		f.upsert(rec, ttl)
		f.clk.Advance(ttl - time.Second)
		res, err := f.s.ProposeTransition(context.Background(), rec.Key(), "inc-a", 1, state.TransitionLate)
		if err != nil || res.Outcome != state.OutcomeAccepted {
			t.Fatalf("ProposeTransition = %+v, %v", res, err)
		}
		f.clk.Advance(time.Second)
		if n := len(f.snapshot().Records); n != 0 {
			t.Fatalf("%d records at the original deadline, want 0: a late mark must not extend the lease", n)
		}
	})
}
