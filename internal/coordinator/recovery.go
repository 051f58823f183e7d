package coordinator

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/talonhq/talon/internal/cluster"
)

// Recovery after an interruption (ADR 0001 section 3, amendment rule 4:
// "a blip costs no more than itself").
//
// An interruption is a span in which this coordinator applied no good
// read: a store outage (its reads failed) or its own stall (a gap between
// two reads longer than maxReadGap). Its length, outage, is measured on
// this coordinator's monotonic clock from the start of the last good read
// before it to the end of the first good read after it. The store answered
// the read before after that read started, so anything this coordinator
// could not see began after that start; it answered the read after by its
// end. The end and not the start of the read after: a paused store answers
// the reads queued in it when it resumes, so that read may have started up
// to a request timeout before the store came back. A stall of this
// process lies inside outage too: the monotonic clock runs while the
// process is stopped.
//
// Records turn late and expire by time alone, never by this coordinator's
// judgement of the interruption: either the store marks a record late when
// no heartbeat renewed it for unhealthy-after and deletes it after
// lease-ttl (its leases), or a coordinator proposes either after observing
// the record's version unchanged for as long, which it cannot begin to
// observe before the version was written (one that did not notice the
// interruption keeps its observation across it), and the store applies
// the proposal only if no heartbeat landed first. Either way a record
// turns late no sooner than unhealthy-after after its last accepted
// heartbeat, and expires no sooner than lease-ttl after it. A process
// that kept heartbeating through the interruption went without an
// accepted heartbeat for at most:
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
// So no record of a live process can have turned late when outage is
// shorter than unhealthy-after - 2 x heartbeat-interval - request-timeout,
// nor expired when it is shorter than lease-ttl - 2 x heartbeat-interval -
// request-timeout. The late bound uses unhealthy-after, not lease-ttl: a
// late mark removes a worker from placement as surely as an expiry. The
// tolerance is exactly the slack above the timing rule's minimum
// (unhealthy-after >= 2 x heartbeat-interval + request-timeout, the
// silence of one lost heartbeat with no interruption at all), so at the
// least timing the rule allows it is zero and every interruption holds.
//
// After a shorter interruption the first good read is an answer like any
// other: no live process's record is late or gone because of the
// interruption, nor will turn so before its next heartbeat, so the
// coordinator answers from it at once. It was unready from noticing the
// interruption (a failed read, or no read confirmed for a request
// timeout) to that read's end: never longer than outage.
//
// After a longer one, a live worker's record may be late or gone, or turn
// so before the worker's next heartbeat lands, so the coordinator holds
// itself unready for the recovery hold (Options.RecoveryHold) while
// workers heartbeat or re-register, and answers only then. It waits for
// the store to accept its own record again only when that record could
// have expired: a heartbeat of a deleted record is refused, which would
// turn a coordinator that had just become ready unready again; a late own
// record is cleared by its next heartbeat and refuses nothing. An
// interruption during a hold restarts the hold, whatever its length.
//
// A stall of this process is the same case: the store answered
// throughout, so a worker that heartbeats through another coordinator
// lost nothing, and one that could reach only this one was silent for the
// stall plus the same margins. Its view after the stall is never the old
// one: until a read that started after the stall succeeds, the view is
// unconfirmed (fetch.go) and lookups answer not_ready.

// tolerances are the longest interruptions after which no record of a
// process that kept heartbeating can have turned late, or expired.
type tolerances struct {
	late    time.Duration
	expired time.Duration
}

// newTolerances computes the tolerances of a timing.
func newTolerances(t cluster.Timing, requestTimeout time.Duration) tolerances {
	return tolerances{
		late:    outageTolerance(t.UnhealthyAfter, t.HeartbeatInterval, requestTimeout),
		expired: outageTolerance(t.LeaseTTL, t.HeartbeatInterval, requestTimeout),
	}
}

// outageTolerance is window - 2 x interval - requestTimeout, or zero when
// that is not positive (see the reasoning above).
func outageTolerance(window, interval, requestTimeout time.Duration) time.Duration {
	return max(window-2*interval-requestTimeout, 0)
}

// BlipTolerance returns the longest store outage (or stall of a
// coordinator) after which a coordinator answers again as soon as it reads
// the store, without the recovery hold: unhealthy-after - 2 x
// heartbeat-interval - request-timeout, zero when that is not positive.
// No record of a process that kept heartbeating can turn late or expire
// for an interruption that short. The interruption is measured from the
// start of the coordinator's last good read before it to the end of the
// first good read after it, so it exceeds the outage itself by up to a
// refresh period and the pause between two reads.
func BlipTolerance(t cluster.Timing, requestTimeout time.Duration) time.Duration {
	return newTolerances(t, requestTimeout).late
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
		hold:      pending.hold || awaitSelf || outage >= tol.late,
		awaitSelf: awaitSelf,
	}
}

// noteRecovery acts on the end of an interruption (a.recovered or a.gap):
// observation starts over, the own record is written now (it may have
// expired meanwhile), and the log and the event list say what the
// coordinator waits for before answering again.
func (c *Coordinator) noteRecovery(v *View, a applied) {
	c.evidence.interrupt()
	c.kickSelf()
	msg, level := "store answered: observing the cluster before answering again", slog.LevelInfo
	reason := fmt.Sprintf("the store answered after %s, longer than the blip tolerance %s; observing for %s before answering again",
		a.outage.Round(time.Millisecond), c.view.tol.late, c.opts.RecoveryHold)
	switch {
	case a.gap && a.plan.hold:
		msg, level = "no cluster read for longer than expected (this process stalled?): observing again before answering", slog.LevelWarn
	case a.gap:
		msg, level = "no cluster read for longer than expected (this process stalled?), within the blip tolerance: answering at once", slog.LevelWarn
	case !a.plan.hold:
		msg = "store answered after a blip: answering at once (no record can have turned late in it)"
		reason = fmt.Sprintf("the store answered after %s, within the blip tolerance %s; answering at once", a.outage.Round(time.Millisecond), c.view.tol.late)
	}
	args := []any{"outage", a.outage.Round(time.Millisecond), "blip_tolerance", c.view.tol.late,
		"revision", v.Snapshot.Revision.String(), "placement_version", v.Version().String()}
	if a.plan.hold {
		args = append(args, "hold", c.opts.RecoveryHold, "await_own_record", a.plan.awaitSelf)
	}
	c.log.Log(context.Background(), level, msg, args...)
	if a.recovered {
		c.addEvent(Event{Type: EventStoreRecovered, Revision: v.Snapshot.Revision.String(), Reason: reason})
	}
}
