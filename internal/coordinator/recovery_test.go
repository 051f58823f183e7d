package coordinator

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/placement"
	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/state/memory"
)

// TestBlipTolerance: the tolerance is unhealthy-after (lease-ttl for
// expiry) minus two heartbeat intervals and a request timeout, and zero
// at or below the timing rule's minimum.
func TestBlipTolerance(t *testing.T) {
	s := time.Second
	ms := time.Millisecond
	tests := []struct {
		name           string
		timing         cluster.Timing
		request        time.Duration
		late, expired  time.Duration
		tolerancePrint string
	}{
		{"defaults", cluster.Timing{HeartbeatInterval: 5 * s, UnhealthyAfter: 15 * s, LeaseTTL: 30 * s}, 2 * s, 3 * s, 18 * s, "3s"},
		{"the least timing the rule allows", cluster.Timing{HeartbeatInterval: s, UnhealthyAfter: 3 * s, LeaseTTL: 6 * s}, s, 0, 3 * s, "0s"},
		{"below the rule: clamped", cluster.Timing{HeartbeatInterval: s, UnhealthyAfter: 2 * s, LeaseTTL: 3 * s}, s, 0, 0, "0s"},
		{"the blip test's timing", cluster.Timing{HeartbeatInterval: s, UnhealthyAfter: 8 * s, LeaseTTL: 10 * s}, 500 * ms, 5500 * ms, 7500 * ms, "5.5s"},
		{"the unit tests' timing", testTiming, 200 * ms, 0, 400 * ms, "0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := newTolerances(tt.timing, tt.request)
			if got.late != tt.late || got.expired != tt.expired {
				t.Fatalf("tolerances %+v, want late %v, expired %v", got, tt.late, tt.expired)
			}
			if b := BlipTolerance(tt.timing, tt.request); b.String() != tt.tolerancePrint {
				t.Fatalf("BlipTolerance = %v, want %s", b, tt.tolerancePrint)
			}
		})
	}
}

// TestPlanRecovery: an interruption shorter than the late tolerance needs
// no hold; one at least that long holds; one at least the expiry
// tolerance also waits for the own record; a recovery in progress is
// never shortened by a later, shorter interruption.
func TestPlanRecovery(t *testing.T) {
	s := time.Second
	def := newTolerances(cluster.Timing{HeartbeatInterval: 5 * s, UnhealthyAfter: 15 * s, LeaseTTL: 30 * s}, 2*s) // 3 s, 18 s
	least := newTolerances(cluster.Timing{HeartbeatInterval: s, UnhealthyAfter: 3 * s, LeaseTTL: 6 * s}, s)       // 0, 3 s
	none, hold, both := recoveryPlan{}, recoveryPlan{hold: true}, recoveryPlan{hold: true, awaitSelf: true}
	tests := []struct {
		name    string
		outage  time.Duration
		tol     tolerances
		pending recoveryPlan
		want    recoveryPlan
	}{
		{"no outage", 0, def, none, none},
		{"a 2 s blip at default timing", 2 * s, def, none, none},
		{"just under the tolerance", 3*s - time.Millisecond, def, none, none},
		{"at the tolerance", 3 * s, def, none, hold},
		{"long enough to turn a record late", 10 * s, def, none, hold},
		{"just under the expiry tolerance", 18*s - time.Millisecond, def, none, hold},
		{"long enough to expire a record", 18 * s, def, none, both},
		{"2 x lease-ttl", 60 * s, def, none, both},
		{"a blip during a hold", time.Second, def, hold, hold},
		{"a blip during a hold that awaits the own record", time.Second, def, both, both},
		{"least timing: any outage holds", time.Millisecond, least, none, hold},
		{"least timing: zero outage holds", 0, least, none, hold},
		{"least timing: an expiry", 3 * s, least, none, both},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := planRecovery(tt.outage, tt.tol, tt.pending); got != tt.want {
				t.Fatalf("planRecovery(%v, %+v, pending %+v) = %+v, want %+v", tt.outage, tt.tol, tt.pending, got, tt.want)
			}
		})
	}
}

// TestTrackerBlip: the tracker measures an interruption from the start of
// the last good read before it to the end of the first good read after
// it, and answers at once after a short one, holds after a longer one,
// and waits for the own record only when it could have expired; a short
// interruption during a hold restarts the hold.
func TestTrackerBlip(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	v := &View{Snapshot: &state.Snapshot{}}
	s := time.Second
	tol := tolerances{late: 5 * s, expired: 10 * s}
	type step struct {
		fail       bool          // a failed read (else a good one)
		start, end time.Duration // of a good read
	}
	tests := []struct {
		name      string
		steps     []step
		outage    time.Duration // of the last step
		plan      recoveryPlan
		reasonHas string // of the tracker right after the last step ("" : ready)
	}{
		{"a short store outage answers at once", []step{{fail: true}, {start: 4 * s, end: 4*s + 100*time.Millisecond}}, 4100 * time.Millisecond, recoveryPlan{}, ""},
		{"the read that ends it counts to its end", []step{{fail: true}, {start: 4 * s, end: 5 * s}}, 5 * s, recoveryPlan{hold: true}, "observing"},
		{"a longer outage holds without the own record", []step{{fail: true}, {start: 6 * s, end: 6 * s}}, 6 * s, recoveryPlan{hold: true}, "observing"},
		{"an outage that could expire records awaits the own record", []step{{fail: true}, {start: 12 * s, end: 12 * s}}, 12 * s, recoveryPlan{hold: true, awaitSelf: true}, "own record"},
		{"a short stall answers at once", []step{{start: 4 * s, end: 4 * s}}, 4 * s, recoveryPlan{}, ""},
		{"a long stall holds and awaits the own record", []step{{start: 20 * s, end: 20 * s}}, 20 * s, recoveryPlan{hold: true, awaitSelf: true}, "own record"},
		{"a blip during a hold restarts the hold", []step{{fail: true}, {start: 12 * s, end: 12 * s}, {fail: true}, {start: 13 * s, end: 13 * s}}, s, recoveryPlan{hold: true, awaitSelf: true}, "own record"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTracker(time.Second, 3*time.Second, tol)
			tr.good(1, at(0), at(0), v)
			tr.selfWritten(at(0))
			var a applied
			for i, st := range tt.steps {
				seq := uint64(i + 2)
				if st.fail {
					tr.failed(seq, errors.New("down"))
					continue
				}
				a = tr.good(seq, at(st.start), at(st.end), v)
				if !a.recovered && !a.gap {
					t.Fatalf("step %d: %+v, want a recovery", i, a)
				}
			}
			if a.outage != tt.outage || a.plan != tt.plan {
				t.Fatalf("outage %v, plan %+v; want %v, %+v", a.outage, a.plan, tt.outage, tt.plan)
			}
			last := at(tt.steps[len(tt.steps)-1].start)
			r := tr.recoveryReason(last)
			if tt.reasonHas == "" && (r != "" || tr.isRecovering()) {
				t.Fatalf("recovering (%q) right after a short interruption, want ready at once", r)
			}
			if tt.reasonHas != "" && !strings.Contains(r, tt.reasonHas) {
				t.Fatalf("reason %q, want it to mention %q", r, tt.reasonHas)
			}
			if !tt.plan.hold {
				return
			}
			// The hold ends a hold after it began, and then only when
			// the own record was accepted if the plan awaits it.
			tr.good(100, last.Add(time.Second), last.Add(time.Second), v)
			if got := tr.isRecovering(); got != tt.plan.awaitSelf {
				t.Fatalf("after the hold, without an own write: recovering %v, want %v", got, tt.plan.awaitSelf)
			}
			tr.selfWritten(last.Add(1100 * time.Millisecond))
			tr.good(101, last.Add(1200*time.Millisecond), last.Add(1200*time.Millisecond), v)
			if tr.isRecovering() {
				t.Fatalf("still recovering after the hold and an own write: %q", tr.recoveryReason(last.Add(1200*time.Millisecond)))
			}
		})
	}
}

// TestBlipAnsweredAtOnce: after a store outage shorter than the blip
// tolerance the coordinator answers from its first good read, with every
// live worker, well before the recovery hold would have ended, and
// without waiting for its own record, which the store keeps shedding
// (the code before issue 36 stayed unready until the hold ended and the
// store accepted that record). The store_recovered event says so.
func TestBlipAnsweredAtOnce(t *testing.T) {
	timing := cluster.Timing{HeartbeatInterval: 100 * time.Millisecond, UnhealthyAfter: 2 * time.Second, LeaseTTL: 4 * time.Second}
	const requestTimeout = 200 * time.Millisecond // newTestCoordinator's
	hold := timing.HeartbeatInterval + 2*requestTimeout
	if tol := BlipTolerance(timing, requestTimeout); tol != 1600*time.Millisecond {
		t.Fatalf("blip tolerance %v, want 1.6s", tol)
	}
	store := &sheddingStore{Store: memory.New(memory.Options{})}
	t.Cleanup(func() { store.Close() })
	workers := []string{"w1", "w2", "w3"}
	for _, id := range workers {
		if _, err := store.UpsertNode(context.Background(), workerRecord(id, "i", 0), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	f := startTimed(t, store, 0, Limits{}, timing)
	lookup := func() ([]placement.Owner, error) {
		owners, _, err := f.c.Lookup(context.Background(), "k#0", 3)
		return owners, err
	}
	waitFor(t, "three owners", func() bool { o, err := lookup(); return err == nil && len(o) == 3 })

	store.SetFault(state.ErrUnavailable)
	failed := time.Now()
	waitFor(t, "fail closed", func() bool { _, err := lookup(); return err != nil })
	time.Sleep(300 * time.Millisecond) // well within the tolerance
	store.shed.Store(true)             // the coordinator's own writes stay refused
	store.ClearFault()
	cleared := time.Now()
	var owners []placement.Owner
	waitFor(t, "answers again", func() bool {
		var err error
		owners, err = lookup()
		return err == nil
	})
	took := time.Since(cleared)
	t.Logf("outage %v (fault set to cleared); answering %v after the store answered again (recovery hold %v)",
		cleared.Sub(failed).Round(time.Millisecond), took.Round(time.Millisecond), hold)
	if len(owners) != 3 {
		t.Fatalf("first answer after the blip names %d owners, want the 3 live workers", len(owners))
	}
	if took >= hold {
		t.Fatalf("answered %v after the store answered again, want within the recovery hold %v (no hold after a blip)", took, hold)
	}
	if rd := f.c.Readiness(); !rd.Ready {
		t.Fatalf("readiness %+v after a blip with the own record refused, want ready (the own record cannot have expired)", rd)
	}
	page, _ := f.c.Events(EventQuery{Types: []EventType{EventStoreRecovered}})
	if n := len(page.Events); n == 0 || !strings.Contains(page.Events[n-1].Reason, "answering at once") {
		t.Fatalf("store_recovered events %+v, want the last to say it answers at once", page.Events)
	}
	store.shed.Store(false)
}
