package coordinator

import (
	"fmt"
	"sync"
	"time"

	"github.com/talonhq/talon/internal/cluster"
)

// tracker is the coordinator's knowledge of its view: the last good view,
// which read was applied last, whether the store answers, and the recovery
// hold. It has its own lock and does no I/O.
//
// Recovery (fail closed through recovery, recovery.go): after a failed
// snapshot read, or a gap between two successful reads longer than maxGap
// (the coordinator itself was stalled, or its reads were) or a span
// between them that a live record's silence could have grown late in
// (tolerances.interrupted), the first good read ends the interruption.
// When it was too short for any record of a live process to lapse
// (planRecovery), the coordinator answers from that read at once.
// Otherwise it holds itself unready until a read that started at least
// hold after the recovery began has been applied and,
// when its own record could have expired, the store accepted a write of
// that record that started after the recovery began. Workers whose
// records turned late or expired during the outage heartbeat or
// re-register within that hold, so the first answer after it names them;
// and readiness goes from unready straight to ready, never through a
// refusal it had not yet noticed.
type tracker struct {
	hold   time.Duration // Options.RecoveryHold
	maxGap time.Duration
	tol    tolerances

	mu          sync.Mutex // guards the fields below
	lastGood    *View
	lastReadAt  time.Time // start of the last applied successful read
	appliedRead uint64    // sequence of the latest-started read whose outcome was applied
	goodRead    uint64    // sequence of lastGood's read
	lastErr     error
	storeOK     bool
	synced      bool // a view has been read at least once
	// recovering is set from the first failure or gap until the
	// recovery ends; recoverySince is when the coordinator began
	// recovering (the first good read after the outage or gap), zero
	// while the store does not answer; plan is what the recovery in
	// progress waits for (zero when none, or not yet decided).
	recovering    bool
	recoverySince time.Time
	plan          recoveryPlan
	selfAccepted  time.Time // start of the last accepted write of the own record
	// newSinceView holds the nodes this coordinator registered since
	// lastGood was read, so max-records counts them before a view does.
	// Each maps to the number of snapshot reads started when it was
	// noted: a read started after that includes it.
	newSinceView map[cluster.Key]uint64
}

func newTracker(hold, maxGap time.Duration, tol tolerances) *tracker {
	return &tracker{hold: hold, maxGap: maxGap, tol: tol, newSinceView: map[cluster.Key]uint64{}}
}

// applied is what applying a good read changed.
type applied struct {
	ok        bool // the read was applied (no later-started read was first)
	first     bool // the first view ever
	recovered bool // the store answers again after failing
	gap       bool // the reads before this one stopped for longer than maxGap
	// outage is the interruption this read ended (recovered or gap):
	// from the start of the last good read before it to this read's end;
	// plan is the recovery decided for it.
	outage time.Duration
	plan   recoveryPlan
	prev   *View
}

// good applies the successful read seq that started at start, ended at
// end and built v.
func (t *tracker) good(seq uint64, start, end time.Time, v *View) applied {
	t.mu.Lock()
	defer t.mu.Unlock()
	if seq < t.appliedRead {
		return applied{}
	}
	a := applied{ok: true, first: !t.synced, recovered: t.synced && !t.storeOK, prev: t.lastGood}
	a.gap = t.synced && t.storeOK && !t.lastReadAt.IsZero() && t.tol.interrupted(t.lastReadAt, start, end, t.maxGap)
	if a.recovered || a.gap {
		// Recovery begins now: nothing observed before counts. It holds
		// only when the interruption could have cost a live record.
		a.outage = end.Sub(t.lastReadAt)
		t.plan = planRecovery(a.outage, t.tol, t.plan)
		a.plan = t.plan
		t.recovering, t.recoverySince = t.plan.hold, start
	}
	t.appliedRead, t.goodRead = seq, seq
	t.lastGood, t.lastErr, t.storeOK, t.synced, t.lastReadAt = v, nil, true, true, start
	for k, started := range t.newSinceView {
		if started < seq { // read seq began after k was registered
			delete(t.newSinceView, k)
		}
	}
	t.maybeEndRecoveryLocked(start)
	return a
}

// failed applies the failed read seq; it reports whether the failure was
// applied and whether the store had answered until now.
func (t *tracker) failed(seq uint64, err error) (ok, wasOK bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if seq < t.appliedRead {
		return false, false
	}
	t.appliedRead = seq
	wasOK = t.storeOK
	t.storeOK, t.lastErr = false, err
	if t.synced {
		t.recovering, t.recoverySince = true, time.Time{}
	}
	return true, wasOK
}

// newest returns the view a read that finished out of order answers with:
// the view of the read applied last, which started later and so also
// began after the read's callers asked. It is nil when that read failed.
func (t *tracker) newest() *View {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.storeOK || t.goodRead != t.appliedRead {
		return nil
	}
	return t.lastGood
}

// selfWritten notes an accepted write of the own record that started at start.
func (t *tracker) selfWritten(start time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if start.After(t.selfAccepted) {
		t.selfAccepted = start
	}
}

// maybeEndRecoveryLocked ends the recovery hold once a read that started
// at now has seen hold of observation and, when the plan says so, the own
// record was accepted since recovery began. mu must be held.
func (t *tracker) maybeEndRecoveryLocked(now time.Time) {
	if !t.recovering || t.recoverySince.IsZero() || !t.storeOK {
		return
	}
	if now.Sub(t.recoverySince) >= t.hold && (!t.plan.awaitSelf || t.selfAccepted.After(t.recoverySince)) {
		t.recovering, t.plan = false, recoveryPlan{}
	}
}

// recoveryReason returns why the coordinator holds itself unready after
// an outage or stall, or "" when it does not.
func (t *tracker) recoveryReason(now time.Time) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.recoveryReasonLocked(now)
}

func (t *tracker) recoveryReasonLocked(now time.Time) string {
	switch {
	case !t.recovering:
		return ""
	case t.recoverySince.IsZero():
		return "recovering: the store is not answering"
	case t.plan.awaitSelf && !t.selfAccepted.After(t.recoverySince):
		return "recovering: waiting for the store to accept this coordinator's own record again"
	}
	left := max(t.hold-now.Sub(t.recoverySince), 0)
	return fmt.Sprintf("recovering: observing the cluster for %s more before answering (re-registering workers come back)", left.Round(time.Millisecond))
}

// unconfirmed reports how long ago the last applied successful read
// started, when that is longer than limit while the store counts as
// answering: reads have been hanging (a store that lost quorum answers
// nothing until the request timeout), so the view is no longer known to
// be current.
func (t *tracker) unconfirmed(now time.Time, limit time.Duration) (time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.synced || !t.storeOK || t.lastReadAt.IsZero() {
		return 0, false
	}
	age := now.Sub(t.lastReadAt)
	return age, age > limit
}

// isRecovering reports whether the recovery hold is on.
func (t *tracker) isRecovering() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.recovering
}

// viewState is what readiness and diagnostics read of the tracker.
type viewState struct {
	lastGood *View
	lastErr  error
	storeOK  bool
	synced   bool
}

// state returns the fields readiness and diagnostics read.
func (t *tracker) state() viewState {
	t.mu.Lock()
	defer t.mu.Unlock()
	return viewState{lastGood: t.lastGood, lastErr: t.lastErr, storeOK: t.storeOK, synced: t.synced}
}

// clusterFull reports whether registering key would take the cluster past
// max records: the current view and the registrations this coordinator
// accepted since hold at least that many records, none in key's slot.
// With several coordinators the cap can be passed by what the others
// registered within one refresh interval.
func (t *tracker) clusterFull(key, own cluster.Key, maxRecords int) (full bool, records int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	v := t.lastGood
	if v == nil {
		return false, 0
	}
	n := len(v.Snapshot.Records) + len(t.newSinceView)
	if v.Snapshot.Find(own) == nil {
		n++ // this coordinator's own record, written but not yet seen
	}
	if n < maxRecords {
		return false, n
	}
	_, pending := t.newSinceView[key]
	return !pending && v.Snapshot.Find(key) == nil, n
}

// noteRegistered counts a node this coordinator registered until a view
// read that began after started holds it (see clusterFull).
func (t *tracker) noteRegistered(key cluster.Key, started uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if v := t.lastGood; v != nil && v.Snapshot.Find(key) != nil {
		return
	}
	t.newSinceView[key] = started
}
