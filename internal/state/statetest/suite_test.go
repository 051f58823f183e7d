package statetest_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/state/memory"
	"github.com/talonhq/talon/internal/state/statetest"
	"github.com/talonhq/talon/internal/testsupport"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The suite is only worth something if it fails broken backends. Each
// mutant below is the memory backend with one contract violation; the test
// runs the suite against it in a subprocess and expects named cases to fail.

const mutantEnv = "STATETEST_MUTANT"

type mutant struct {
	name     string
	wantFail []string // cases that must fail, below TestMutant/
	wantText string   // when set, the failure output must contain it
	apply    func(h *statetest.Harness, s *memory.Store, clk *testsupport.FakeClock)
}

var mutants = []mutant{
	{
		// A proposal that does not compare the sequence it saw: a heartbeat
		// that lands first is marked late or expired anyway. The randomized
		// Concurrency/LinearizableWithExpiry catches it only when its
		// schedule races a proposal with a heartbeat (most seeds, not
		// all: seed 8366750735691877980 did not), so the deterministic
		// case is the one required to fail.
		name:     "proposal-ignores-sequence",
		wantFail: []string{"Transition/HeartbeatFirstMakesTheProposalStale"},
		apply: func(h *statetest.Harness, s *memory.Store, _ *testsupport.FakeClock) {
			h.Store = &proposalIgnoresSeq{Store: s}
		},
	},
	{
		// A late mark that refreshes the lease.
		name:     "late-refreshes-lease",
		wantFail: []string{"Transition/LateDoesNotExtendTheLease"},
		apply: func(h *statetest.Harness, s *memory.Store, _ *testsupport.FakeClock) {
			h.Store = &lateRefreshes{Store: s}
		},
	},
	{
		// The ordering rule before store-issued generations: every update
		// may insert or take over a slot.
		name:     "heartbeats-register",
		wantFail: []string{"Upsert/HeartbeatNeverTakesASlot", "Concurrency/Linearizable"},
		apply: func(h *statetest.Harness, s *memory.Store, _ *testsupport.FakeClock) {
			h.Store = &heartbeatsRegister{Store: s}
		},
	},
	{
		name:     "accepts-stale-updates",
		wantFail: []string{"Upsert/Stale", "Concurrency/Linearizable"},
		apply: func(h *statetest.Harness, s *memory.Store, _ *testsupport.FakeClock) {
			h.Store = &acceptsStale{Store: s}
		},
	},
	{
		name:     "stale-reads",
		wantFail: []string{"Concurrency/Linearizable"},
		apply: func(h *statetest.Harness, s *memory.Store, _ *testsupport.FakeClock) {
			h.Store = &staleReads{Store: s}
		},
	},
	{
		// Per reader the view only moves forward, but it lags writes that
		// completed before the read began: only the linearizability check
		// sees that.
		name:     "lagging-read-cache",
		wantFail: []string{"Concurrency/Linearizable"},
		wantText: "is not linearizable",
		apply: func(h *statetest.Harness, s *memory.Store, _ *testsupport.FakeClock) {
			h.Store = &laggingCache{Store: s}
		},
	},
	{
		// The state is right, the reported decision is not.
		name:     "mislabels-duplicates",
		wantFail: []string{"Upsert/Duplicate", "Concurrency/Linearizable"},
		apply: func(h *statetest.Harness, s *memory.Store, _ *testsupport.FakeClock) {
			h.Store = &mislabels{Store: s}
		},
	},
	{
		name:     "unsorted-snapshot",
		wantFail: []string{"Snapshot/OrderedByRoleThenNodeID"},
		apply: func(h *statetest.Harness, s *memory.Store, _ *testsupport.FakeClock) {
			h.Store = &unsorted{Store: s}
		},
	},
	{
		name:     "lossy-watch",
		wantFail: []string{"Watch/OrderedEventsAfterRevision", "Watch/ResumeWithoutGapsOrDuplicates"},
		apply: func(h *statetest.Harness, s *memory.Store, _ *testsupport.FakeClock) {
			h.Store = &badWatch{Store: s, drop: true}
		},
	},
	{
		name:     "duplicating-watch",
		wantFail: []string{"Watch/OrderedEventsAfterRevision", "Watch/ResumeWithoutGapsOrDuplicates"},
		apply: func(h *statetest.Harness, s *memory.Store, _ *testsupport.FakeClock) {
			h.Store = &badWatch{Store: s, duplicate: true}
		},
	},
	{
		name:     "leases-never-expire",
		wantFail: []string{"Lease/VisibleUntilExpiryThenDeleted", "Lease/LeaseIsPerRecord"},
		apply: func(h *statetest.Harness, s *memory.Store, _ *testsupport.FakeClock) {
			h.Store = &longLease{Store: s}
		},
	},
	{
		name:     "duplicates-refresh-lease",
		wantFail: []string{"Lease/DuplicateAndStaleDoNotRefreshLease"},
		apply: func(h *statetest.Harness, s *memory.Store, _ *testsupport.FakeClock) {
			h.Store = &duplicateRefreshes{Store: s}
		},
	},
	{
		name:     "fault-not-caused",
		wantFail: []string{"Errors/unavailable"},
		apply: func(h *statetest.Harness, s *memory.Store, _ *testsupport.FakeClock) {
			h.Fault = func(testing.TB, statetest.Fault) (state.Store, func()) { return s, func() {} }
		},
	},
	{
		name:     "wrong-fault-sentinel",
		wantFail: []string{"Errors/unauthenticated"},
		apply: func(h *statetest.Harness, s *memory.Store, _ *testsupport.FakeClock) {
			h.Fault = func(testing.TB, statetest.Fault) (state.Store, func()) {
				s.SetFault(state.ErrUnavailable)
				return s, s.ClearFault
			}
		},
	},
	{
		name:     "compaction-not-caused",
		wantFail: []string{"Compaction/WatchFromCompactedRevisionFails", "Compaction/RecoverBySnapshotAndWatch"},
		apply: func(h *statetest.Harness, _ *memory.Store, _ *testsupport.FakeClock) {
			h.Compact = func(testing.TB) {}
		},
	},
	{
		name:     "missing-hook-fails-not-skips",
		wantFail: []string{"Basics/CheckReady", "Compaction/RecoverBySnapshotAndWatch"},
		apply: func(h *statetest.Harness, _ *memory.Store, _ *testsupport.FakeClock) {
			h.Compact = nil
		},
	},
	{
		name:     "clock-not-advanced",
		wantFail: []string{"Snapshot/ObservedAt", "Lease/LeaseIsPerRecord"},
		apply: func(h *statetest.Harness, _ *memory.Store, _ *testsupport.FakeClock) {
			h.Advance = func(time.Duration) {}
		},
	},
}

func TestSuiteFailsBrokenBackends(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the suite in subprocesses")
	}
	if os.Getenv(mutantEnv) != "" {
		t.Skip("inside a mutant run")
	}
	// One subprocess per case that must fail, all in parallel: most of the
	// time is spent waiting for events a broken backend never sends.
	for _, m := range mutants {
		for _, c := range m.wantFail {
			t.Run(m.name+"/"+c, func(t *testing.T) {
				t.Parallel()
				ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
				defer cancel()
				pattern := "^TestMutant$"
				for _, level := range strings.Split(c, "/") {
					pattern += "/^" + level + "$"
				}
				cmd := exec.CommandContext(ctx, os.Args[0], "-test.run="+pattern, "-test.count=1", "-test.v")
				cmd.Env = append(os.Environ(), mutantEnv+"="+m.name)
				out, err := cmd.CombinedOutput()
				if err == nil {
					t.Fatalf("case %s passed a backend with mutation %s:\n%s", c, m.name, out)
				}
				if !strings.Contains(string(out), "--- FAIL: TestMutant/"+c+" ") {
					t.Errorf("case %s did not fail against mutation %s:\n%s", c, m.name, out)
				}
				if m.wantText != "" && !strings.Contains(string(out), m.wantText) {
					t.Errorf("case %s failed against mutation %s, but not with %q:\n%s", c, m.name, m.wantText, out)
				}
				if skipped := regexp.MustCompile(`--- SKIP: TestMutant/\S+`).FindAllString(string(out), -1); len(skipped) > 0 {
					t.Errorf("cases skipped instead of failing: %v", skipped)
				}
			})
		}
	}
}

// TestMutant runs the suite against the mutant named in the environment;
// outside TestSuiteFailsBrokenBackends it has nothing to do.
func TestMutant(t *testing.T) {
	name := os.Getenv(mutantEnv)
	if name == "" {
		t.Skip("run by TestSuiteFailsBrokenBackends")
	}
	i := slices.IndexFunc(mutants, func(m mutant) bool { return m.name == name })
	if i < 0 {
		t.Fatalf("unknown mutant %q", name)
	}
	statetest.Run(t, func(t *testing.T) *statetest.Harness {
		clk := testsupport.NewFakeClock(time.Date(2026, 7, 23, 12, 0, 0, 0, time.UTC))
		s := memory.New(memory.Options{Clock: clk.Now})
		t.Cleanup(func() { _ = s.Close() })
		h := &statetest.Harness{
			Store:           s,
			Advance:         clk.Advance,
			LeaseTTL:        30 * time.Second,
			StableRevisions: true,
			LeaseExpiry:     true,
			Fault: func(t testing.TB, f statetest.Fault) (state.Store, func()) {
				s.SetFault(map[statetest.Fault]error{
					statetest.FaultUnavailable:      state.ErrUnavailable,
					statetest.FaultTimeout:          state.ErrTimeout,
					statetest.FaultUnauthenticated:  state.ErrUnauthenticated,
					statetest.FaultPermissionDenied: state.ErrPermissionDenied,
				}[f])
				return s, s.ClearFault
			},
			Compact: func(testing.TB) { s.CompactAll() },
			Peer:    func(testing.TB, time.Duration) state.Store { return s },
		}
		mutants[i].apply(h, s, clk)
		return h
	})
}

// proposalIgnoresSeq proposes for whatever sequence the slot holds.
type proposalIgnoresSeq struct{ *memory.Store }

func (s *proposalIgnoresSeq) ProposeTransition(ctx context.Context, key cluster.Key, inc string, seq uint64, tr state.Transition, opts ...state.ProposeOption) (state.WriteResult, error) {
	if snap, err := s.Store.Snapshot(ctx, key.ClusterID); err == nil {
		if r := snap.Find(key); r != nil && r.IncarnationID == inc {
			seq = r.HeartbeatSeq
		}
	}
	return s.Store.ProposeTransition(ctx, key, inc, seq, tr, opts...)
}

// lateRefreshes marks a record late by writing it again with a new lease.
type lateRefreshes struct{ *memory.Store }

func (s *lateRefreshes) ProposeTransition(ctx context.Context, key cluster.Key, inc string, seq uint64, tr state.Transition, opts ...state.ProposeOption) (state.WriteResult, error) {
	res, err := s.Store.ProposeTransition(ctx, key, inc, seq, tr, opts...)
	if err != nil || tr != state.TransitionLate || res.Outcome != state.OutcomeAccepted {
		return res, err
	}
	if _, err := s.Store.RemoveNode(ctx, key, inc); err != nil {
		return res, err
	}
	if _, err := s.Store.UpsertNode(ctx, res.Record, 30*time.Second); err != nil {
		return res, err
	}
	return res, nil
}

// heartbeatsRegister drops the Heartbeat option: every update registers.
type heartbeatsRegister struct{ *memory.Store }

func (s *heartbeatsRegister) UpsertNode(ctx context.Context, rec *cluster.Record, ttl time.Duration, _ ...state.UpsertOption) (state.WriteResult, error) {
	return s.Store.UpsertNode(ctx, rec, ttl)
}

// acceptsStale replaces the stored record with a stale update.
type acceptsStale struct{ *memory.Store }

func (s *acceptsStale) UpsertNode(ctx context.Context, rec *cluster.Record, ttl time.Duration, opts ...state.UpsertOption) (state.WriteResult, error) {
	res, err := s.Store.UpsertNode(ctx, rec, ttl, opts...)
	if err != nil || res.Outcome != state.OutcomeStale {
		return res, err
	}
	if _, err := s.Store.RemoveNode(ctx, rec.Key(), res.Record.IncarnationID); err != nil {
		return res, err
	}
	res, err = s.Store.UpsertNode(ctx, rec, ttl, opts...)
	res.Decision = cluster.DecisionAdvance
	return res, err
}

// staleReads answers every other snapshot with the first one it took.
type staleReads struct {
	*memory.Store
	mu     sync.Mutex
	n      int
	frozen map[string]*state.Snapshot
}

func (s *staleReads) Snapshot(ctx context.Context, clusterID string) (*state.Snapshot, error) {
	snap, err := s.Store.Snapshot(ctx, clusterID)
	if err != nil {
		return snap, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.frozen == nil {
		s.frozen = make(map[string]*state.Snapshot)
	}
	s.n++
	if f, ok := s.frozen[clusterID]; ok && s.n%2 == 0 {
		return f, nil
	}
	if len(snap.Records) > 0 && s.frozen[clusterID] == nil {
		s.frozen[clusterID] = snap
	}
	return snap, nil
}

// unsorted returns snapshots in reverse order.
type unsorted struct{ *memory.Store }

func (s *unsorted) Snapshot(ctx context.Context, clusterID string) (*state.Snapshot, error) {
	snap, err := s.Store.Snapshot(ctx, clusterID)
	if err == nil {
		slices.Reverse(snap.Records)
	}
	return snap, err
}

// badWatch drops or repeats events.
type badWatch struct {
	*memory.Store
	drop, duplicate bool
}

func (s *badWatch) Watch(ctx context.Context, clusterID string, after state.Revision) <-chan state.WatchBatch {
	in := s.Store.Watch(ctx, clusterID, after)
	out := make(chan state.WatchBatch)
	go func() {
		defer close(out)
		n := 0
		for b := range in {
			var evs []state.Event
			for _, ev := range b.Events {
				n++
				switch {
				case s.drop && n == 3:
					continue
				case s.duplicate && n == 2:
					evs = append(evs, ev)
				}
				evs = append(evs, ev)
			}
			select {
			case out <- state.WatchBatch{Events: evs, Err: b.Err}:
			case <-ctx.Done():
				for range in {
				}
				return
			}
		}
	}()
	return out
}

// longLease ignores the requested lease.
type longLease struct{ *memory.Store }

func (s *longLease) UpsertNode(ctx context.Context, rec *cluster.Record, _ time.Duration, opts ...state.UpsertOption) (state.WriteResult, error) {
	return s.Store.UpsertNode(ctx, rec, 1000*time.Hour, opts...)
}

// duplicateRefreshes rewrites the record on a duplicate, renewing its lease.
type duplicateRefreshes struct{ *memory.Store }

func (s *duplicateRefreshes) UpsertNode(ctx context.Context, rec *cluster.Record, ttl time.Duration, opts ...state.UpsertOption) (state.WriteResult, error) {
	res, err := s.Store.UpsertNode(ctx, rec, ttl, opts...)
	if err != nil || res.Outcome != state.OutcomeDuplicate {
		return res, err
	}
	if _, err := s.Store.RemoveNode(ctx, rec.Key(), rec.IncarnationID); err != nil {
		return res, err
	}
	if _, err := s.Store.UpsertNode(ctx, res.Record, ttl, opts...); err != nil {
		return res, fmt.Errorf("rewrite: %w", err)
	}
	return res, nil
}

// laggingCache answers every other snapshot from a cache that only moves
// forward.
type laggingCache struct {
	*memory.Store
	mu     sync.Mutex
	n      int
	cached map[string]*state.Snapshot
}

func (s *laggingCache) Snapshot(ctx context.Context, clusterID string) (*state.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cached == nil {
		s.cached = make(map[string]*state.Snapshot)
	}
	s.n++
	if c, ok := s.cached[clusterID]; ok && s.n%2 == 0 {
		return c, nil
	}
	snap, err := s.Store.Snapshot(ctx, clusterID)
	if err == nil {
		s.cached[clusterID] = snap
	}
	return snap, err
}

// mislabels reports duplicates as stale.
type mislabels struct{ *memory.Store }

func (s *mislabels) UpsertNode(ctx context.Context, rec *cluster.Record, ttl time.Duration, opts ...state.UpsertOption) (state.WriteResult, error) {
	res, err := s.Store.UpsertNode(ctx, rec, ttl, opts...)
	if res.Outcome == state.OutcomeDuplicate {
		res.Outcome, res.Decision = state.OutcomeStale, cluster.DecisionStale
	}
	return res, err
}
