package statetest

import (
	"testing"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

// setMarks calls SetMarks and checks its outcome.
func (e *env) setMarks(key cluster.Key, incarnation string, m state.MarkChange, want state.Outcome) state.WriteResult {
	e.t.Helper()
	res, err := e.s.SetMarks(e.ctx(), key, incarnation, m)
	if err != nil {
		e.t.Fatalf("SetMarks(%s, %q, %+v): %v", key, incarnation, m, err)
	}
	if res.Outcome != want {
		e.t.Fatalf("SetMarks(%s, %q, %+v) = %s (slot holds %s), want %s", key, incarnation, m, res.Outcome, describe(res.Record), want)
	}
	return res
}

func cordon(by string, persist bool) state.MarkChange {
	return state.MarkChange{SetCordon: true, Cordon: state.Cordon{By: by, AtUnixMs: 1_784_800_000_000, Persist: persist}}
}

// runMarks checks SetMarks: the operator's cordon and a coordinator's
// revocation, set in the store on the record the process owns otherwise,
// kept by its updates as the ordering rule says, never moving its lease.
func runMarks(t *testing.T, newHarness Factory) {
	t.Run("CordonSetKeptAndLifted", func(t *testing.T) { caseMarksCordonSetKeptAndLifted(t, newHarness) })
	t.Run("RevocationIsOfOneIncarnation", func(t *testing.T) { caseMarksRevocationIsOfOneIncarnation(t, newHarness) })
	t.Run("MissingAndInvalid", func(t *testing.T) { caseMarksMissingAndInvalid(t, newHarness) })
	t.Run("MarkKeepsTheLease", func(t *testing.T) { caseMarksMarkKeepsTheLease(t, newHarness) })
}

func caseMarksCordonSetKeptAndLifted(t *testing.T, newHarness Factory) {
	e := setup(t, newHarness)
	rec := e.rec(cluster.RoleWorker, "w1", "inc-a", 1)
	e.mustUpsert(rec, longTTL, cluster.DecisionInsert, rec)
	res := e.setMarks(rec.Key(), "", cordon("token:ops", true), state.OutcomeAccepted)
	if !res.Record.Cordoned() || res.Record.CordonedBy != "token:ops" || !res.Record.CordonPersist {
		t.Fatalf("cordoned record %s", describe(res.Record))
	}
	e.setMarks(rec.Key(), "", cordon("token:ops", true), state.OutcomeDuplicate)
	// The process's own updates cannot lift it: an advance, a restart.
	hb := e.rec(cluster.RoleWorker, "w1", "inc-a", 2)
	e.upsert(hb, longTTL, state.Heartbeat())
	rst := e.rec(cluster.RoleWorker, "w1", "inc-b", 0)
	e.upsert(rst, longTTL)
	got := find(t, e.snapshot(e.cluster), rec.Key())
	if got == nil || got.IncarnationID != "inc-b" || got.CordonedBy != "token:ops" {
		t.Fatalf("after a heartbeat and a restart the slot holds %s; want inc-b, still cordoned by token:ops", describe(got))
	}
	e.setMarks(rec.Key(), "", state.MarkChange{SetCordon: true}, state.OutcomeAccepted)
	if got := find(t, e.snapshot(e.cluster), rec.Key()); got == nil || got.Cordoned() || got.CordonPersist || got.CordonedAtUnixMs != 0 {
		t.Fatalf("after the uncordon the slot holds %s", describe(got))
	}
}

func caseMarksRevocationIsOfOneIncarnation(t *testing.T, newHarness Factory) {
	e := setup(t, newHarness)
	rec := e.rec(cluster.RoleWorker, "w1", "inc-a", 1)
	e.mustUpsert(rec, longTTL, cluster.DecisionInsert, rec)
	revoke := state.MarkChange{RevokedBy: "coord-a", RevokedReason: "node:w1"}
	e.setMarks(rec.Key(), "inc-z", revoke, state.OutcomeStale)
	res := e.setMarks(rec.Key(), "inc-a", revoke, state.OutcomeAccepted)
	if !res.Record.Revoked() || res.Record.RevokedReason != "node:w1" {
		t.Fatalf("revoked record %s", describe(res.Record))
	}
	hb := e.rec(cluster.RoleWorker, "w1", "inc-a", 2)
	e.upsert(hb, longTTL, state.Heartbeat())
	if got := find(t, e.snapshot(e.cluster), rec.Key()); got == nil || !got.Revoked() {
		t.Fatalf("a heartbeat lifted the revocation: %s", describe(got))
	}
	e.upsert(e.rec(cluster.RoleWorker, "w1", "inc-b", 0), longTTL)
	if got := find(t, e.snapshot(e.cluster), rec.Key()); got == nil || got.Revoked() {
		t.Fatalf("a new incarnation inherited the revocation: %s", describe(got))
	}
}

func caseMarksMissingAndInvalid(t *testing.T, newHarness Factory) {
	e := setup(t, newHarness)
	key := e.rec(cluster.RoleWorker, "nobody", "inc-a", 1).Key()
	e.setMarks(key, "", cordon("token:ops", false), state.OutcomeNotFound)
	if _, err := e.s.SetMarks(e.ctx(), key, "", state.MarkChange{}); err == nil {
		t.Fatal("SetMarks with nothing to change succeeded")
	}
}

func caseMarksMarkKeepsTheLease(t *testing.T, newHarness Factory) {
	e := setup(t, newHarness)
	e.requireLeaseExpiry()
	ttl := e.h.LeaseTTL
	rec := e.rec(cluster.RoleWorker, "w1", "inc-a", 1)
	e.mustUpsert(rec, ttl, cluster.DecisionInsert, rec)
	e.h.Advance(ttl / 2)
	e.setMarks(rec.Key(), "", cordon("token:ops", false), state.OutcomeAccepted)
	e.h.Advance(ttl / 2)
	e.eventually("cordoned record gone one lease after its last accepted write", ttl/10, 4, func() bool {
		return find(t, e.snapshot(e.cluster), rec.Key()) == nil
	})
}
