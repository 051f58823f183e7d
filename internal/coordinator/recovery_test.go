package coordinator

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/placement"
	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/state/memory"
)

// TestBlipTolerance: the late tolerance is unhealthy-after (the expiry
// tolerance lease-ttl) minus two heartbeat intervals and a request
// timeout, zero at or below the timing rule's minimum; late marks are
// excluded (noticed) when the late tolerance exceeds a request timeout and
// the read spacing and unhealthy-after exceeds an interval, three request
// timeouts and the read spacing; the blip tolerance is then the expiry
// tolerance, else the late one.
func TestBlipTolerance(t *testing.T) {
	s := time.Second
	ms := time.Millisecond
	tests := []struct {
		name           string
		timing         cluster.Timing
		request        time.Duration
		late, expired  time.Duration
		noticed        bool
		tolerancePrint string
	}{
		// Read spacing 667 ms + 200 ms: 3 s > 2.867 s, 15 s > 11.867 s.
		{"defaults", cluster.Timing{HeartbeatInterval: 5 * s, UnhealthyAfter: 15 * s, LeaseTTL: 30 * s}, 2 * s, 3 * s, 18 * s, true, "18s"},
		{"defaults with unhealthy-after 14.8 s: a slow refresh could miss a late-making pause",
			cluster.Timing{HeartbeatInterval: 5 * s, UnhealthyAfter: 14800 * ms, LeaseTTL: 30 * s}, 2 * s, 2800 * ms, 18 * s, false, "2.8s"},
		{"a request timeout above the interval: a live worker may renew too late after a pause",
			cluster.Timing{HeartbeatInterval: s, UnhealthyAfter: 10 * s, LeaseTTL: 20 * s}, 3 * s, 5 * s, 15 * s, false, "5s"},
		{"the least timing the rule allows", cluster.Timing{HeartbeatInterval: s, UnhealthyAfter: 3 * s, LeaseTTL: 6 * s}, s, 0, 3 * s, false, "0s"},
		{"below the rule: clamped", cluster.Timing{HeartbeatInterval: s, UnhealthyAfter: 2 * s, LeaseTTL: 3 * s}, s, 0, 0, false, "0s"},
		{"the blip test's timing", cluster.Timing{HeartbeatInterval: s, UnhealthyAfter: 8 * s, LeaseTTL: 10 * s}, 500 * ms, 5500 * ms, 7500 * ms, true, "7.5s"},
		{"the unit tests' timing", testTiming, 200 * ms, 0, 400 * ms, false, "0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := newTolerances(tt.timing, tt.request)
			if got.late != tt.late || got.expired != tt.expired || got.noticed != tt.noticed {
				t.Fatalf("tolerances %+v, want late %v, expired %v, noticed %v", got, tt.late, tt.expired, tt.noticed)
			}
			if b := BlipTolerance(tt.timing, tt.request); b.String() != tt.tolerancePrint {
				t.Fatalf("BlipTolerance = %v, want %s", b, tt.tolerancePrint)
			}
		})
	}
}

// TestPlanRecovery: where late marks are excluded, an interruption shorter
// than the expiry tolerance needs no hold (issue 46: at the default timing
// etcd pauses of 3, 4 and 8 s held both coordinators for 9 s), and one at
// least that long holds and waits for the own record; at timings too
// tight for that, one at least the late tolerance holds; a recovery in
// progress is never shortened by a later, shorter interruption.
func TestPlanRecovery(t *testing.T) {
	s := time.Second
	ms := time.Millisecond
	def := newTolerances(cluster.Timing{HeartbeatInterval: 5 * s, UnhealthyAfter: 15 * s, LeaseTTL: 30 * s}, 2*s)       // 3 s, 18 s, noticed
	tight := newTolerances(cluster.Timing{HeartbeatInterval: 5 * s, UnhealthyAfter: 14800 * ms, LeaseTTL: 30 * s}, 2*s) // 2.8 s, 18 s
	least := newTolerances(cluster.Timing{HeartbeatInterval: s, UnhealthyAfter: 3 * s, LeaseTTL: 6 * s}, s)             // 0, 3 s
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
		{"at the late tolerance", 3 * s, def, none, none},
		{"a 3 s etcd pause as measured (issue 46)", 3*s + 870*ms, def, none, none},
		{"a 4 s pause as measured", 4*s + 870*ms, def, none, none},
		{"an 8 s pause as measured", 8*s + 870*ms, def, none, none},
		{"just under the expiry tolerance", 18*s - ms, def, none, none},
		{"long enough to expire a record", 18 * s, def, none, both},
		{"2 x lease-ttl", 60 * s, def, none, both},
		{"a blip during a hold", time.Second, def, hold, hold},
		{"a blip during a hold that awaits the own record", time.Second, def, both, both},
		{"tight timing: under the late tolerance", 2800*ms - ms, tight, none, none},
		{"tight timing: at the late tolerance", 2800 * ms, tight, none, hold},
		{"tight timing: a 4 s pause holds", 4 * s, tight, none, hold},
		{"tight timing: an expiry", 18 * s, tight, none, both},
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

// TestInterrupted: a good read ends an interruption when it started more
// than maxGap after the last good one, or, where late marks are excluded,
// when it ended the late tolerance or more after the last good one
// started (the store may have answered nothing for that long, with no
// read failing, when this coordinator's own reads ran late).
func TestInterrupted(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	s := time.Second
	ms := time.Millisecond
	noticed := tolerances{late: 3 * s, expired: 18 * s, noticed: true}
	tight := tolerances{late: 3 * s, expired: 18 * s}
	const maxGap = 3530 * time.Millisecond // the default timing's
	tests := []struct {
		name       string
		tol        tolerances
		start, end time.Duration // of the good read, after the last one started
		want       bool
	}{
		{"the next refresh", noticed, 870 * ms, 880 * ms, false},
		{"a slow read", noticed, 870 * ms, 2800 * ms, false},
		{"a read that waited out a pause", noticed, 2 * s, 3 * s, true},
		{"a late read that waited out a pause", noticed, 3 * s, 4900 * ms, true},
		{"a stall", noticed, 3600 * ms, 3600 * ms, true},
		{"tight timing: a read that waited out a pause", tight, 2 * s, 3 * s, false},
		{"tight timing: a stall", tight, 3600 * ms, 3600 * ms, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.tol.interrupted(t0, at(tt.start), at(tt.end), maxGap); got != tt.want {
				t.Fatalf("interrupted(start +%v, end +%v) = %v, want %v", tt.start, tt.end, got, tt.want)
			}
		})
	}
}

// TestTrackerBlip: the tracker measures an interruption from the start of
// the last good read before it to the end of the first good read after
// it, and answers at once after a short one, holds after a longer one,
// and waits for the own record only when it could have expired; a short
// interruption during a hold restarts the hold. Where late marks are
// excluded, an outage longer than the late tolerance answers at once, and
// a slow read spanning it is an interruption although no read failed.
func TestTrackerBlip(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	v := &View{Snapshot: &state.Snapshot{}}
	s := time.Second
	ms := time.Millisecond
	tight := tolerances{late: 5 * s, expired: 10 * s}
	noticed := tolerances{late: 5 * s, expired: 10 * s, noticed: true}
	type step struct {
		fail       bool          // a failed read (else a good one)
		start, end time.Duration // of a good read
	}
	tests := []struct {
		name      string
		tol       tolerances
		steps     []step
		outage    time.Duration // of the last step
		plan      recoveryPlan
		reasonHas string // of the tracker right after the last step ("" : ready)
	}{
		{"a short store outage answers at once", tight, []step{{fail: true}, {start: 4 * s, end: 4*s + 100*ms}}, 4100 * ms, recoveryPlan{}, ""},
		{"the read that ends it counts to its end", tight, []step{{fail: true}, {start: 4 * s, end: 5 * s}}, 5 * s, recoveryPlan{hold: true}, "observing"},
		{"a longer outage holds without the own record", tight, []step{{fail: true}, {start: 6 * s, end: 6 * s}}, 6 * s, recoveryPlan{hold: true}, "observing"},
		{"an outage that could expire records awaits the own record", tight, []step{{fail: true}, {start: 12 * s, end: 12 * s}}, 12 * s, recoveryPlan{hold: true, awaitSelf: true}, "own record"},
		{"a short stall answers at once", tight, []step{{start: 4 * s, end: 4 * s}}, 4 * s, recoveryPlan{}, ""},
		{"a long stall holds and awaits the own record", tight, []step{{start: 20 * s, end: 20 * s}}, 20 * s, recoveryPlan{hold: true, awaitSelf: true}, "own record"},
		{"a blip during a hold restarts the hold", tight, []step{{fail: true}, {start: 12 * s, end: 12 * s}, {fail: true}, {start: 13 * s, end: 13 * s}}, s, recoveryPlan{hold: true, awaitSelf: true}, "own record"},
		{"late marks excluded: an outage past the late tolerance answers at once", noticed, []step{{fail: true}, {start: 6 * s, end: 6 * s}}, 6 * s, recoveryPlan{}, ""},
		{"late marks excluded: a stall past it too", noticed, []step{{start: 8 * s, end: 8 * s}}, 8 * s, recoveryPlan{}, ""},
		{"late marks excluded: a slow read spanning it is an interruption", noticed, []step{{start: 2900 * ms, end: 5 * s}}, 5 * s, recoveryPlan{}, ""},
		{"late marks excluded: an outage that could expire records still holds", noticed, []step{{fail: true}, {start: 12 * s, end: 12 * s}}, 12 * s, recoveryPlan{hold: true, awaitSelf: true}, "own record"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTracker(time.Second, 3*time.Second, tt.tol)
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
	if tol := BlipTolerance(timing, requestTimeout); tol != 3600*time.Millisecond {
		t.Fatalf("blip tolerance %v, want 3.6s", tol)
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
	page, _ := f.c.Events(EventQuery{Types: []state.NodeEventType{state.EventStoreRecovered}})
	if n := len(page.Events); n == 0 || !strings.Contains(page.Events[n-1].Reason, "answering at once") {
		t.Fatalf("store_recovered events %+v, want the last to say it answers at once", page.Events)
	}
	store.shed.Store(false)
}

// TestOutagePastLateToleranceAnsweredAtOnce: issue 46. At a timing whose
// late marks are excluded (late tolerance 1.6 s, expiry tolerance 3.6 s),
// a store outage longer than unhealthy-after itself, while live workers
// only renew their leases (their versions do not change, as on etcd), is
// answered from the first good read at once, with every live worker; and
// no live worker is marked late afterwards: this coordinator's
// observation starts over, so its first late proposal would come
// unhealthy-after after the store's return, long after the workers
// renewed. The code before issue 46 held itself unready for the recovery
// hold after any outage past the late tolerance.
func TestOutagePastLateToleranceAnsweredAtOnce(t *testing.T) {
	timing := cluster.Timing{HeartbeatInterval: 100 * time.Millisecond, UnhealthyAfter: 2 * time.Second, LeaseTTL: 4 * time.Second}
	const requestTimeout = 200 * time.Millisecond // newTestCoordinator's
	hold := timing.HeartbeatInterval + 2*requestTimeout
	if tol := newTolerances(timing, requestTimeout); !tol.noticed || tol.late != 1600*time.Millisecond {
		t.Fatalf("tolerances %+v, want late marks excluded with a late tolerance of 1.6s", tol)
	}
	store := memory.New(memory.Options{})
	t.Cleanup(func() { store.Close() })
	workers := []string{"w1", "w2", "w3"}
	for _, id := range workers {
		if _, err := store.UpsertNode(context.Background(), workerRecord(id, "i", 0), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	// Live workers: a renewal every interval, failing during the outage.
	beatCtx, stopBeats := context.WithCancel(context.Background())
	beats := make(chan struct{})
	go func() {
		defer close(beats)
		for seq := uint64(1); beatCtx.Err() == nil; seq++ {
			for _, id := range workers {
				_, _ = store.UpsertNode(beatCtx, workerRecord(id, "i", seq), time.Minute, state.Heartbeat(), state.StatusEvery(1000))
			}
			time.Sleep(timing.HeartbeatInterval)
		}
	}()
	t.Cleanup(func() { stopBeats(); <-beats })
	f := startTimed(t, store, 0, Limits{}, timing)
	lookup := func() ([]placement.Owner, error) {
		owners, _, err := f.c.Lookup(context.Background(), "k#0", 3)
		return owners, err
	}
	waitFor(t, "three owners", func() bool { o, err := lookup(); return err == nil && len(o) == 3 })

	store.SetFault(state.ErrUnavailable)
	failed := time.Now()
	waitFor(t, "fail closed", func() bool { _, err := lookup(); return err != nil })
	time.Sleep(timing.UnhealthyAfter + timing.UnhealthyAfter/4) // every renewal is older than unhealthy-after
	store.ClearFault()
	cleared := time.Now()
	var owners []placement.Owner
	waitFor(t, "answers again", func() bool {
		var err error
		owners, err = lookup()
		return err == nil
	})
	took := time.Since(cleared)
	t.Logf("outage %v; answering %v after the store answered again (recovery hold %v)",
		cleared.Sub(failed).Round(time.Millisecond), took.Round(time.Millisecond), hold)
	if len(owners) != 3 {
		t.Fatalf("first answer after the outage names %d owners, want the 3 live workers", len(owners))
	}
	if took >= hold {
		t.Fatalf("answered %v after the store answered again, want within the recovery hold %v (no hold before records could expire)", took, hold)
	}
	// Past the point where observation that spanned the outage would
	// have proposed late marks, and one unhealthy-after more.
	for time.Since(cleared) < timing.UnhealthyAfter+500*time.Millisecond {
		if o, err := lookup(); err != nil || len(o) != 3 {
			t.Fatalf("%v after the outage: %d owners, %v; want the 3 live workers", time.Since(cleared).Round(time.Millisecond), len(o), err)
		}
		snap, err := store.Snapshot(context.Background(), "test")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range snap.Records {
			if r.Late {
				t.Fatalf("%v after the outage: %s marked late, want no live worker marked late for the outage", time.Since(cleared).Round(time.Millisecond), r.NodeID)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A mark lasts only until the worker's next renewal clears it: the
	// store's count of applied marks is the evidence that none was.
	if n := testutil.ToFloat64(f.c.m.transitions.WithLabelValues(state.TransitionLate.String(), state.OutcomeAccepted.String())); n != 0 {
		t.Fatalf("%v late marks proposed and applied after the outage, want none for live workers", n)
	}
}
