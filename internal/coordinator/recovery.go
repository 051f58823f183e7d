package coordinator

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

// Recovery after an interruption (ADR 0001 section 3, amendment rule 4:
// "a blip costs no more than itself"; issue 46).
//
// An interruption is a span in which this coordinator applied no good
// read: a store outage (its reads failed), its own stall (a gap between
// the starts of two reads longer than maxReadGap), or a store that
// answered nothing for a while although no read failed (the span from the
// start of one good read to the end of the next reached the late
// tolerance, below). Its length, outage, is measured on this
// coordinator's monotonic clock from the start of the last good read
// before it to the end of the first good read after it. The store
// answered the read before after that read started, so anything this
// coordinator could not see began after that start; it answered the read
// after by its end. The end and not the start of the read after: a paused
// store answers the reads queued in it when it resumes, so that read may
// have started up to a request timeout before the store came back. A
// stall of this process lies inside outage too: the monotonic clock runs
// while the process is stopped.
//
// What an interruption can do to a live process's record. A process that
// kept heartbeating through it went without an accepted heartbeat for at
// most:
//
//   - one heartbeat interval before it: the process sends its next
//     heartbeat one interval after each answer (package membership), and
//     one sent while the store still answered was accepted;
//   - the interruption itself, at most outage;
//   - one heartbeat interval after it: a failed heartbeat is retried after
//     a backoff capped at the interval in effect (package membership), and
//     a worker's call tries every coordinator, a coordinator without a
//     current view refusing at once, so its first attempt after this
//     coordinator's view is current again lands;
//   - one request timeout for the round trips of the heartbeats on either
//     side (each one's whole deadline is at most a request timeout; a
//     store that answers takes milliseconds).
//
// So a store that judged silence by its own clock could expire the record
// of a live process only after an interruption of at least the expiry
// tolerance, lease-ttl - 2 x heartbeat-interval - request-timeout (18 s at
// the defaults), and mark it late only after one of at least the late
// tolerance, unhealthy-after - 2 x heartbeat-interval - request-timeout
// (3 s). But no store marks a record late by its clock. Only a
// coordinator proposes a late mark (evidence.go), and only after it
// observed the record's version unchanged for unhealthy-after of its own
// continuous observation; the store applies it as a compare-and-swap on
// that version, and etcd only when its lease also went unrenewed for as
// long by etcd's clock (state.MinSilence). Observation starts over with
// the first good read after every interruption the coordinator notices
// (noteRecovery, and at once on a failed read). So after an interruption
// that ended when the store came back at T:
//
//   - a coordinator that noticed it proposes no late mark before its first
//     good read after T plus unhealthy-after: that read started no earlier
//     than T - request-timeout, so not before T + unhealthy-after -
//     request-timeout. Every live process renews its record before then:
//     every coordinator's view is current again within a refresh period
//     and a minimum gap of T (loops.go), the process's next attempt starts
//     within an interval and an attempt's deadline of that, and lands
//     within another request timeout. So its late proposal loses, to the
//     compare-and-swap where a renewal is a new version (Kubernetes, a
//     full write) and to MinSilence where it is not (etcd's keepalive, the
//     memory store's renewal), whenever unhealthy-after >
//     heartbeat-interval + 3 x request-timeout + the read spacing;
//   - every coordinator notices an interruption at least the late
//     tolerance long, whether or not one of its reads failed in it: the
//     span between two of its good reads then reaches the late
//     tolerance, which is itself an interruption (tracker.good). This
//     needs the late tolerance to exceed what a store that answers leaves
//     between two good reads (a request timeout for the later one, plus
//     the read spacing), or a slow store would restart observation all
//     the time. A shorter interruption that a coordinator did not notice
//     cannot make a live record late: the process's silence stays below
//     unhealthy-after.
//
// Where both conditions hold (at the defaults: 15 s > 11.9 s and 3 s >
// 2.9 s), no live process's record is late because of an interruption
// shorter than the expiry tolerance, nor turns so before the process's
// next heartbeat: the first good read after it is answered from at once,
// with no hold and no wait for the own record, so the coordinator was
// unready for no longer than the interruption (and a read's timeout when
// a read hung as it began). What the interruption costs instead is
// detection: a process that died just before it is marked late up to
// unhealthy-after after the store came back, not after it died.
//
// Where they do not (timings close to the rule's minimum, unhealthy-after
// >= 2 x heartbeat-interval + request-timeout), a coordinator may observe
// across an interruption that made a live record late, or propose too
// early after one; every interruption from the late tolerance on then
// holds, as before issue 46, so that live workers heartbeat and clear
// such a mark before this coordinator answers again. At the least timing
// the rule allows, the late tolerance is zero and every interruption
// holds.
//
// A hold (Options.RecoveryHold) keeps the coordinator unready while
// workers heartbeat or re-register, and answers only then. It follows
// every interruption of at least the expiry tolerance: on etcd and the
// memory store a live process's record may be gone (the store's own
// lease), and a worker re-registers at once when its heartbeat is refused
// as not_found. The coordinator also waits for the store to accept its
// own record again then: a heartbeat of a deleted record is refused,
// which would turn a coordinator that had just become ready unready
// again. An interruption during a hold restarts the hold, whatever its
// length.
//
// A stall of this process is the same case: the store answered
// throughout, so a worker that heartbeats through another coordinator
// lost nothing, and this coordinator, stopped, proposed nothing, and
// starts observing over when it resumes. (A worker that could reach only
// this one was silent for the stall plus the same margins: the others may
// mark it late, as they would had this coordinator died; the mark is the
// store's, every coordinator answers it alike, and the worker's next
// heartbeat through this one clears it.) Its view after the stall is
// never the old one: until a read that started after the stall succeeds,
// the view is unconfirmed (fetch.go) and lookups answer not_ready.

// tolerances are the longest interruptions after which no record of a
// process that kept heartbeating can have turned late, or expired, and
// whether every late mark an interruption could cause is excluded as
// described above.
type tolerances struct {
	late    time.Duration
	expired time.Duration
	// noticed: every coordinator notices an interruption of at least
	// late (a span between two good reads that long is one) and
	// proposes nothing after one before live processes renew. Then only
	// expiry needs a hold.
	noticed bool
}

// newTolerances computes the tolerances of a timing and request timeout.
func newTolerances(t cluster.Timing, requestTimeout time.Duration) tolerances {
	tol := tolerances{
		late:    outageTolerance(t.UnhealthyAfter, t.HeartbeatInterval, requestTimeout),
		expired: outageTolerance(t.LeaseTTL, t.HeartbeatInterval, requestTimeout),
	}
	spacing := readSpacing(Options{Timing: t, RequestTimeout: requestTimeout})
	// A store that answers leaves at most a request timeout and the read
	// spacing between two good reads; a live process renews within an
	// interval, the spacing and two request timeouts of the store's
	// return, and a coordinator's observation restarts up to a request
	// timeout before it.
	tol.noticed = tol.late > requestTimeout+spacing &&
		t.UnhealthyAfter > t.HeartbeatInterval+3*requestTimeout+spacing
	return tol
}

// outageTolerance is window - 2 x interval - requestTimeout, or zero when
// that is not positive (see the reasoning above).
func outageTolerance(window, interval, requestTimeout time.Duration) time.Duration {
	return max(window-2*interval-requestTimeout, 0)
}

// blip is the longest interruption answered at once: the expiry
// tolerance when every late mark it could cause is excluded, the late
// tolerance otherwise.
func (tol tolerances) blip() time.Duration {
	if tol.noticed {
		return tol.expired
	}
	return tol.late
}

// interrupted reports whether a good read that started at start and ended
// at end ends an interruption, the last good read having started at last
// and none failed since: a gap between the starts longer than maxGap (this
// coordinator's reads stopped), or, where the tolerances rely on it, a
// span from last to end of at least the late tolerance (the store may
// have answered nothing for that long, and a live process's silence may
// have reached unhealthy-after in it).
func (tol tolerances) interrupted(last, start, end time.Time, maxGap time.Duration) bool {
	return start.Sub(last) > maxGap || (tol.noticed && end.Sub(last) >= tol.late)
}

// BlipTolerance returns the longest store outage (or stall of a
// coordinator) after which a coordinator answers again as soon as it reads
// the store, without the recovery hold: lease-ttl - 2 x heartbeat-interval
// - request-timeout (no live record can expire in it, and none is marked
// late for it), or, at timings too close to the rule's minimum for that,
// unhealthy-after - 2 x heartbeat-interval - request-timeout; zero when
// that is not positive. The interruption is measured from the start of
// the coordinator's last good read before it to the end of the first good
// read after it, so it exceeds the outage itself by up to a refresh
// period and the pause between two reads.
func BlipTolerance(t cluster.Timing, requestTimeout time.Duration) time.Duration {
	return newTolerances(t, requestTimeout).blip()
}

// recoveryPlan is what a coordinator waits for, after an interruption,
// before it answers again. The zero plan waits for nothing.
type recoveryPlan struct {
	hold      bool // observe for the recovery hold first
	awaitSelf bool // and until the store accepted the own record again
}

// planRecovery decides the recovery after an interruption of length
// outage. pending is the plan of a recovery still in progress when the
// interruption began (zero when none): it is never shortened, and its
// hold starts over.
func planRecovery(outage time.Duration, tol tolerances, pending recoveryPlan) recoveryPlan {
	awaitSelf := pending.awaitSelf || outage >= tol.expired
	return recoveryPlan{
		hold:      pending.hold || awaitSelf || outage >= tol.blip(),
		awaitSelf: awaitSelf,
	}
}

// noteRecovery acts on the end of an interruption (a.recovered or a.gap):
// observation starts over, the own record is written now (it may have
// expired meanwhile), and the log and the event list say what the
// coordinator waits for before answering again.
func (c *Coordinator) noteRecovery(v *View, a applied) {
	c.evidence.interrupt()
	c.self.kick()
	blip := c.view.tol.blip()
	msg, level := "store answered: observing the cluster before answering again", slog.LevelInfo
	reason := fmt.Sprintf("the store answered after %s, longer than the blip tolerance %s; observing for %s before answering again",
		a.outage.Round(time.Millisecond), blip, c.opts.RecoveryHold)
	switch {
	case a.gap && a.plan.hold:
		msg, level = "no cluster read answered for longer than expected (the store or this process stalled?): observing again before answering", slog.LevelWarn
	case a.gap:
		msg, level = "no cluster read answered for longer than expected (the store or this process stalled?), within the blip tolerance: answering at once, observing afresh", slog.LevelWarn
	case !a.plan.hold:
		msg = "store answered after a blip: answering at once, observing afresh (no live record can have expired in it, nor be marked late for it)"
		reason = fmt.Sprintf("the store answered after %s, within the blip tolerance %s; answering at once", a.outage.Round(time.Millisecond), blip)
	}
	args := []any{"outage", a.outage.Round(time.Millisecond), "blip_tolerance", blip,
		"revision", v.Snapshot.Revision.String(), "placement_version", v.Version().String()}
	if a.plan.hold {
		args = append(args, "hold", c.opts.RecoveryHold, "await_own_record", a.plan.awaitSelf)
	}
	c.log.Log(context.Background(), level, msg, args...)
	if a.recovered {
		c.addEvent(Event{NodeEvent: state.NodeEvent{Type: state.EventStoreRecovered, Revision: v.Snapshot.Revision.String(), Reason: reason}})
	}
}
