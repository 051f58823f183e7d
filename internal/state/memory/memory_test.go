package memory_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
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

// newFakeClock returns a manual clock; Advance moves it.
func newFakeClock() *testsupport.FakeClock {
	return testsupport.NewFakeClock(time.Date(2026, 7, 23, 12, 0, 0, 0, time.UTC))
}

// faultErrors maps each contract fault to the sentinel SetFault injects.
var faultErrors = map[statetest.Fault]error{
	statetest.FaultUnavailable:      state.ErrUnavailable,
	statetest.FaultTimeout:          state.ErrTimeout,
	statetest.FaultUnauthenticated:  state.ErrUnauthenticated,
	statetest.FaultPermissionDenied: state.ErrPermissionDenied,
}

func newHarness(t *testing.T) *statetest.Harness {
	clk := newFakeClock()
	s := memory.New(memory.Options{Clock: clk.Now})
	t.Cleanup(func() { _ = s.Close() })
	return &statetest.Harness{
		Store:           s,
		Advance:         clk.Advance,
		Now:             clk.Now,
		LeaseTTL:        cluster.DefaultLeaseTTL,
		StableRevisions: true,
		LeaseExpiry:     true,
		Fault: func(t testing.TB, f statetest.Fault) (state.Store, func()) {
			err, ok := faultErrors[f]
			if !ok {
				t.Fatalf("unknown fault %s", f)
			}
			s.SetFault(fmt.Errorf("injected %s: %w", f, err))
			return s, s.ClearFault
		},
		Compact: func(testing.TB) { s.CompactAll() },
		// One process, one clock: a second coordinator is the same store.
		Peer: func(testing.TB, time.Duration) state.Store { return s },
		SmallWatchBuffer: func(t testing.TB) (state.Store, int) {
			const n = 32
			small := memory.New(memory.Options{Clock: clk.Now, HistoryLimit: n})
			t.Cleanup(func() { _ = small.Close() })
			return small, n
		},
	}
}

func TestContract(t *testing.T) {
	statetest.Run(t, newHarness)
}

// fixture is a store on a fake clock for the memory-specific tests.
type fixture struct {
	t   *testing.T
	clk *testsupport.FakeClock
	s   *memory.Store
}

func newFixture(t *testing.T, opts memory.Options) *fixture {
	t.Helper()
	clk := newFakeClock()
	if opts.Clock == nil {
		opts.Clock = clk.Now
	}
	s := memory.New(opts)
	t.Cleanup(func() { _ = s.Close() })
	return &fixture{t: t, clk: clk, s: s}
}

func record(node, incarnation string, seq uint64) *cluster.Record {
	return &cluster.Record{
		ClusterID:     "c1",
		NodeID:        node,
		Role:          cluster.RoleWorker,
		IncarnationID: incarnation,
		Address:       "10.0.0.1:7070",
		Version:       "test",
		HeartbeatSeq:  seq,
		Health:        cluster.HealthHealthy,
	}
}

func (f *fixture) upsert(rec *cluster.Record, ttl time.Duration) state.WriteResult {
	f.t.Helper()
	res, err := f.s.UpsertNode(context.Background(), rec, ttl)
	if err != nil {
		f.t.Fatalf("UpsertNode(%s): %v", rec.Key(), err)
	}
	return res
}

func (f *fixture) snapshot() *state.Snapshot {
	f.t.Helper()
	snap, err := f.s.Snapshot(context.Background(), "c1")
	if err != nil {
		f.t.Fatalf("Snapshot: %v", err)
	}
	return snap
}

// recv returns the next batch or fails after a wall-clock bound.
func recv(t *testing.T, ch <-chan state.WatchBatch) (state.WatchBatch, bool) {
	t.Helper()
	select {
	case b, ok := <-ch:
		return b, ok
	case <-time.After(10 * time.Second):
		t.Fatal("no watch batch within 10s")
		return state.WatchBatch{}, false
	}
}

// events reads batches until n events arrived, failing on an error batch.
func events(t *testing.T, ch <-chan state.WatchBatch, n int) []state.Event {
	t.Helper()
	var got []state.Event
	for len(got) < n {
		b, ok := recv(t, ch)
		if !ok {
			t.Fatalf("watch closed after %d of %d events", len(got), n)
		}
		if b.Err != nil {
			t.Fatalf("watch ended with %v after %d of %d events", b.Err, len(got), n)
		}
		got = append(got, b.Events...)
	}
	return got
}

// terminal reads until the watch ends and returns its error.
func terminal(t *testing.T, ch <-chan state.WatchBatch) (evs []state.Event, err error) {
	t.Helper()
	for {
		b, ok := recv(t, ch)
		if !ok {
			return evs, nil
		}
		evs = append(evs, b.Events...)
		if b.Err != nil {
			if _, ok := recv(t, ch); ok {
				t.Fatal("watch channel not closed after its terminal error")
			}
			return evs, b.Err
		}
	}
}

func TestDefaults(t *testing.T) {
	s := memory.New(memory.Options{})
	defer s.Close()
	if got := s.Backend(); got != "memory" {
		t.Fatalf("Backend() = %q", got)
	}
	before := time.Now().UnixMilli()
	res, err := s.UpsertNode(context.Background(), record("w1", "i", 1), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if at := res.Record.UpdatedAtUnixMs; at < before || at > time.Now().UnixMilli() {
		t.Fatalf("UpdatedAtUnixMs %d not stamped from time.Now (default clock)", at)
	}
}

func TestUpsertRejectsNonPositiveLease(t *testing.T) {
	f := newFixture(t, memory.Options{})
	for _, ttl := range []time.Duration{0, -time.Second} {
		_, err := f.s.UpsertNode(context.Background(), record("w1", "i", 1), ttl)
		if !errors.Is(err, state.ErrInvalidRecord) {
			t.Fatalf("lease %s: error %v, want ErrInvalidRecord", ttl, err)
		}
	}
	if n := len(f.snapshot().Records); n != 0 {
		t.Fatalf("store holds %d records", n)
	}
}

func TestRemoveValidatesKey(t *testing.T) {
	f := newFixture(t, memory.Options{})
	for _, tc := range []struct {
		name string
		key  cluster.Key
		inc  string
	}{
		{"BadCluster", cluster.Key{ClusterID: "a/b", Role: cluster.RoleWorker, NodeID: "w1"}, "i"},
		{"BadNode", cluster.Key{ClusterID: "c1", Role: cluster.RoleWorker, NodeID: ""}, "i"},
		{"BadRole", cluster.Key{ClusterID: "c1", Role: "x", NodeID: "w1"}, "i"},
		{"EmptyIncarnation", cluster.Key{ClusterID: "c1", Role: cluster.RoleWorker, NodeID: "w1"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := f.s.RemoveNode(context.Background(), tc.key, tc.inc); !errors.Is(err, state.ErrInvalidRecord) {
				t.Fatalf("error %v, want ErrInvalidRecord", err)
			}
		})
	}
}

func TestTooLargeWrapsFieldError(t *testing.T) {
	f := newFixture(t, memory.Options{})
	rec := record("w1", "i", 1)
	rec.Labels = map[string]string{}
	for i := range cluster.MaxLabels {
		rec.Labels[fmt.Sprintf("k%d", i)] = string(slices.Repeat([]byte{'&'}, cluster.MaxLabelValueBytes))
	}
	_, err := f.s.UpsertNode(context.Background(), rec, time.Minute)
	var fe *cluster.FieldError
	if !errors.Is(err, state.ErrRecordTooLarge) || errors.Is(err, state.ErrInvalidRecord) || !errors.As(err, &fe) {
		t.Fatalf("error %v: want ErrRecordTooLarge (not ErrInvalidRecord) wrapping the field error", err)
	}
}

func TestSnapshotIsIndependentCopy(t *testing.T) {
	f := newFixture(t, memory.Options{})
	for _, n := range []string{"a", "b", "c"} {
		f.upsert(record(n, "i", 1), time.Minute)
	}
	s1 := f.snapshot()
	slices.Reverse(s1.Records)
	s1.Records = append(s1.Records[:1], nil)
	s2 := f.snapshot()
	var got []string
	for _, r := range s2.Records {
		got = append(got, r.NodeID)
	}
	if !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("snapshot after a caller reordered an earlier one: %v", got)
	}
}

func TestSnapshotOrderAtScale(t *testing.T) {
	f := newFixture(t, memory.Options{})
	const n = 2000
	for _, i := range slicesPerm(n) {
		role := cluster.RoleWorker
		if i%10 == 0 {
			role = cluster.RoleCoordinator
		}
		rec := record(fmt.Sprintf("n%d", i), "i", 1)
		rec.Role = role
		f.upsert(rec, time.Hour)
	}
	// Remove every seventh.
	for i := 0; i < n; i += 7 {
		role := cluster.RoleWorker
		if i%10 == 0 {
			role = cluster.RoleCoordinator
		}
		if _, err := f.s.RemoveNode(context.Background(), cluster.Key{ClusterID: "c1", Role: role, NodeID: fmt.Sprintf("n%d", i)}, "i"); err != nil {
			t.Fatal(err)
		}
	}
	snap := f.snapshot()
	want := n - (n+6)/7
	if len(snap.Records) != want {
		t.Fatalf("snapshot holds %d records, want %d", len(snap.Records), want)
	}
	if !slices.IsSortedFunc(snap.Records, func(a, b *cluster.Record) int {
		if a.Role != b.Role {
			if a.Role < b.Role {
				return -1
			}
			return 1
		}
		if a.NodeID < b.NodeID {
			return -1
		} else if a.NodeID > b.NodeID {
			return 1
		}
		return 0
	}) {
		t.Fatal("snapshot not ordered by role then node ID")
	}
}

func slicesPerm(n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = (i * 7919) % n // 7919 is prime and does not divide 2000
	}
	return p
}

func TestExpiryDeliveredToIdleWatcher(t *testing.T) {
	// Nothing but the watch's own sweep touches the store after the clock
	// moves: the watcher must still see the expiry.
	f := newFixture(t, memory.Options{SweepInterval: 5 * time.Millisecond})
	res := f.upsert(record("w1", "i", 1), 10*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := f.s.Watch(ctx, "c1", res.Revision)
	f.clk.Advance(10 * time.Second)
	ev := events(t, ch, 1)[0]
	if ev.Type != state.EventDelete || ev.Key.NodeID != "w1" || ev.Record != nil {
		t.Fatalf("got %+v, want the expiry delete of w1", ev)
	}
}

func TestExpiryExactlyAtLeaseEnd(t *testing.T) {
	f := newFixture(t, memory.Options{SweepInterval: -1})
	f.upsert(record("w1", "i", 1), 10*time.Second)
	f.clk.Advance(10*time.Second - time.Millisecond)
	if n := len(f.snapshot().Records); n != 1 {
		t.Fatalf("record gone %s before its lease ends", time.Millisecond)
	}
	if n := f.s.Sweep(); n != 0 {
		t.Fatalf("Sweep expired %d records before the lease ended", n)
	}
	f.clk.Advance(time.Millisecond)
	// Age equal to the lease is expired, as cluster.Timing.Classify says.
	if n := f.s.Sweep(); n != 1 {
		t.Fatalf("Sweep expired %d records at the lease end, want 1", n)
	}
	if n := len(f.snapshot().Records); n != 0 {
		t.Fatal("record visible at its lease end")
	}
}

func TestExpiredRecordIsNotFoundOnRemove(t *testing.T) {
	f := newFixture(t, memory.Options{SweepInterval: -1})
	rec := record("w1", "i", 1)
	f.upsert(rec, time.Second)
	f.clk.Advance(time.Second)
	res, err := f.s.RemoveNode(context.Background(), rec.Key(), "i")
	if err != nil || res.Outcome != state.OutcomeNotFound {
		t.Fatalf("RemoveNode of an expired record = %v, %v; want not_found", res.Outcome, err)
	}
}

func TestHistoryLimitCompacts(t *testing.T) {
	f := newFixture(t, memory.Options{HistoryLimit: 5})
	start := f.snapshot().Revision
	var last state.WriteResult
	for seq := uint64(1); seq <= 6; seq++ {
		last = f.upsert(record("w1", "i", seq), time.Minute)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := terminal(t, f.s.Watch(ctx, "c1", start)); !errors.Is(err, state.ErrCompacted) {
		t.Fatalf("watch beyond the history: %v, want ErrCompacted", err)
	}
	// The five newest changes are still there: resume after the first kept one.
	ch := f.s.Watch(ctx, "c1", last.Revision)
	res := f.upsert(record("w1", "i", 7), time.Minute)
	if ev := events(t, ch, 1)[0]; ev.Revision != res.Revision {
		t.Fatalf("got event at %s, want %s", ev.Revision, res.Revision)
	}
}

func TestSlowWatcherDoesNotBlockWriters(t *testing.T) {
	f := newFixture(t, memory.Options{HistoryLimit: 50})
	start := f.snapshot().Revision
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := f.s.Watch(ctx, "c1", start)
	// Nobody reads while 1,000 changes are written: every write returns.
	for seq := uint64(1); seq <= 1000; seq++ {
		f.upsert(record("w1", "i", seq), time.Minute)
	}
	evs, err := terminal(t, ch)
	if !errors.Is(err, state.ErrUnavailable) {
		t.Fatalf("slow watcher ended with %v, want ErrUnavailable (the fan-out's rule on every backend)", err)
	}
	// What it did get is a gapless prefix.
	for i, ev := range evs {
		if ev.Record.HeartbeatSeq != uint64(i+1) {
			t.Fatalf("event %d has seq %d: gap before the slow-watcher error", i, ev.Record.HeartbeatSeq)
		}
	}
}

func TestLongReplayIsBatched(t *testing.T) {
	f := newFixture(t, memory.Options{})
	start := f.snapshot().Revision
	for seq := uint64(1); seq <= 1500; seq++ {
		f.upsert(record("w1", "i", seq), time.Minute)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := f.s.Watch(ctx, "c1", start)
	var got []state.Event
	for len(got) < 1500 {
		b, _ := recv(t, ch)
		if b.Err != nil {
			t.Fatal(b.Err)
		}
		if len(b.Events) > 512 {
			t.Fatalf("batch of %d events", len(b.Events))
		}
		got = append(got, b.Events...)
	}
	for i, ev := range got {
		if ev.Record.HeartbeatSeq != uint64(i+1) {
			t.Fatalf("event %d has seq %d", i, ev.Record.HeartbeatSeq)
		}
	}
}

func TestWatchRejectsForeignRevisions(t *testing.T) {
	f := newFixture(t, memory.Options{})
	f.upsert(record("w1", "i", 1), time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, rev := range []state.Revision{{}, state.NewRevision("not-a-number"), state.NewRevision("0"), state.NewRevision("999999")} {
		if _, err := terminal(t, f.s.Watch(ctx, "c1", rev)); !errors.Is(err, state.ErrCompacted) {
			t.Fatalf("Watch(%q): %v, want ErrCompacted", rev.String(), err)
		}
	}
	if _, err := terminal(t, f.s.Watch(ctx, "bad/cluster", f.snapshot().Revision)); !errors.Is(err, state.ErrInvalidRecord) {
		t.Fatalf("Watch(invalid cluster): %v, want ErrInvalidRecord", err)
	}
}

func TestCompactToRevision(t *testing.T) {
	f := newFixture(t, memory.Options{})
	r1 := f.upsert(record("w1", "i", 1), time.Minute).Revision
	r2 := f.upsert(record("w1", "i", 2), time.Minute).Revision
	r3 := f.upsert(record("w1", "i", 3), time.Minute)
	if err := f.s.Compact(r2); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := terminal(t, f.s.Watch(ctx, "c1", r1)); !errors.Is(err, state.ErrCompacted) {
		t.Fatalf("watch from before the compaction: %v", err)
	}
	if ev := events(t, f.s.Watch(ctx, "c1", r2), 1)[0]; ev.Revision != r3.Revision {
		t.Fatalf("watch from the compaction revision got %s, want %s", ev.Revision, r3.Revision)
	}
	if err := f.s.Compact(state.NewRevision("99999")); err == nil {
		t.Fatal("Compact to a future revision succeeded")
	}
	if err := f.s.Compact(state.NewRevision("x")); err == nil {
		t.Fatal("Compact to a foreign revision succeeded")
	}
}

func TestTimeoutFaultBlocksUntilDeadline(t *testing.T) {
	f := newFixture(t, memory.Options{})
	f.s.SetFault(state.ErrTimeout)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	deadline, _ := ctx.Deadline()
	_, err := f.s.Snapshot(ctx, "c1")
	if !errors.Is(err, state.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want ErrTimeout and DeadlineExceeded", err)
	}
	if early := time.Until(deadline); early > 0 {
		t.Fatalf("returned %s before the deadline", early)
	}

	// A canceled (not expired) context is a cancellation, not a timeout.
	cctx, ccancel := context.WithCancel(context.Background())
	go func() { time.Sleep(10 * time.Millisecond); ccancel() }()
	if err := f.s.CheckReady(cctx); !errors.Is(err, context.Canceled) || errors.Is(err, state.ErrTimeout) {
		t.Fatalf("canceled during a timeout fault: %v", err)
	}
}

func TestClearFaultReleasesBlockedOperation(t *testing.T) {
	f := newFixture(t, memory.Options{})
	f.s.SetFault(state.ErrTimeout)
	done := make(chan error, 1)
	go func() {
		_, err := f.s.UpsertNode(context.Background(), record("w1", "i", 1), time.Minute)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("operation returned during a timeout fault: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	f.s.ClearFault()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("operation after ClearFault: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("operation still blocked after ClearFault")
	}
	if n := len(f.snapshot().Records); n != 1 {
		t.Fatalf("store holds %d records, want the released write", n)
	}
}

func TestFaultEndsOpenWatch(t *testing.T) {
	f := newFixture(t, memory.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := f.s.Watch(ctx, "c1", f.snapshot().Revision)
	f.s.SetFault(state.ErrUnauthenticated)
	if _, err := terminal(t, ch); !errors.Is(err, state.ErrUnauthenticated) {
		t.Fatalf("open watch ended with %v, want the fault", err)
	}
	if err := f.s.CheckReady(ctx); !errors.Is(err, state.ErrUnauthenticated) {
		t.Fatalf("CheckReady: %v", err)
	}
	f.s.ClearFault()
	if err := f.s.CheckReady(ctx); err != nil {
		t.Fatalf("CheckReady after ClearFault: %v", err)
	}
}

func TestClose(t *testing.T) {
	f := newFixture(t, memory.Options{})
	rev := f.upsert(record("w1", "i", 1), time.Minute).Revision
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	waiting := f.s.Watch(ctx, "c1", rev)
	// A watch whose consumer never reads must not hold Close up.
	stuck := f.s.Watch(ctx, "c1", state.NewRevision("1"))
	time.Sleep(10 * time.Millisecond)

	closed := make(chan struct{})
	go func() { _ = f.s.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close blocked")
	}
	if _, err := terminal(t, waiting); !errors.Is(err, state.ErrClosed) {
		t.Fatalf("open watch ended with %v, want ErrClosed", err)
	}
	for range stuck { // closed, whatever it managed to deliver
	}
	if _, err := f.s.UpsertNode(ctx, record("w1", "i", 2), time.Minute); !errors.Is(err, state.ErrClosed) {
		t.Fatalf("UpsertNode after Close: %v", err)
	}
	if _, err := f.s.Snapshot(ctx, "c1"); !errors.Is(err, state.ErrClosed) {
		t.Fatalf("Snapshot after Close: %v", err)
	}
	if err := f.s.CheckReady(ctx); !errors.Is(err, state.ErrClosed) {
		t.Fatalf("CheckReady after Close: %v", err)
	}
	if _, err := terminal(t, f.s.Watch(ctx, "c1", rev)); !errors.Is(err, state.ErrClosed) {
		t.Fatalf("Watch after Close: %v", err)
	}
	if err := f.s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestRevisionsAreGlobalAndOpaque(t *testing.T) {
	f := newFixture(t, memory.Options{})
	a := f.snapshot().Revision
	other := record("w1", "i", 1)
	other.ClusterID = "c2"
	f.upsert(other, time.Minute)
	// A change in another cluster moves the (store-wide) revision, but a
	// watch of c1 from either revision delivers nothing of c2.
	b := f.snapshot().Revision
	if a == b {
		t.Fatal("revision unchanged after a write to another cluster")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := f.s.Watch(ctx, "c1", a)
	res := f.upsert(record("w1", "i", 1), time.Minute)
	if ev := events(t, ch, 1)[0]; ev.Revision != res.Revision || ev.Key.ClusterID != "c1" {
		t.Fatalf("got %+v", ev)
	}
}
