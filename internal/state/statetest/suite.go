package statetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

// Wall-clock bounds of the suite. They are generous because real backends
// run them; none is a performance assertion.
const (
	// opTimeout bounds one store operation.
	opTimeout = 10 * time.Second
	// watchWait bounds the wait for an expected watch event.
	watchWait = 10 * time.Second
	// clockTolerance is the skew allowed between a record's UpdatedAtUnixMs
	// and a snapshot's ObservedAtUnixMs when a backend stamps them from
	// different clocks (client and server).
	clockTolerance = time.Second
	// longTTL is the lease of records in cases that are not about expiry.
	longTTL = 5 * time.Minute
)

// Run runs the whole contract suite against the backend newHarness builds,
// one harness per case.
func Run(t *testing.T, newHarness Factory) {
	t.Helper()
	if newHarness == nil {
		t.Fatal("statetest.Run: the factory is nil")
	}
	t.Run("Basics", func(t *testing.T) { runBasics(t, newHarness) })
	t.Run("Upsert", func(t *testing.T) { runUpsert(t, newHarness) })
	t.Run("Identity", func(t *testing.T) { runIdentity(t, newHarness) })
	t.Run("Remove", func(t *testing.T) { runRemove(t, newHarness) })
	t.Run("Snapshot", func(t *testing.T) { runSnapshot(t, newHarness) })
	t.Run("Validation", func(t *testing.T) { runValidation(t, newHarness) })
	t.Run("Lease", func(t *testing.T) { runLease(t, newHarness) })
	t.Run("Transition", func(t *testing.T) { runTransition(t, newHarness) })
	t.Run("Renew", func(t *testing.T) { runRenew(t, newHarness) })
	t.Run("Marks", func(t *testing.T) { runMarks(t, newHarness) })
	t.Run("Watch", func(t *testing.T) { runWatch(t, newHarness) })
	t.Run("Compaction", func(t *testing.T) { runCompaction(t, newHarness) })
	t.Run("SlowWatcher", func(t *testing.T) { runSlowWatcher(t, newHarness) })
	t.Run("Errors", func(t *testing.T) { runErrors(t, newHarness) })
	t.Run("Concurrency", func(t *testing.T) { runConcurrency(t, newHarness) })
	t.Run("Skew", func(t *testing.T) { runSkew(t, newHarness) })
	t.Run("Events", func(t *testing.T) { runEvents(t, newHarness) })
	t.Run("Cordons", func(t *testing.T) { runCordons(t, newHarness) })
	t.Run("Jobs", func(t *testing.T) { runJobs(t, newHarness) })
}

// env is one case: its harness and its own cluster ID.
type env struct {
	t       *testing.T
	h       *Harness
	s       state.Store
	cluster string
}

// setup builds the case's harness and fails the case when any hook is
// missing: a backend cannot pass a case by leaving its hook out.
func setup(t *testing.T, newHarness Factory) *env {
	t.Helper()
	h := newHarness(t)
	switch {
	case h == nil:
		t.Fatal("the factory returned a nil harness")
	case h.Store == nil:
		t.Fatal("harness Store is nil")
	case h.Advance == nil:
		t.Fatal("harness Advance is nil: every backend must move its clock (a real backend sleeps)")
	case h.LeaseTTL <= 0:
		t.Fatalf("harness LeaseTTL %s: must be positive", h.LeaseTTL)
	case h.Fault == nil:
		t.Fatal("harness Fault is nil: a backend that cannot inject a fault must cause it for real")
	case h.Compact == nil:
		t.Fatal("harness Compact is nil: every backend must be able to compact its history")
	case h.Peer == nil:
		t.Fatal("harness Peer is nil: every backend must open a second store with a skewed clock")
	}
	return &env{t: t, h: h, s: h.Store, cluster: clusterID(t, "")}
}

// clusterID returns a cluster ID unique to the case, readable in a
// backend's keys.
func clusterID(t testing.TB, suffix string) string {
	name := t.Name()
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	var b strings.Builder
	b.WriteString("st-")
	for _, c := range strings.ToLower(name) {
		if b.Len() >= 40 {
			break
		}
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			b.WriteRune(c)
		} else {
			b.WriteByte('-')
		}
	}
	fmt.Fprintf(&b, "-%08x%s", rand.Uint32(), suffix)
	return b.String()
}

// ctx returns a context for one operation, bounded by opTimeout.
func (e *env) ctx() context.Context {
	ctx, cancel := context.WithTimeout(e.t.Context(), opTimeout)
	e.t.Cleanup(cancel)
	return ctx
}

// recordStart is the start time of every record rec and newRecord make.
const recordStart = 1_784_800_000_000

// rec returns a valid record of the case's cluster. Fields derived from seq
// make a record's content identify the heartbeat that carried it.
func (e *env) rec(role cluster.Role, node, incarnation string, seq uint64) *cluster.Record {
	return newRecord(e.cluster, role, node, incarnation, seq)
}

func newRecord(clusterID string, role cluster.Role, node, incarnation string, seq uint64) *cluster.Record {
	return &cluster.Record{
		ClusterID:       clusterID,
		NodeID:          node,
		Role:            role,
		IncarnationID:   incarnation,
		Address:         "10.1.2.3:7070",
		AdminAddress:    "10.1.2.3:9090",
		Version:         "v1.0.0-statetest",
		StartTimeUnixMs: recordStart,
		HeartbeatSeq:    seq,
		Health:          cluster.HealthHealthy,
		Ready:           true,
		Capacity:        cluster.Capacity{CapacityBytes: 1 << 30, ResidentBytes: seq * 4096, Blocks: seq},
		Counters:        cluster.Counters{RequestsTotal: seq * 10, HitsTotal: seq * 7},
		Labels:          map[string]string{"zone": "z1", "node": node},
	}
}

// upsert writes rec and fails the case on error.
func (e *env) upsert(rec *cluster.Record, ttl time.Duration, opts ...state.UpsertOption) state.WriteResult {
	e.t.Helper()
	res, err := e.s.UpsertNode(e.ctx(), rec, ttl, opts...)
	if err != nil {
		e.t.Fatalf("UpsertNode(%s seq %d incarnation %s): %v", rec.Key(), rec.HeartbeatSeq, rec.IncarnationID, err)
	}
	return res
}

// mustUpsert writes rec and checks the result against the decision the
// ordering rule must make and the record the slot must then hold.
func (e *env) mustUpsert(rec *cluster.Record, ttl time.Duration, want cluster.Decision, holds *cluster.Record) state.WriteResult {
	e.t.Helper()
	res := e.upsert(rec, ttl)
	checkWrite(e.t, fmt.Sprintf("UpsertNode(%s seq %d incarnation %s)", rec.Key(), rec.HeartbeatSeq, rec.IncarnationID), res, want, holds)
	return res
}

// mustHeartbeat is mustUpsert for a heartbeat (state.Heartbeat). holds nil
// means the slot must stay empty.
func (e *env) mustHeartbeat(rec *cluster.Record, ttl time.Duration, want cluster.Decision, holds *cluster.Record) state.WriteResult {
	e.t.Helper()
	res := e.upsert(rec, ttl, state.Heartbeat())
	what := fmt.Sprintf("heartbeat(%s seq %d incarnation %s)", rec.Key(), rec.HeartbeatSeq, rec.IncarnationID)
	if holds == nil {
		if res.Outcome != state.OutcomeOf(want) || res.Decision != want || res.Record != nil {
			e.t.Fatalf("%s = outcome %s decision %s record %s, want outcome %s decision %s and no record",
				what, res.Outcome, res.Decision, describe(res.Record), state.OutcomeOf(want), want)
		}
		return res
	}
	checkWrite(e.t, what, res, want, holds)
	return res
}

// checkWrite checks an upsert result: outcome and decision agree with want,
// and the record the slot holds has holds's content.
func checkWrite(t testing.TB, what string, res state.WriteResult, want cluster.Decision, holds *cluster.Record) {
	t.Helper()
	wantOutcome := state.OutcomeOf(want)
	if res.Outcome != wantOutcome || res.Decision != want {
		t.Fatalf("%s = outcome %s decision %s, want outcome %s decision %s", what, res.Outcome, res.Decision, wantOutcome, want)
	}
	if res.Revision.IsZero() {
		t.Fatalf("%s returned the zero revision", what)
	}
	if res.Record == nil {
		t.Fatalf("%s returned no record; want the record the slot holds", what)
	}
	if !sameContent(res.Record, holds) {
		t.Fatalf("%s: slot holds %s, want %s", what, describe(res.Record), describe(holds))
	}
}

func (e *env) snapshot(clusterID string) *state.Snapshot {
	e.t.Helper()
	snap, err := e.s.Snapshot(e.ctx(), clusterID)
	if err != nil {
		e.t.Fatalf("Snapshot(%s): %v", clusterID, err)
	}
	if snap == nil {
		e.t.Fatalf("Snapshot(%s) returned nil and no error", clusterID)
	}
	if snap.ClusterID != clusterID {
		e.t.Fatalf("Snapshot(%s).ClusterID = %q", clusterID, snap.ClusterID)
	}
	if snap.Revision.IsZero() {
		e.t.Fatalf("Snapshot(%s) returned the zero revision", clusterID)
	}
	if snap.ObservedAtUnixMs <= 0 {
		e.t.Fatalf("Snapshot(%s).ObservedAtUnixMs = %d, want a time", clusterID, snap.ObservedAtUnixMs)
	}
	for i, r := range snap.Records {
		if r == nil {
			e.t.Fatalf("Snapshot(%s).Records[%d] is nil", clusterID, i)
		}
		if r.ClusterID != clusterID {
			e.t.Fatalf("Snapshot(%s) holds %s of another cluster", clusterID, r.Key())
		}
		if i > 0 && compareRecords(snap.Records[i-1], r) >= 0 {
			e.t.Fatalf("Snapshot(%s) is not ordered by role then node ID: %s before %s", clusterID, snap.Records[i-1].Key(), r.Key())
		}
	}
	return snap
}

func (e *env) remove(key cluster.Key, incarnation string) state.WriteResult {
	e.t.Helper()
	res, err := e.s.RemoveNode(e.ctx(), key, incarnation)
	if err != nil {
		e.t.Fatalf("RemoveNode(%s, %s): %v", key, incarnation, err)
	}
	if res.Revision.IsZero() {
		e.t.Fatalf("RemoveNode(%s, %s) returned the zero revision", key, incarnation)
	}
	if res.Decision != 0 {
		e.t.Fatalf("RemoveNode(%s, %s).Decision = %s, want none", key, incarnation, res.Decision)
	}
	return res
}

// find returns the record in slot key of snap, failing on duplicates.
func find(t testing.TB, snap *state.Snapshot, key cluster.Key) *cluster.Record {
	t.Helper()
	var found *cluster.Record
	for _, r := range snap.Records {
		if r.Key() == key {
			if found != nil {
				t.Fatalf("snapshot holds two records for %s", key)
			}
			found = r
		}
	}
	return found
}

// mustFind returns the record in slot key and checks its content.
func mustFind(t testing.TB, snap *state.Snapshot, want *cluster.Record) *cluster.Record {
	t.Helper()
	got := find(t, snap, want.Key())
	if got == nil {
		t.Fatalf("snapshot at revision %s lacks %s", snap.Revision, want.Key())
	}
	if !sameContent(got, want) {
		t.Fatalf("snapshot holds %s, want %s", describe(got), describe(want))
	}
	return got
}

func mustLack(t testing.TB, snap *state.Snapshot, key cluster.Key) {
	t.Helper()
	if r := find(t, snap, key); r != nil {
		t.Fatalf("snapshot at revision %s still holds %s", snap.Revision, describe(r))
	}
}

// sameContent reports whether two records are equal in everything a
// process sends, that is, ignoring UpdatedAtUnixMs, StatusAtUnixMs and HeartbeatAtUnixMs, which the store sets.
func sameContent(a, b *cluster.Record) bool {
	if a == nil || b == nil {
		return a == b
	}
	a, b = a.Clone(), b.Clone()
	// Store-issued fields are checked by the cases about them.
	a.UpdatedAtUnixMs, b.UpdatedAtUnixMs = 0, 0
	a.StatusAtUnixMs, b.StatusAtUnixMs = 0, 0
	a.HeartbeatAtUnixMs, b.HeartbeatAtUnixMs = 0, 0
	a.Generation, b.Generation = 0, 0
	a.Superseded, b.Superseded = nil, nil
	return sameRecord(a, b)
}

// sameRecord reports whether two records encode identically.
func sameRecord(a, b *cluster.Record) bool {
	if a == nil || b == nil {
		return a == b
	}
	ea, errA := cluster.Encode(a)
	eb, errB := cluster.Encode(b)
	return errA == nil && errB == nil && bytes.Equal(ea, eb)
}

// sameSnapshot reports whether two snapshots hold the same records.
func sameSnapshot(a, b *state.Snapshot) bool {
	if len(a.Records) != len(b.Records) {
		return false
	}
	for i := range a.Records {
		if !sameRecord(a.Records[i], b.Records[i]) {
			return false
		}
	}
	return true
}

func describe(r *cluster.Record) string {
	if r == nil {
		return "no record"
	}
	return fmt.Sprintf("%s incarnation %s seq %d (health %s, updated %d)", r.Key(), r.IncarnationID, r.HeartbeatSeq, r.Health, r.UpdatedAtUnixMs)
}

func compareRecords(a, b *cluster.Record) int {
	if c := strings.Compare(string(a.Role), string(b.Role)); c != 0 {
		return c
	}
	return strings.Compare(a.NodeID, b.NodeID)
}

// checkSentinel checks that err wraps want, with the class state.Code and
// state.Retryable give want.
func checkSentinel(t testing.TB, what string, err, want error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s succeeded, want an error wrapping %q", what, want)
	}
	if !errors.Is(err, want) {
		t.Fatalf("%s: error %q does not wrap %q", what, err, want)
	}
	if got, wantCode := state.Code(err), state.Code(want); got != wantCode {
		t.Fatalf("%s: state.Code(%q) = %q, want %q (does the error also wrap another sentinel?)", what, err, got, wantCode)
	}
	if got, wantRetry := state.Retryable(err), state.Retryable(want); got != wantRetry {
		t.Fatalf("%s: state.Retryable(%q) = %t, want %t", what, err, got, wantRetry)
	}
}

// eventually advances the backend's clock in steps until cond holds,
// failing after steps steps or after a wall-clock bound. It returns how many
// steps it took.
func (e *env) eventually(what string, step time.Duration, steps int, cond func() bool) int {
	e.t.Helper()
	deadline := time.Now().Add(time.Duration(steps+1)*step + 2*opTimeout)
	for i := 0; ; i++ {
		if cond() {
			return i
		}
		if i >= steps || time.Now().After(deadline) {
			e.t.Fatalf("%s: still not true after %d steps of %s", what, i, step)
		}
		e.h.Advance(step)
	}
}
