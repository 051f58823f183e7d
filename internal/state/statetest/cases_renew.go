package statetest

import (
	"testing"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

// renewTTL is the lease of the renewal cases: long enough for etcd to
// renew a lease without a write (its minimum is 5 s, whole seconds).
const renewTTL = 6 * time.Second

// quietHeartbeat is rec's next heartbeat that changes nothing
// cluster.NeedsStatusWrite counts: only the sequence and the counters
// (newRecord derives them from it) move.
func (e *env) quietHeartbeat(node, incarnation string, seq uint64) *cluster.Record {
	return e.rec(cluster.RoleWorker, node, incarnation, seq)
}

// renew sends a heartbeat with state.StatusEvery(every) and checks that it
// was accepted as an advance; the slot then holds either rec or, Renewed
// (only its lease was renewed), the stored record: as it was (etcd,
// memory: the renewal shows in no version) or at rec's sequence (a
// backend without a lease expiry of its own, Kubernetes, must show every
// renewal in the record's version, since coordinators judge liveness by
// the version alone there).
func (e *env) renew(rec *cluster.Record, stored *cluster.Record, every uint64) state.WriteResult {
	e.t.Helper()
	res := e.upsert(rec, renewTTL, state.Heartbeat(), state.StatusEvery(every))
	holds := rec
	if res.Renewed {
		holds = stored
		if res.Record != nil && res.Record.HeartbeatSeq == rec.HeartbeatSeq {
			holds = stored.Clone()
			holds.HeartbeatSeq = rec.HeartbeatSeq
		}
	}
	checkWrite(e.t, "quiet heartbeat", res, cluster.DecisionAdvance, holds)
	mustFind(e.t, e.snapshot(e.cluster), holds)
	return res
}

// runRenew checks heartbeats that may only renew a lease
// (state.StatusEvery) and transitions that must honour the renewals
// (state.MinSilence). A backend may write the record on every heartbeat;
// one that renews without writing must keep the lease, the record's
// content and the ordering rule exactly as a write would.
func runRenew(t *testing.T, newHarness Factory) {
	t.Run("QuietHeartbeatKeepsRecordAndRefreshesLease", func(t *testing.T) { caseRenewQuietHeartbeatKeepsRecordAndRefreshesLease(t, newHarness) })
	t.Run("StatusChangeIsWritten", func(t *testing.T) { caseRenewStatusChangeIsWritten(t, newHarness) })
	t.Run("StatusIntervalIsWritten", func(t *testing.T) { caseRenewStatusIntervalIsWritten(t, newHarness) })
	t.Run("HeartbeatClearsLateMark", func(t *testing.T) { caseRenewHeartbeatClearsLateMark(t, newHarness) })
	t.Run("TransitionsHonourRenewals", func(t *testing.T) { caseRenewTransitionsHonourRenewals(t, newHarness) })
	t.Run("LateMarkKeepsHeartbeatTime", func(t *testing.T) { caseRenewLateMarkKeepsHeartbeatTime(t, newHarness) })
}

// caseRenewLateMarkKeepsHeartbeatTime: the record's heartbeatAtUnixMs
// says when the process was last heard, renewals included, and a late
// mark written later does not move it (issue 38: a silent worker's
// heartbeat age showed the time of its mark).
func caseRenewLateMarkKeepsHeartbeatTime(t *testing.T, newHarness Factory) {
	e := setup(t, newHarness)
	rec := e.rec(cluster.RoleWorker, "w1", "inc-a", 0)
	reg := e.mustUpsert(rec, renewTTL, cluster.DecisionInsert, rec)
	registered := reg.Record.HeartbeatAt()
	if d := time.Duration(reg.Record.HeartbeatAtUnixMs-reg.Record.UpdatedAtUnixMs) * time.Millisecond; reg.Record.HeartbeatAtUnixMs <= 0 || d.Abs() > clockTolerance {
		t.Fatalf("a registration's heartbeatAtUnixMs is %d, want the store's stamp (updatedAtUnixMs %d)", reg.Record.HeartbeatAtUnixMs, reg.Record.UpdatedAtUnixMs)
	}
	e.h.Advance(2 * time.Second)
	e.renew(e.quietHeartbeat("w1", "inc-a", 1), rec, 100)
	e.h.Advance(2500 * time.Millisecond)
	held := find(t, e.snapshot(e.cluster), rec.Key())
	if held == nil {
		t.Fatal("record gone")
	}
	res, err := e.s.ProposeTransition(e.ctx(), rec.Key(), "inc-a", held.HeartbeatSeq, state.TransitionLate, state.MinSilence(time.Second))
	if err != nil || res.Outcome != state.OutcomeAccepted {
		t.Fatalf("late proposed 2.5s after the last heartbeat = %+v, %v; want accepted", res, err)
	}
	got := find(t, e.snapshot(e.cluster), rec.Key())
	if got == nil {
		t.Fatal("record gone after the late mark")
	}
	heard := got.HeartbeatAt()
	switch {
	case !got.Late:
		t.Fatal("the applied late proposal left no mark")
	case heard > registered+3500:
		t.Fatalf("after the late mark (4.5s after the registration) heartbeatAtUnixMs is %d ms after the registration: the mark moved the last heartbeat (2s after it)", heard-registered)
	case heard < registered+900:
		// etcd knows a renewal's time to the second, and counts it as
		// early as it can have been.
		t.Fatalf("after the late mark heartbeatAtUnixMs is %d, %d ms after the registration: want the heartbeat 2s after it", heard, heard-registered)
	}
}

func caseRenewQuietHeartbeatKeepsRecordAndRefreshesLease(t *testing.T, newHarness Factory) {
	e := setup(t, newHarness)
	rec := e.rec(cluster.RoleWorker, "w1", "inc-a", 0)
	e.mustUpsert(rec, renewTTL, cluster.DecisionInsert, rec)
	stored := rec
	for seq := uint64(1); seq <= 2; seq++ {
		if e.h.LeaseExpiry {
			e.h.Advance(renewTTL * 3 / 4)
		}
		hb := e.quietHeartbeat("w1", "inc-a", seq)
		if res := e.renew(hb, stored, 100); !res.Renewed {
			stored = hb
		}
	}
	if !e.h.LeaseExpiry {
		return
	}
	// 1.5 leases after the registration: alive only if the renewals
	// refreshed the lease.
	mustFind(t, e.snapshot(e.cluster), stored)
	e.h.Advance(renewTTL)
	e.eventually("record gone a lease after its last renewal", renewTTL/10, 10, func() bool {
		return find(t, e.snapshot(e.cluster), rec.Key()) == nil
	})
}

func caseRenewStatusChangeIsWritten(t *testing.T, newHarness Factory) {
	e := setup(t, newHarness)
	rec := e.rec(cluster.RoleWorker, "w1", "inc-a", 0)
	e.mustUpsert(rec, renewTTL, cluster.DecisionInsert, rec)
	changed := e.quietHeartbeat("w1", "inc-a", 1)
	changed.Health, changed.Ready, changed.NotReadyReason = cluster.HealthDegraded, false, "cordoned"
	if res := e.renew(changed, rec, 100); res.Renewed {
		t.Fatalf("a heartbeat that changed health and readiness only renewed the lease: the slot holds %s", describe(res.Record))
	}
}

func caseRenewStatusIntervalIsWritten(t *testing.T, newHarness Factory) {
	e := setup(t, newHarness)
	rec := e.rec(cluster.RoleWorker, "w1", "inc-a", 0)
	e.mustUpsert(rec, renewTTL, cluster.DecisionInsert, rec)
	stored := rec
	statusAt := func() int64 {
		got := find(t, e.snapshot(e.cluster), rec.Key())
		if got == nil {
			t.Fatal("record gone")
		}
		return got.StatusAtUnixMs
	}
	written := statusAt()
	if written <= 0 {
		t.Fatalf("a registration's statusAtUnixMs is %d, want the store's stamp", written)
	}
	if res := e.renew(e.quietHeartbeat("w1", "inc-a", 4), rec, 5); !res.Renewed {
		stored = res.Record
	} else if got := statusAt(); got != written {
		t.Fatalf("a renewal moved statusAtUnixMs from %d to %d: the status was not written", written, got)
	}
	due := e.quietHeartbeat("w1", "inc-a", stored.HeartbeatSeq+5)
	if res := e.renew(due, stored, 5); res.Renewed {
		t.Fatalf("a heartbeat a status interval (5) after the stored record (seq %d) only renewed the lease", stored.HeartbeatSeq)
	}
	if got := statusAt(); got < written {
		t.Fatalf("a status write left statusAtUnixMs at %d, before the registration's %d", got, written)
	}
}

func caseRenewHeartbeatClearsLateMark(t *testing.T, newHarness Factory) {
	e := setup(t, newHarness)
	rec := e.rec(cluster.RoleWorker, "w1", "inc-a", 0)
	e.mustUpsert(rec, renewTTL, cluster.DecisionInsert, rec)
	e.mustPropose(rec.Key(), "inc-a", 0, state.TransitionLate, state.OutcomeAccepted, lateOf(rec))
	hb := e.quietHeartbeat("w1", "inc-a", 1)
	if res := e.renew(hb, rec, 100); res.Renewed {
		t.Fatal("a heartbeat to a late record only renewed the lease: the mark stays")
	}
	if got := find(t, e.snapshot(e.cluster), rec.Key()); got == nil || got.Late {
		t.Fatalf("after a heartbeat the slot holds %s, want the record without the late mark", describe(got))
	}
}

func caseRenewTransitionsHonourRenewals(t *testing.T, newHarness Factory) {
	e := setup(t, newHarness)
	rec := e.rec(cluster.RoleWorker, "w1", "inc-a", 0)
	e.mustUpsert(rec, renewTTL, cluster.DecisionInsert, rec)
	hb := e.renew(e.quietHeartbeat("w1", "inc-a", 1), rec, 100)
	if !hb.Renewed {
		t.Skip("the backend writes every heartbeat: the version moves, and proposals for the old one are stale")
	}
	// The version a coordinator saw before the renewal is seq 0. Where
	// the renewal shows in the version (Kubernetes: hb.Record is at
	// seq 1), a proposal for seq 0 is stale by its sequence; where it
	// does not (etcd, memory), the backend's own clock of the
	// renewals refuses it.
	visible := hb.Record.HeartbeatSeq != rec.HeartbeatSeq
	for _, tr := range []state.Transition{state.TransitionLate, state.TransitionExpire} {
		res, err := e.s.ProposeTransition(e.ctx(), rec.Key(), "inc-a", 0, tr, state.MinSilence(time.Second))
		switch {
		case err != nil || res.Outcome != state.OutcomeStale:
			t.Fatalf("%s proposed for seq 0 right after a renewal, with MinSilence 1s = %+v, %v; want stale", tr, res, err)
		case !visible && (!res.Renewed || res.RenewedAgo >= time.Second):
			t.Fatalf("%s proposed right after a renewal that shows in no version, with MinSilence 1s = %+v; want stale, renewed less than 1s ago", tr, res)
		}
	}
	if got := mustFind(t, e.snapshot(e.cluster), hb.Record); got.Late {
		t.Fatal("a refused late proposal marked the record")
	}
	// Silent for longer than MinSilence (etcd counts whole seconds and
	// rounds the silence down): a mark of the version the slot holds
	// applies.
	e.h.Advance(2500 * time.Millisecond)
	res, err := e.s.ProposeTransition(e.ctx(), rec.Key(), "inc-a", hb.Record.HeartbeatSeq, state.TransitionLate, state.MinSilence(time.Second))
	if err != nil || res.Outcome != state.OutcomeAccepted {
		t.Fatalf("late proposed 2.5s after the last renewal, with MinSilence 1s = %+v, %v; want accepted", res, err)
	}
	if got := mustFind(t, e.snapshot(e.cluster), lateOf(hb.Record)); !got.Late {
		t.Fatal("the applied late proposal left no mark")
	}
}
