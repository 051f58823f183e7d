// Package membership is the self-registration state machine that both
// runtimes run for their own record: register until the store accepts,
// then heartbeat every interval, one sequence number per attempt, with a
// refusal reason that makes the process unready while the store refuses
// its record.
//
// The varying parts are injected: Write sends one attempt (a coordinator
// writes the store directly, a worker sends Register or Heartbeat to a
// coordinator), Sleep waits (tests pass a fake), Now stamps attempts.
//
// Rules, in one place:
//
//   - Every attempt consumes a sequence number, so a write that timed out
//     but landed is never followed by different content under the same
//     sequence.
//   - Each attempt has its own deadline, RequestTimeout.
//   - A failed write is retried after a jittered backoff (internal/backoff)
//     from RetryInitial up to the interval in effect.
//   - A heartbeat the store answers with not_found (the record expired or
//     was removed) or superseded (another incarnation holds the slot)
//     registers again at once, not an interval later.
//   - A refused registration (the slot holds a process that started later:
//     a duplicate node ID) is retried every interval while refused.
//   - When Adopt is set, the heartbeat interval and lease TTL in each
//     answer replace the process's own setting (a worker follows the
//     cluster's timing whatever it was started with), logged once per
//     change.
//
// Concurrency: a Loop is safe for concurrent use; Run and Beat may run at
// once (Beat is the drain's "tell the cluster now"). Attempts are
// serialised by attemptMu, so sequence numbers are sent in order.
package membership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/talonhq/talon/internal/backoff"
	"github.com/talonhq/talon/internal/tracing"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Outcome is what the store did with one attempt.
type Outcome uint8

// Outcomes.
const (
	// Accepted: the record was written, or the store already held it
	// (a duplicate of a write that landed).
	Accepted Outcome = iota + 1
	// NotFound: a heartbeat for a slot with no record: register again.
	NotFound
	// Superseded: another incarnation holds the slot. For a heartbeat,
	// register again; for a registration, the holder is a later process
	// with the same node ID.
	Superseded
)

// String returns the outcome's lowercase name.
func (o Outcome) String() string {
	switch o {
	case Accepted:
		return "accepted"
	case NotFound:
		return "not_found"
	case Superseded:
		return "superseded"
	}
	return "invalid"
}

// Attempt is one write of the process's own record.
type Attempt struct {
	// Register is true for a registration (the first write, or one after a
	// refusal), false for a heartbeat.
	Register bool
	// Seq is the heartbeat sequence the record carries.
	Seq uint64
}

// Answer is the store's answer to one attempt.
type Answer struct {
	Outcome Outcome
	// HeartbeatInterval and LeaseTTL are the timing the cluster applies,
	// when the answer carries it (a worker's Ack); zero when not.
	HeartbeatInterval time.Duration
	LeaseTTL          time.Duration
	// Holder names the incarnation that holds the slot when the store
	// refused the attempt, if known.
	Holder string
}

// Write sends one attempt and returns the store's answer. An error means
// the store did not decide (unreachable, timed out, shedding load).
type Write func(ctx context.Context, a Attempt) (Answer, error)

// Report is one attempt and what came of it, for the runtime's hooks.
type Report struct {
	Attempt Attempt
	Answer  Answer
	Err     error
	// Started is when the attempt was sent (Options.Now).
	Started  time.Time
	Duration time.Duration
	// Status is the loop's status after the attempt.
	Status Status
}

// Options configures a Loop.
type Options struct {
	// Role and NodeID name the process in logs and refusal reasons.
	Role   string
	NodeID string
	// Incarnation names this process's incarnation in refusal reasons.
	Incarnation string
	Write       Write
	// Interval is the process's own heartbeat interval.
	Interval       time.Duration
	RequestTimeout time.Duration
	// RetryInitial is the first wait after a failed write; zero means
	// DefaultRetryInitial. Retries grow to the interval in effect.
	RetryInitial time.Duration
	// Adopt makes the loop follow the interval and lease TTL in answers.
	Adopt  bool
	Logger *slog.Logger
	Now    func() time.Time
	// Sleep waits d or until ctx ends (returning ctx's error); nil means
	// backoff.Sleep.
	Sleep func(ctx context.Context, d time.Duration) error
	// OnAttempt, when set, is called after every attempt, outside any
	// lock, in attempt order.
	OnAttempt func(Report)
	// Tracer, when set, traces each attempt as a "register" or
	// "heartbeat" span; nil means no spans.
	Tracer trace.Tracer
}

// DefaultRetryInitial is the first retry after a failed write: a store that
// sheds load or times out is tried again soon, not an interval later.
const DefaultRetryInitial = 100 * time.Millisecond

// Status is what the loop knows of the process's own record.
type Status struct {
	// Registered: the store accepted this incarnation's record and has
	// not refused a write of it since.
	Registered bool
	// Refusal says why the store refuses the record; "" when it does not.
	Refusal string
	// Err is the last write error; nil after an answer.
	Err error
	// Interval and LeaseTTL are the timing in effect: the cluster's when
	// adopted, the process's own otherwise (LeaseTTL zero until known).
	Interval time.Duration
	LeaseTTL time.Duration
	// LastAccepted is when the last accepted attempt was sent; zero before.
	LastAccepted time.Time
}

// Loop is the registration and heartbeat loop of one process.
type Loop struct {
	opts     Options
	log      *slog.Logger
	failures int // consecutive failed writes; used by Run only

	attemptMu sync.Mutex // serialises attempts; held across Write
	seq       uint64     // guarded by attemptMu: next sequence number
	register  bool       // guarded by attemptMu: the next attempt registers

	mu     sync.Mutex // guards status; never held across Write
	status Status
}

// New returns a loop; it sends nothing until Run or Beat.
func New(opts Options) (*Loop, error) {
	switch {
	case opts.Write == nil || opts.Logger == nil || opts.Now == nil:
		return nil, errors.New("membership: Write, Logger and Now are required")
	case opts.Interval <= 0:
		return nil, fmt.Errorf("membership: heartbeat interval %s must be positive", opts.Interval)
	case opts.RequestTimeout <= 0:
		return nil, fmt.Errorf("membership: request timeout %s must be positive", opts.RequestTimeout)
	}
	if opts.Sleep == nil {
		opts.Sleep = backoff.Sleep
	}
	if opts.RetryInitial <= 0 {
		opts.RetryInitial = DefaultRetryInitial
	}
	if opts.Tracer == nil {
		opts.Tracer = tracing.Tracer(nil, "membership")
	}
	l := &Loop{opts: opts, log: opts.Logger, register: true}
	l.status.Interval = opts.Interval
	return l, nil
}

// Status returns what the loop knows now.
func (l *Loop) Status() Status {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.status
}

// Run registers, then heartbeats, until ctx ends.
func (l *Loop) Run(ctx context.Context) {
	for {
		wait := l.step(ctx)
		if ctx.Err() != nil || l.opts.Sleep(ctx, wait) != nil {
			return
		}
	}
}

// Beat sends one attempt now and reports whether the store accepted it.
func (l *Loop) Beat(ctx context.Context) bool {
	ok, _ := l.attempt(ctx)
	return ok
}

// step runs one attempt and returns the wait before the next.
func (l *Loop) step(ctx context.Context) time.Duration {
	ok, again := l.attempt(ctx)
	st := l.Status()
	if st.Err == nil {
		l.failures = 0
	}
	switch {
	case ok:
		return st.Interval
	case again:
		return 0
	case st.Err != nil:
		l.failures++
		p := backoff.Policy{Initial: min(l.opts.RetryInitial, st.Interval), Max: st.Interval, Jitter: 0.5}
		return p.Delay(l.failures, rand.Float64())
	default: // a refused registration: try again at the heartbeat rate
		return st.Interval
	}
}

// attempt sends one write. ok reports acceptance; again asks for an
// immediate registration (a heartbeat found the slot gone or taken).
func (l *Loop) attempt(ctx context.Context) (ok, again bool) {
	l.attemptMu.Lock()
	a := Attempt{Register: l.register, Seq: l.seq}
	l.seq++
	start := l.opts.Now()
	wctx, cancel := context.WithTimeout(ctx, l.opts.RequestTimeout)
	wctx, span := l.startSpan(wctx, a)
	ans, err := l.opts.Write(wctx, a)
	endSpan(span, ans, err)
	cancel()
	rep := Report{Attempt: a, Answer: ans, Err: err, Started: start, Duration: l.opts.Now().Sub(start)}
	switch {
	case err != nil:
	case ans.Outcome == Accepted:
		l.register = false
	default:
		l.register = true
		again = !a.Register
	}
	rep.Status = l.apply(wctx, rep) // logs carry the attempt span's IDs
	l.attemptMu.Unlock()
	if l.opts.OnAttempt != nil {
		l.opts.OnAttempt(rep)
	}
	return err == nil && ans.Outcome == Accepted, again
}

// startSpan starts attempt a's span.
func (l *Loop) startSpan(ctx context.Context, a Attempt) (context.Context, trace.Span) {
	name := "heartbeat"
	if a.Register {
		name = "register"
	}
	return l.opts.Tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("talon.node.role", l.opts.Role), attribute.String("talon.node.id", l.opts.NodeID),
		attribute.Int64("talon.node.heartbeat_seq", int64(a.Seq))))
}

// endSpan ends an attempt's span with its outcome.
func endSpan(span trace.Span, ans Answer, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	} else {
		span.SetAttributes(attribute.String("talon.membership.outcome", ans.Outcome.String()))
	}
	span.End()
}

// apply updates the status from one attempt, logging changes, and
// returns the new status.
func (l *Loop) apply(ctx context.Context, r Report) Status {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.applyLocked(ctx, r)
	return l.status
}

func (l *Loop) applyLocked(ctx context.Context, r Report) {
	st := &l.status
	if r.Err != nil {
		if st.Err == nil && ctxAlive(r.Err) {
			l.log.WarnContext(ctx, "own record write failed; retrying", "role", l.opts.Role, "register", r.Attempt.Register, "error", r.Err)
		}
		st.Err = r.Err
		return
	}
	recovered := st.Err != nil
	st.Err = nil
	if r.Answer.Outcome == Accepted {
		if !st.Registered {
			l.log.InfoContext(ctx, "own record accepted", "role", l.opts.Role, "node", l.opts.NodeID, "register", r.Attempt.Register)
		} else if recovered {
			l.log.InfoContext(ctx, "own record writes accepted again", "role", l.opts.Role)
		}
		if st.Refusal != "" {
			l.log.InfoContext(ctx, "the store accepts this process's record again", "role", l.opts.Role)
		}
		st.Registered, st.Refusal, st.LastAccepted = true, "", r.Started
		l.adoptLocked(r.Answer)
		return
	}
	reason := l.reason(r)
	if reason != st.Refusal {
		l.log.ErrorContext(ctx, "the store refuses this process's record; not ready", "role", l.opts.Role, "node", l.opts.NodeID,
			"register", r.Attempt.Register, "outcome", r.Answer.Outcome.String(), "reason", reason)
	}
	st.Registered, st.Refusal = false, reason
}

// reason explains a refusal.
func (l *Loop) reason(r Report) string {
	switch {
	case r.Answer.Outcome == NotFound:
		return "the record is gone from the store; registering again"
	case !r.Attempt.Register:
		return fmt.Sprintf("another incarnation holds node %q; registering again", l.opts.NodeID)
	}
	holder := ""
	if r.Answer.Holder != "" {
		holder = " (incarnation " + r.Answer.Holder + ")"
	}
	return fmt.Sprintf("duplicate node ID: node %q is held by a process that started after this one%s; this process (incarnation %s) is not serving",
		l.opts.NodeID, holder, l.opts.Incarnation)
}

// adoptLocked takes the cluster's timing from an answer, when Adopt is set.
func (l *Loop) adoptLocked(a Answer) {
	st := &l.status
	if a.LeaseTTL > 0 {
		st.LeaseTTL = a.LeaseTTL
	}
	if !l.opts.Adopt || a.HeartbeatInterval <= 0 || a.HeartbeatInterval == st.Interval {
		return
	}
	l.log.Info("heartbeat interval set by the cluster", "role", l.opts.Role, "interval", a.HeartbeatInterval,
		"configured", l.opts.Interval, "was", st.Interval, "lease_ttl", a.LeaseTTL)
	st.Interval = a.HeartbeatInterval
}

func ctxAlive(err error) bool { return !errors.Is(err, context.Canceled) }
