package membership_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/membership"
	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/state/memory"
	"github.com/talonhq/talon/internal/testsupport"
)

// script answers attempts from a list and records them; the loop's waits
// are recorded by sleeper, which ends the run after the script.
type script struct {
	mu       sync.Mutex
	answers  []func(ctx context.Context) (membership.Answer, error)
	attempts []membership.Attempt
	waits    []time.Duration
	cancel   context.CancelFunc
}

func (s *script) write(ctx context.Context, a membership.Attempt) (membership.Answer, error) {
	s.mu.Lock()
	s.attempts = append(s.attempts, a)
	n := len(s.attempts)
	s.mu.Unlock()
	return s.answers[n-1](ctx)
}

// sleep records the wait and ends the run once every answer was used.
func (s *script) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.waits = append(s.waits, d)
	done := len(s.attempts) == len(s.answers)
	s.mu.Unlock()
	if done {
		s.cancel()
	}
	return ctx.Err()
}

func answer(o membership.Outcome) func(context.Context) (membership.Answer, error) {
	return func(context.Context) (membership.Answer, error) { return membership.Answer{Outcome: o}, nil }
}

func fail(err error) func(context.Context) (membership.Answer, error) {
	return func(context.Context) (membership.Answer, error) { return membership.Answer{}, err }
}

func run(t *testing.T, opts membership.Options, answers ...func(context.Context) (membership.Answer, error)) (*script, *membership.Loop) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s := &script{answers: answers, cancel: cancel}
	opts.Write, opts.Sleep = s.write, s.sleep
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	opts.Now = time.Now
	if opts.Interval == 0 {
		opts.Interval = 5 * time.Second
	}
	if opts.RequestTimeout == 0 {
		opts.RequestTimeout = time.Second
	}
	opts.Role, opts.NodeID, opts.Incarnation = "worker", "w1", "inc-1"
	l, err := membership.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	l.Run(ctx)
	return s, l
}

func TestRegistersThenHeartbeatsOneSequencePerAttempt(t *testing.T) {
	s, l := run(t, membership.Options{}, answer(membership.Accepted), answer(membership.Accepted), answer(membership.Accepted))
	want := []membership.Attempt{{Register: true, Seq: 0}, {Seq: 1}, {Seq: 2}}
	if fmt.Sprint(s.attempts) != fmt.Sprint(want) {
		t.Fatalf("attempts %v, want %v", s.attempts, want)
	}
	for i, w := range s.waits[:3] {
		if w != 5*time.Second {
			t.Fatalf("wait %d = %s, want the interval", i, w)
		}
	}
	if st := l.Status(); !st.Registered || st.Refusal != "" {
		t.Fatalf("status %+v, want registered", st)
	}
}

func TestFailedWritesBackOffWithinTheIntervalAndKeepTheSequence(t *testing.T) {
	boom := fmt.Errorf("shed: %w", state.ErrUnavailable)
	s, l := run(t, membership.Options{Interval: time.Second},
		answer(membership.Accepted), fail(boom), fail(boom), fail(boom), fail(boom), fail(boom), answer(membership.Accepted))
	// After the registration: five failures, then a success.
	for i, w := range s.waits[1:6] {
		lo := time.Duration(float64(min(100*time.Millisecond<<i, time.Second)) * 0.5)
		if w < lo || w > time.Second {
			t.Fatalf("retry %d waited %s, want within [%s, 1s]", i+1, w, lo)
		}
	}
	if s.waits[6] != time.Second {
		t.Fatalf("wait after recovery %s, want the interval", s.waits[6])
	}
	for i, a := range s.attempts {
		if a.Seq != uint64(i) || a.Register != (i == 0) {
			t.Fatalf("attempt %d = %+v: a failed heartbeat must consume its sequence and stay a heartbeat", i, a)
		}
	}
	if st := l.Status(); st.Err != nil {
		t.Fatalf("error %v kept after success", st.Err)
	}
}

func TestGoneOrTakenSlotRegistersAtOnce(t *testing.T) {
	for _, o := range []membership.Outcome{membership.NotFound, membership.Superseded} {
		t.Run(o.String(), func(t *testing.T) {
			s, _ := run(t, membership.Options{}, answer(membership.Accepted), answer(o), answer(membership.Accepted))
			if !s.attempts[2].Register || s.attempts[1].Register {
				t.Fatalf("attempts %v: the refused heartbeat must be followed by a registration", s.attempts)
			}
			if s.waits[1] != 0 {
				t.Fatalf("waited %s before registering again, want 0", s.waits[1])
			}
		})
	}
}

func TestRefusedRegistrationIsUnreadyWithReasonUntilAccepted(t *testing.T) {
	var seen []membership.Status
	s, _ := run(t, membership.Options{OnAttempt: func(r membership.Report) { seen = append(seen, r.Status) }},
		answer(membership.Accepted), answer(membership.Superseded),
		func(context.Context) (membership.Answer, error) {
			return membership.Answer{Outcome: membership.Superseded, Holder: "inc-2"}, nil
		},
		answer(membership.Accepted))
	if len(seen) != 4 {
		t.Fatalf("%d attempts reported, want 4", len(seen))
	}
	refused := seen[2]
	if refused.Registered || !strings.Contains(refused.Refusal, "duplicate node ID") || !strings.Contains(refused.Refusal, "inc-2") {
		t.Fatalf("status after a refused registration %+v", refused)
	}
	if s.waits[2] != 5*time.Second {
		t.Fatalf("retry of a refused registration after %s, want the interval", s.waits[2])
	}
	if !s.attempts[3].Register || !seen[3].Registered || seen[3].Refusal != "" {
		t.Fatalf("after acceptance: attempt %+v status %+v", s.attempts[3], seen[3])
	}
}

func TestAdoptsTheClustersTiming(t *testing.T) {
	ack := func(context.Context) (membership.Answer, error) {
		return membership.Answer{Outcome: membership.Accepted, HeartbeatInterval: time.Second, LeaseTTL: 8 * time.Second}, nil
	}
	t.Run("adopt", func(t *testing.T) {
		s, l := run(t, membership.Options{Adopt: true}, ack, ack)
		if st := l.Status(); st.Interval != time.Second || st.LeaseTTL != 8*time.Second {
			t.Fatalf("status %+v, want the cluster's 1s / 8s", st)
		}
		if s.waits[0] != time.Second || s.waits[1] != time.Second {
			t.Fatalf("waits %v, want the adopted interval", s.waits)
		}
	})
	t.Run("own", func(t *testing.T) {
		s, l := run(t, membership.Options{}, ack)
		if st := l.Status(); st.Interval != 5*time.Second || s.waits[0] != 5*time.Second {
			t.Fatalf("status %+v waits %v: without Adopt the own interval stays", st, s.waits)
		}
	})
}

func TestEachAttemptHasItsOwnDeadline(t *testing.T) {
	hang := func(ctx context.Context) (membership.Answer, error) {
		<-ctx.Done()
		return membership.Answer{}, ctx.Err()
	}
	start := time.Now()
	_, l := run(t, membership.Options{RequestTimeout: 50 * time.Millisecond}, hang, hang)
	if !errors.Is(l.Status().Err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want the attempt's deadline", l.Status().Err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("two hung attempts took %s", d)
	}
}

// TestCrashLoopLastIncarnationHolds restarts one node 20 times against a
// real memory store, then lands every earlier incarnation's registration
// late (delayed in a coordinator): the last process holds the slot at the
// end and its loop stays accepted. Before the start-time rule, the fifth
// delayed registration took the slot from the live process for a whole
// lease TTL.
func TestCrashLoopLastIncarnationHolds(t *testing.T) {
	clock := testsupport.NewFakeClock(time.UnixMilli(1_800_000_000_000))
	store := memory.New(memory.Options{Clock: clock.Now})
	t.Cleanup(func() { _ = store.Close() })
	ctx := context.Background()
	const restarts = 20
	recs := make([]*cluster.Record, restarts)
	for i := range recs {
		clock.Advance(40 * time.Millisecond) // 20 restarts within one second
		recs[i] = &cluster.Record{ClusterID: "c", NodeID: "w1", Role: cluster.RoleWorker, IncarnationID: cluster.NewIncarnationID(),
			Address: "127.0.0.1:7500", Version: "test", StartTimeUnixMs: clock.Now().UnixMilli(), Health: cluster.HealthHealthy, Ready: true}
	}
	last := recs[restarts-1]
	if _, err := store.UpsertNode(ctx, last, 8*time.Second); err != nil {
		t.Fatal(err)
	}
	write := func(ctx context.Context, a membership.Attempt) (membership.Answer, error) {
		r := last.Clone()
		r.HeartbeatSeq = a.Seq + 1
		var opts []state.UpsertOption
		if !a.Register {
			opts = append(opts, state.Heartbeat())
		}
		res, err := store.UpsertNode(ctx, r, 8*time.Second, opts...)
		if err != nil {
			return membership.Answer{}, err
		}
		switch res.Outcome {
		case state.OutcomeAccepted, state.OutcomeDuplicate:
			return membership.Answer{Outcome: membership.Accepted}, nil
		case state.OutcomeNotFound:
			return membership.Answer{Outcome: membership.NotFound}, nil
		}
		return membership.Answer{Outcome: membership.Superseded, Holder: res.Record.IncarnationID}, nil
	}
	l, err := membership.New(membership.Options{Role: "worker", NodeID: "w1", Incarnation: last.IncarnationID, Write: write,
		Interval: time.Second, RequestTimeout: time.Second, Logger: slog.New(slog.DiscardHandler), Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if !l.Beat(ctx) {
		t.Fatal("the live process's registration was refused")
	}
	taken := 0
	for i := range restarts - 1 { // every earlier incarnation's registration lands late
		res, err := store.UpsertNode(ctx, recs[i], 8*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome == state.OutcomeAccepted {
			taken++
		}
		if !l.Beat(ctx) {
			t.Fatalf("after the delayed registration of incarnation %d the live process's heartbeat was refused: %+v", i, l.Status())
		}
	}
	snap, err := store.Snapshot(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	if got := snap.Find(last.Key()); got == nil || got.IncarnationID != last.IncarnationID {
		t.Fatalf("slot held by %+v, want the last incarnation", got)
	}
	t.Logf("crash loop: %d restarts, %d delayed registrations took the slot (want 0), live process accepted throughout", restarts, taken)
	if taken != 0 {
		t.Fatalf("%d delayed registrations of dead incarnations took the slot", taken)
	}
}
