package statetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

const (
	// faultDeadline is the context deadline of operations during a fault.
	// A backend must fail them with the fault's sentinel by then.
	faultDeadline = 3 * time.Second
	// faultGrace is how long after faultDeadline an operation may take to
	// return (scheduling, connection teardown).
	faultGrace = 5 * time.Second
	// restoreWait bounds the wait for a backend to serve again after a
	// fault ends (a restarted server elects a leader, clients reconnect).
	restoreWait = 60 * time.Second
)

// faultSentinel is the sentinel error each fault must surface as.
var faultSentinel = map[Fault]error{
	FaultUnavailable:      state.ErrUnavailable,
	FaultTimeout:          state.ErrTimeout,
	FaultUnauthenticated:  state.ErrUnauthenticated,
	FaultPermissionDenied: state.ErrPermissionDenied,
}

func runErrors(t *testing.T, newHarness Factory) {
	for _, f := range []Fault{FaultUnavailable, FaultTimeout, FaultUnauthenticated, FaultPermissionDenied} {
		t.Run(f.String(), func(t *testing.T) { runFault(t, newHarness, f) })
	}
}

// runFault causes f, checks that every operation fails with its sentinel
// within the deadline and then that service resumes with no accepted data
// lost.
func runFault(t *testing.T, newHarness Factory, f Fault) {
	e := setup(t, newHarness)
	want := faultSentinel[f]
	if code := state.Code(want); code != f.String() {
		t.Fatalf("fault %s maps to sentinel %q of class %q", f, want, code)
	}
	rec := e.rec(cluster.RoleWorker, "w1", "inc-a", 1)
	e.mustUpsert(rec, longTTL, cluster.DecisionInsert, rec)
	other := e.rec(cluster.RoleWorker, "w2", "inc-a", 1)
	e.mustUpsert(other, longTTL, cluster.DecisionInsert, other)
	before := e.snapshot(e.cluster)

	faulty, restore := e.h.Fault(t, f)
	if faulty == nil || restore == nil {
		t.Fatalf("harness Fault(%s) returned a nil store or restore function", f)
	}
	var restoreOnce sync.Once
	restoreFn := func() { restoreOnce.Do(restore) }
	t.Cleanup(restoreFn)

	// Every operation runs concurrently under its own deadline, so a
	// timeout fault costs one deadline, not one per operation.
	ops := []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"UpsertNode", func(ctx context.Context) error {
			_, err := faulty.UpsertNode(ctx, e.rec(cluster.RoleWorker, "w1", "inc-a", 2), longTTL)
			return err
		}},
		{"RemoveNode", func(ctx context.Context) error {
			_, err := faulty.RemoveNode(ctx, other.Key(), "inc-a")
			return err
		}},
		{"Snapshot", func(ctx context.Context) error {
			_, err := faulty.Snapshot(ctx, e.cluster)
			return err
		}},
		{"CheckReady", func(ctx context.Context) error {
			return faulty.CheckReady(ctx)
		}},
		{"Watch", func(ctx context.Context) error {
			return watchDuringFault(ctx, faulty, e.cluster, before.Revision, want)
		}},
	}
	errs := make([]error, len(ops))
	done := make(chan int, len(ops))
	for i, op := range ops {
		go func() {
			ctx, cancel := context.WithTimeout(t.Context(), faultDeadline)
			defer cancel()
			errs[i] = op.call(ctx)
			done <- i
		}()
	}
	timer := time.NewTimer(faultDeadline + faultGrace)
	defer timer.Stop()
	for range ops {
		select {
		case <-done:
		case <-timer.C:
			t.Fatalf("fault %s: an operation did not return within %s of its %s deadline", f, faultGrace, faultDeadline)
		}
	}
	for i, op := range ops {
		if op.name == "Watch" {
			if errs[i] != nil {
				t.Fatalf("fault %s: Watch: %v", f, errs[i])
			}
			continue
		}
		checkSentinel(t, fmt.Sprintf("fault %s: %s", f, op.name), errs[i], want)
	}

	restoreFn()
	deadline := time.Now().Add(restoreWait)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), faultDeadline)
		err := e.s.CheckReady(ctx)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fault %s: CheckReady still fails %s after restore: %v", f, restoreWait, err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// No accepted data lost. A write that timed out may still have been
	// applied when the backend came back, so w1 holds sequence 1 or 2, and
	// w2 may have been removed only by that same ambiguity.
	after := e.snapshot(e.cluster)
	got := find(t, after, rec.Key())
	if got == nil || got.IncarnationID != "inc-a" || (got.HeartbeatSeq != 1 && got.HeartbeatSeq != 2) {
		t.Fatalf("fault %s: after restore the store holds %s, want %s at sequence 1 (or 2)", f, describe(got), rec.Key())
	}
	if f != FaultTimeout {
		mustFind(t, after, rec)
		mustFind(t, after, other)
	}
	next := e.rec(cluster.RoleWorker, "w1", "inc-a", 3)
	e.mustUpsert(next, longTTL, cluster.DecisionAdvance, next)
	mustFind(t, e.snapshot(e.cluster), next)
}

// watchDuringFault opens a watch on the faulty store. It must deliver no
// events; it must end by itself with the fault's sentinel or, at the latest,
// close when its context ends.
func watchDuringFault(ctx context.Context, s state.Store, clusterID string, after state.Revision, want error) error {
	ch := s.Watch(ctx, clusterID, after)
	if ch == nil {
		return errors.New("watch returned a nil channel")
	}
	for b := range ch {
		if len(b.Events) > 0 {
			return fmt.Errorf("delivered %d events while the backend is faulty", len(b.Events))
		}
		if b.Err != nil && !errors.Is(b.Err, want) {
			return fmt.Errorf("ended with %q, want an error wrapping %q", b.Err, want)
		}
	}
	return nil
}
