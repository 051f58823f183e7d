package coordinator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/metrics"
	"github.com/talonhq/talon/internal/placement"
	"github.com/talonhq/talon/internal/protocol"
	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/state/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var testTiming = cluster.Timing{HeartbeatInterval: 100 * time.Millisecond, UnhealthyAfter: 400 * time.Millisecond, LeaseTTL: 800 * time.Millisecond}

type fixture struct {
	c     *Coordinator
	store *memory.Store
	reg   *prometheus.Registry
	addr  string
	stop  func()
}

// start runs a coordinator on loopback over store until the test ends.
func start(t *testing.T, store *memory.Store, drain time.Duration) *fixture {
	t.Helper()
	f := startWith(t, store, drain)
	f.store = store
	return f
}

// startWith runs a coordinator over any store.
func startWith(t *testing.T, store state.Store, drain time.Duration) *fixture {
	t.Helper()
	return startLimited(t, store, drain, Limits{})
}

// startLimited runs a coordinator over store with control-listener limits.
func startLimited(t *testing.T, store state.Store, drain time.Duration, limits Limits) *fixture {
	t.Helper()
	return startTimed(t, store, drain, limits, testTiming)
}

// startTimed is startLimited with its own heartbeat timing.
func startTimed(t *testing.T, store state.Store, drain time.Duration, limits Limits, timing cluster.Timing) *fixture {
	t.Helper()
	c, reg, addr := newTestCoordinator(t, store, timing, drain, limits)
	stop := runUntilCleanup(t, c)
	f := &fixture{c: c, reg: reg, addr: addr, stop: stop}
	waitFor(t, "coordinator ready", func() bool { return c.Readiness().Ready })
	return f
}

// newTestCoordinator builds (does not run) coordinator coord-a of cluster
// "test" on a loopback listener over store.
func newTestCoordinator(t *testing.T, store state.Store, timing cluster.Timing, drain time.Duration, limits Limits) (*Coordinator, *prometheus.Registry, string) {
	t.Helper()
	return newTestCoordinatorRT(t, store, timing, 200*time.Millisecond, drain, limits)
}

// newTestCoordinatorRT is newTestCoordinator with its own request timeout.
func newTestCoordinatorRT(t *testing.T, store state.Store, timing cluster.Timing, requestTimeout, drain time.Duration, limits Limits) (*Coordinator, *prometheus.Registry, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	proc, err := metrics.NewProcess(reg, "coordinator")
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(Options{
		ClusterID: "test", NodeID: "coord-a", Timing: timing,
		RequestTimeout: requestTimeout, DrainDelay: drain, ShutdownTimeout: time.Second,
		Store: store, Listener: ln, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Clock: time.Now, Registerer: reg, Process: proc, Limits: limits,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c, reg, ln.Addr().String()
}

// runUntilCleanup runs c until the test ends or the returned stop is called.
func runUntilCleanup(t *testing.T, c *Coordinator) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func workerRecord(id, incarnation string, seq uint64) *cluster.Record {
	return &cluster.Record{
		ClusterID: "test", NodeID: id, Role: cluster.RoleWorker, IncarnationID: incarnation,
		Address: "127.0.0.1:" + map[string]string{"w1": "9001", "w2": "9002", "w3": "9003", "w4": "9004"}[id],
		Version: "test", HeartbeatSeq: seq, Health: cluster.HealthHealthy, Ready: true,
		FeatureLevel: cluster.BuildLevel, StartTimeUnixMs: 1_784_800_000_000,
	}
}

func dial(t *testing.T, addr string) *protocol.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	cn := protocol.NewConn(nc, protocol.ConnOptions{})
	t.Cleanup(func() { cn.Close() })
	return cn
}

func heartbeat(t *testing.T, cn *protocol.Conn, rec *cluster.Record) (*protocol.Ack, error) {
	t.Helper()
	return send(t, cn, rec, false)
}

func register(t *testing.T, cn *protocol.Conn, rec *cluster.Record) (*protocol.Ack, error) {
	t.Helper()
	return send(t, cn, rec, true)
}

// send sends rec as a Register (reg) or a Heartbeat.
func send(t *testing.T, cn *protocol.Conn, rec *cluster.Record, reg bool) (*protocol.Ack, error) {
	t.Helper()
	var msg protocol.Message
	var err error
	if reg {
		msg, err = protocol.NewRegister(rec)
	} else {
		msg, err = protocol.NewHeartbeat(rec)
	}
	if err != nil {
		t.Fatal(err)
	}
	resp, err := cn.Call(context.Background(), msg)
	if err != nil {
		return nil, err
	}
	return resp.(*protocol.Ack), nil
}

func TestHeartbeatOrdering(t *testing.T) {
	f := start(t, memory.New(memory.Options{}), 0)
	cn := dial(t, f.addr)
	steps := []struct {
		reg  bool
		inc  string
		seq  uint64
		want protocol.Outcome
	}{
		{false, "i1", 0, protocol.OutcomeNotFound}, // a heartbeat never creates a record: register first
		{true, "i1", 0, protocol.OutcomeAccepted},
		{false, "i1", 1, protocol.OutcomeAccepted},
		{false, "i1", 1, protocol.OutcomeDuplicate},
		{false, "i1", 0, protocol.OutcomeStale},
		{false, "i1", 5, protocol.OutcomeAccepted},
		{false, "i2", 9, protocol.OutcomeStale},   // another incarnation's heartbeat never takes the slot
		{true, "i2", 0, protocol.OutcomeAccepted}, // its registration does: a restart, lower seq
		{true, "i1", 9, protocol.OutcomeStale},    // the superseded incarnation stays out, registration or not
		{false, "i1", 10, protocol.OutcomeStale},
		{true, "i3", 0, protocol.OutcomeAccepted}, // a third incarnation registers
	}
	for _, s := range steps {
		ack, err := send(t, cn, workerRecord("w1", s.inc, s.seq), s.reg)
		if err != nil {
			t.Fatalf("heartbeat %s/%d: %v", s.inc, s.seq, err)
		}
		if ack.Outcome != s.want {
			t.Fatalf("heartbeat %s/%d: outcome %v, want %v", s.inc, s.seq, ack.Outcome, s.want)
		}
		if ack.HeartbeatInterval() != testTiming.HeartbeatInterval || ack.LeaseTTL() != testTiming.LeaseTTL {
			t.Fatalf("ack timing %v/%v", ack.HeartbeatInterval(), ack.LeaseTTL())
		}
	}
	snap, err := f.store.Snapshot(context.Background(), "test")
	if err != nil {
		t.Fatal(err)
	}
	got := snap.Find(cluster.Key{ClusterID: "test", Role: cluster.RoleWorker, NodeID: "w1"})
	if got == nil || got.IncarnationID != "i3" || got.HeartbeatSeq != 0 || got.Generation != 3 {
		t.Fatalf("stored record = %+v", got)
	}
	// Bad input is refused with the field named and the connection stays usable.
	bad := workerRecord("w1", "i1", 10)
	bad.ClusterID = "other"
	if _, err := heartbeat(t, cn, bad); !protocol.IsCode(err, protocol.CodeInvalidArgument) {
		t.Fatalf("wrong cluster: %v", err)
	}
	if _, err := cn.Call(context.Background(), &protocol.Ping{}); err != nil {
		t.Fatalf("connection unusable after a refused request: %v", err)
	}
}

func TestPlacementMatchesPurePlacement(t *testing.T) {
	f := start(t, memory.New(memory.Options{}), 0)
	cn := dial(t, f.addr)
	for _, id := range []string{"w1", "w2", "w3"} {
		if _, err := register(t, cn, workerRecord(id, "i", 0)); err != nil {
			t.Fatal(err)
		}
	}
	unready := workerRecord("w4", "i", 0)
	unready.Ready = false
	if _, err := register(t, cn, unready); err != nil {
		t.Fatal(err)
	}
	want, err := placement.New([]placement.Node{{ID: "w1", Address: "127.0.0.1:9001"}, {ID: "w2", Address: "127.0.0.1:9002"}, {ID: "w3", Address: "127.0.0.1:9003"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"a", "objects/x#0", "objects/x#1", "zzz"} {
		resp, err := cn.Call(context.Background(), &protocol.PlacementLookup{Key: []byte(key), Replicas: 2})
		if err != nil {
			t.Fatal(err)
		}
		pr := resp.(*protocol.PlacementResponse)
		if pr.Version != uint64(want.Version()) {
			t.Fatalf("version %016x, want %s", pr.Version, want.Version())
		}
		exp := want.Lookup(key, 2)
		if len(pr.Owners) != 2 || pr.Owners[0].NodeID != exp[0].NodeID || pr.Owners[1].NodeID != exp[1].NodeID {
			t.Fatalf("owners of %q = %+v, want %+v", key, pr.Owners, exp)
		}
	}
	// Replica bounds are enforced.
	if _, _, err := f.c.Lookup(context.Background(), "k", 0); !protocol.IsCode(err, protocol.CodeInvalidArgument) {
		t.Fatalf("replicas 0: %v", err)
	}
}

func TestFailClosedAndRecovery(t *testing.T) {
	store := memory.New(memory.Options{})
	f := start(t, store, 0)
	cn := dial(t, f.addr)
	if _, err := register(t, cn, workerRecord("w1", "i", 0)); err != nil {
		t.Fatal(err)
	}
	store.SetFault(state.ErrUnavailable)
	waitFor(t, "unready", func() bool { return !f.c.Readiness().Ready })
	r := f.c.Readiness()
	if len(r.Reasons) == 0 || !contains(r.Reasons, "store unreachable") {
		t.Fatalf("reasons = %v", r.Reasons)
	}
	_, err := cn.Call(context.Background(), &protocol.PlacementLookup{Key: []byte("k"), Replicas: 1})
	if !protocol.IsCode(err, protocol.CodeNotReady) || !protocol.Retryable(err) {
		t.Fatalf("lookup while store down: %v", err)
	}
	_, err = heartbeat(t, cn, workerRecord("w1", "i", 1))
	if !protocol.IsCode(err, protocol.CodeNotReady) || !protocol.Retryable(err) {
		t.Fatalf("heartbeat while store down: %v", err)
	}
	if f.c.LastGood() == nil {
		t.Fatal("last good view lost")
	}
	if v := testutil.ToFloat64(f.c.store.Failures().WithLabelValues("snapshot", "unavailable")); v == 0 {
		t.Fatal("store errors not counted")
	}
	store.ClearFault()
	waitFor(t, "ready again", func() bool { return f.c.Readiness().Ready })
	// w1 sent nothing for longer than its lease: as a live worker does, it
	// registers again (heartbeats are refused as not_found).
	if _, err := register(t, cn, workerRecord("w1", "i", 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := cn.Call(context.Background(), &protocol.PlacementLookup{Key: []byte("k"), Replicas: 1}); err != nil {
		t.Fatalf("lookup after recovery: %v", err)
	}
}

func TestTimeoutFailsClosedWithinRequestTimeout(t *testing.T) {
	store := memory.New(memory.Options{})
	f := start(t, store, 0)
	store.SetFault(state.ErrTimeout)
	t.Cleanup(store.ClearFault)
	begin := time.Now()
	_, _, err := f.c.Lookup(context.Background(), "k", 1)
	if !protocol.IsCode(err, protocol.CodeNotReady) {
		t.Fatalf("lookup with a hung store: %v", err)
	}
	if d := time.Since(begin); d > 2*time.Second {
		t.Fatalf("lookup took %v with a 200ms request timeout", d)
	}
	store.ClearFault()
}

func contains(list []string, sub string) bool {
	for _, s := range list {
		if len(s) >= len(sub) && (s[:len(sub)] == sub) {
			return true
		}
	}
	return false
}

func TestPlacementVersionPush(t *testing.T) {
	f := start(t, memory.New(memory.Options{}), 0)
	cl, err := client.New(client.Options{Coordinators: []string{f.addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	versions := make(chan uint64, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); cl.Watch(ctx, func(v uint64) { versions <- v }) }()
	defer func() { cancel(); <-done }()
	if v := <-versions; v != 0 {
		t.Fatalf("empty cluster version %016x, want 0", v)
	}
	cn := dial(t, f.addr)
	if _, err := register(t, cn, workerRecord("w1", "i", 0)); err != nil {
		t.Fatal(err)
	}
	want, _ := placement.New([]placement.Node{{ID: "w1", Address: "127.0.0.1:9001"}})
	select {
	case v := <-versions:
		if v != uint64(want.Version()) {
			t.Fatalf("pushed %016x, want %s", v, want.Version())
		}
	case <-time.After(3 * time.Second):
		t.Fatal("no EpochBump after a worker joined")
	}
	if got, _ := cl.Version(); got != uint64(want.Version()) {
		t.Fatalf("client version %016x", got)
	}
	// The worker going silent changes membership: another push follows
	// from time passing alone.
	select {
	case v := <-versions:
		if v != 0 {
			t.Fatalf("after the worker went silent: %016x, want 0", v)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("no EpochBump after the worker turned unhealthy")
	}
}

func TestDrain(t *testing.T) {
	store := memory.New(memory.Options{})
	f := start(t, store, 300*time.Millisecond)
	cn := dial(t, f.addr)
	stopped := make(chan struct{})
	go func() { f.stop(); close(stopped) }()
	waitFor(t, "draining", func() bool { return contains(f.c.Readiness().Reasons, "draining") })
	// Still serving during the drain delay.
	if _, err := cn.Call(context.Background(), &protocol.Ping{}); err != nil {
		t.Fatalf("ping during drain delay: %v", err)
	}
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after the drain")
	}
	snap, err := store.Snapshot(context.Background(), "test")
	if err != nil {
		t.Fatal(err)
	}
	if r := snap.Find(cluster.Key{ClusterID: "test", Role: cluster.RoleCoordinator, NodeID: "coord-a"}); r != nil {
		t.Fatalf("coordinator record left behind: %+v", r)
	}
	if _, err := net.DialTimeout("tcp", f.addr, 200*time.Millisecond); err == nil {
		t.Fatal("listener still accepting after shutdown")
	}
}

// TestDrainNotice: after the drain delay, a connection that idled through
// it (a client's pooled one) and a subscriber learn from the coordinator
// itself that it is draining: their next call, or their poll, ends with
// the retryable draining code, not a reset or an end of stream.
func TestDrainNotice(t *testing.T) {
	f := start(t, memory.New(memory.Options{}), 100*time.Millisecond)
	idle := dial(t, f.addr)
	if _, err := idle.Call(context.Background(), &protocol.Ping{}); err != nil {
		t.Fatal(err)
	}
	sub := dial(t, f.addr)
	if _, err := sub.Call(context.Background(), &protocol.Subscribe{}); err != nil {
		t.Fatal(err)
	}
	polled := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		polled <- sub.Poll(ctx)
	}()
	f.stop()
	_, err := idle.Call(context.Background(), &protocol.Ping{})
	if !protocol.IsCode(err, protocol.CodeDraining) || !protocol.Retryable(err) {
		t.Fatalf("call on a connection that idled through the drain: %v, want the retryable draining code", err)
	}
	if err := <-polled; !protocol.IsCode(err, protocol.CodeDraining) {
		t.Fatalf("subscriber's poll: %v, want the draining code", err)
	}
}

func TestUnsupportedRecordVersion(t *testing.T) {
	f := start(t, memory.New(memory.Options{}), 0)
	cn := dial(t, f.addr)
	good, _ := cluster.Encode(workerRecord("w1", "i", 0))
	newer := []byte(string(good[:len(`{"schemaVersion":`)]) + "2" + string(good[len(`{"schemaVersion":1`):]))
	_, err := cn.Call(context.Background(), &protocol.Heartbeat{Record: newer})
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodeUnsupportedVersion || pe.Retryable {
		t.Fatalf("newer record: %v", err)
	}
	snap, _ := f.store.Snapshot(context.Background(), "test")
	if snap.Find(cluster.Key{ClusterID: "test", Role: cluster.RoleWorker, NodeID: "w1"}) != nil {
		t.Fatal("a record of an unsupported version was applied")
	}
}

// TestDuplicateCoordinatorIDTurnsUnready: a second coordinator process
// registers the same node ID. The first one's heartbeats are refused; it
// turns unready with a reason naming the duplicate and counts the refusal
// (the old loop marked any answer accepted and stayed ready).
func TestDuplicateCoordinatorIDTurnsUnready(t *testing.T) {
	store := memory.New(memory.Options{})
	a := start(t, store, 0)
	startWith(t, store, 0) // same cluster and node ID, new incarnation
	waitFor(t, "first coordinator refused", func() bool {
		rd := a.c.Readiness()
		for _, r := range rd.Reasons {
			if strings.Contains(r, "duplicate node ID") {
				return !rd.Ready
			}
		}
		return false
	})
	if n := testutil.ToFloat64(a.c.m.selfRefusals.WithLabelValues("stale")); n < 1 {
		t.Fatalf("own-record refusals counted %v, want at least 1", n)
	}
}

// timeoutAfterWrite applies every upsert and then reports a timeout, as a
// write whose answer was lost would.
type timeoutAfterWrite struct {
	*memory.Store
	seqs []uint64
	mu   sync.Mutex
}

func (s *timeoutAfterWrite) UpsertNode(ctx context.Context, rec *cluster.Record, ttl time.Duration, opts ...state.UpsertOption) (state.WriteResult, error) {
	if rec.Role != cluster.RoleCoordinator {
		return s.Store.UpsertNode(ctx, rec, ttl, opts...)
	}
	s.mu.Lock()
	s.seqs = append(s.seqs, rec.HeartbeatSeq)
	s.mu.Unlock()
	if _, err := s.Store.UpsertNode(ctx, rec, ttl, opts...); err != nil {
		return state.WriteResult{}, err
	}
	return state.WriteResult{}, state.ErrTimeout
}

// TestOwnSequenceNeverReused: every attempt to write the coordinator's own
// record takes a new sequence, so a write that timed out but landed is
// never followed by other content under the same sequence.
func TestOwnSequenceNeverReused(t *testing.T) {
	store := &timeoutAfterWrite{Store: memory.New(memory.Options{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	proc, _ := metrics.NewProcess(reg, "coordinator")
	c, err := New(Options{
		ClusterID: "test", NodeID: "coord-a", Timing: testTiming, RequestTimeout: 200 * time.Millisecond,
		ShutdownTimeout: time.Second, Store: store, Listener: ln, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Clock: time.Now, Registerer: reg, Process: proc,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	waitFor(t, "three own-record writes", func() bool {
		store.mu.Lock()
		defer store.mu.Unlock()
		return len(store.seqs) >= 3
	})
	cancel()
	<-done
	store.mu.Lock()
	defer store.mu.Unlock()
	for i := 1; i < len(store.seqs); i++ {
		if store.seqs[i] <= store.seqs[i-1] {
			t.Fatalf("own-record sequences %v: %d reused after a timed-out write", store.seqs, store.seqs[i])
		}
	}
}

// skewingStore is a memory store that reports a clock skew estimate, as
// the etcd and Kubernetes stores do.
type skewingStore struct{ *memory.Store }

func (skewingStore) ClockSkew() (time.Duration, bool) { return 3 * time.Second, true }

func TestClockSkewGauge(t *testing.T) {
	f := startWith(t, skewingStore{memory.New(memory.Options{})}, 0)
	got, err := testutil.GatherAndCount(f.reg, "talon_clock_skew_seconds")
	if err != nil || got != 1 {
		t.Fatalf("talon_clock_skew_seconds series: %d, %v", got, err)
	}
	mfs, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "talon_clock_skew_seconds" {
			if v := mf.GetMetric()[0].GetGauge().GetValue(); v != 3 {
				t.Fatalf("talon_clock_skew_seconds = %v, want 3", v)
			}
			return
		}
	}
	t.Fatal("talon_clock_skew_seconds not exported")
}

// TestRecoveryHoldFailsClosedUntilObservedAndReaccepted: after a store
// outage long enough for records to expire (a lease TTL) the coordinator
// answers not_ready (never an empty or shrunken membership the outage
// caused) until it has observed the cluster for the recovery hold and the
// store accepted its own record again; readiness goes from unready to
// ready once, without flapping.
func TestRecoveryHoldFailsClosedUntilObservedAndReaccepted(t *testing.T) {
	store := &sheddingStore{Store: memory.New(memory.Options{})}
	t.Cleanup(func() { store.Close() })
	for _, id := range []string{"w1", "w2", "w3"} {
		if _, err := store.UpsertNode(context.Background(), workerRecord(id, "i", 0), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	// The workers heartbeat throughout (failing during the outage), as
	// live workers do.
	beatCtx, stopBeats := context.WithCancel(context.Background())
	beats := make(chan struct{})
	go func() {
		defer close(beats)
		for seq := uint64(1); beatCtx.Err() == nil; seq++ {
			for _, id := range []string{"w1", "w2", "w3"} {
				_, _ = store.UpsertNode(beatCtx, workerRecord(id, "i", seq), time.Minute, state.Heartbeat())
			}
			time.Sleep(testTiming.HeartbeatInterval)
		}
	}()
	t.Cleanup(func() { stopBeats(); <-beats })
	f := startWith(t, store, 0)
	lookup := func() ([]placement.Owner, error) {
		owners, _, err := f.c.Lookup(context.Background(), "k#0", 3)
		return owners, err
	}
	waitFor(t, "three owners", func() bool { o, err := lookup(); return err == nil && len(o) == 3 })

	store.SetFault(state.ErrUnavailable)
	waitFor(t, "fail closed", func() bool { _, err := lookup(); return err != nil })
	time.Sleep(testTiming.LeaseTTL) // long enough for records, its own included, to expire
	store.shed.Store(true)          // the store answers reads again but sheds the coordinator's own writes
	store.ClearFault()
	// The refresh loop finds the store back; lookups meanwhile fail at once.
	waitFor(t, "store answers again", func() bool {
		_, err := lookup()
		return protocol.IsCode(err, protocol.CodeNotReady) && strings.Contains(strings.Join(f.c.Readiness().Reasons, "; "), "recovering")
	})
	cleared := time.Now()
	for time.Since(cleared) < 3*(testTiming.HeartbeatInterval+200*time.Millisecond) {
		start := time.Now()
		if _, err := lookup(); !protocol.IsCode(err, protocol.CodeNotReady) {
			t.Fatalf("lookup %s after the outage with the own record not re-accepted: %v, want not_ready", time.Since(cleared), err)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("not_ready took %s while recovering, want it at once", d)
		}
		if rd := f.c.Readiness(); rd.Ready || !strings.Contains(strings.Join(rd.Reasons, "; "), "recovering") {
			t.Fatalf("readiness %+v, want unready and recovering", rd)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if v := testutil.ToFloat64(f.c.m.recovering); v != 1 {
		t.Fatalf("talon_coordinator_recovering = %v during the hold, want 1", v)
	}
	store.shed.Store(false)
	flips, was := 0, false
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		o, err := lookup()
		ready := f.c.Readiness().Ready
		if ready != was {
			flips++
			was = ready
		}
		if err == nil && len(o) != 3 {
			t.Fatalf("first answers after the outage name %d owners, want the 3 live workers", len(o))
		}
		if err == nil && ready && flips == 1 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !was || flips != 1 {
		t.Fatalf("readiness changed %d times after the outage (ready now %v), want once to ready", flips, was)
	}
	for range 20 {
		if !f.c.Readiness().Ready {
			t.Fatal("readiness flapped back after recovery")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sheddingStore refuses the coordinator's own writes with ErrUnavailable
// while shed is set, as a store applying write admission does.
type sheddingStore struct {
	*memory.Store
	shed    atomic.Bool
	refused atomic.Int64
}

func (s *sheddingStore) UpsertNode(ctx context.Context, rec *cluster.Record, ttl time.Duration, opts ...state.UpsertOption) (state.WriteResult, error) {
	if rec.Role == cluster.RoleCoordinator && s.shed.Load() {
		s.refused.Add(1)
		return state.WriteResult{}, fmt.Errorf("write admission: %w", state.ErrUnavailable)
	}
	return s.Store.UpsertNode(ctx, rec, ttl, opts...)
}

// TestOwnRecordRetriedSoonAfterShedding checks that a coordinator whose own
// registration the store sheds tries again within backoffs (from 100 ms,
// doubling), not only at its next heartbeat interval, so it turns ready
// soon after the store takes writes again.
func TestOwnRecordRetriedSoonAfterShedding(t *testing.T) {
	store := &sheddingStore{Store: memory.New(memory.Options{})}
	store.shed.Store(true)
	timing := cluster.Timing{HeartbeatInterval: 10 * time.Second, UnhealthyAfter: 30 * time.Second, LeaseTTL: time.Minute}
	c, _, _ := newTestCoordinator(t, store, timing, 0, Limits{})
	runUntilCleanup(t, c)

	waitFor(t, "two refused registrations", func() bool { return store.refused.Load() >= 2 })
	if c.Readiness().Ready {
		t.Fatal("ready although its own record was never accepted")
	}
	store.shed.Store(false)
	// The next retry is at most a few hundred milliseconds away, far
	// within waitFor's 5 s and far below the 10 s interval.
	waitFor(t, "ready after the store takes writes again", func() bool { return c.Readiness().Ready })
}

// hangingStore's snapshot reads hang until their deadline while hang is
// set, as reads of a store that lost quorum do.
type hangingStore struct {
	*memory.Store
	hang atomic.Bool
}

func (s *hangingStore) Snapshot(ctx context.Context, clusterID string) (*state.Snapshot, error) {
	if s.hang.Load() {
		<-ctx.Done()
		return nil, fmt.Errorf("hung read: %w", state.ErrTimeout)
	}
	return s.Store.Snapshot(ctx, clusterID)
}

// TestUnreadyAnswersAtOnce: once a read has failed, lookups get the
// retryable not_ready at once, not after a read of their own that waits
// out the request timeout; the figure logged is the slowest of 50 lookups.
func TestUnreadyAnswersAtOnce(t *testing.T) {
	store := &hangingStore{Store: memory.New(memory.Options{})}
	t.Cleanup(func() { store.Close() })
	f := startWith(t, store, 0)
	store.hang.Store(true)
	waitFor(t, "unready", func() bool { return !f.c.Readiness().Ready })
	var slowest time.Duration
	for range 50 {
		start := time.Now()
		_, _, err := f.c.Lookup(context.Background(), "k", 1)
		if d := time.Since(start); d > slowest {
			slowest = d
		}
		if !protocol.IsCode(err, protocol.CodeNotReady) || !protocol.Retryable(err) {
			t.Fatalf("lookup during the outage: %v, want the retryable not_ready", err)
		}
	}
	t.Logf("not_ready during an outage: slowest of 50 lookups %s (request timeout 200ms)", slowest)
	// A lookup that read the store itself would wait out the whole
	// request timeout; anything below it answered without a read.
	if slowest >= 200*time.Millisecond {
		t.Fatalf("not_ready took up to %s: the lookup waited for a read of its own", slowest)
	}
}

// TestUnreadyWithinRequestTimeoutOfAHungStore: when the store stops
// answering (reads hang, as on an etcd that lost quorum), readiness turns
// unready and lookups answer not_ready at once within one request timeout
// of the last read that succeeded, before any hanging read has failed,
// not a refresh period plus a request timeout later.
func TestUnreadyWithinRequestTimeoutOfAHungStore(t *testing.T) {
	timing := cluster.Timing{HeartbeatInterval: time.Second, UnhealthyAfter: 4 * time.Second, LeaseTTL: 8 * time.Second}
	const rt = 1500 * time.Millisecond
	store := memory.New(memory.Options{})
	c, _, _ := newTestCoordinatorRT(t, store, timing, rt, 0, Limits{})
	runUntilCleanup(t, c)
	waitFor(t, "coordinator ready", func() bool { return c.Readiness().Ready })
	store.SetFault(fmt.Errorf("test: %w", state.ErrTimeout))
	t.Cleanup(store.ClearFault)
	faulted := time.Now()
	deadline := faulted.Add(3 * rt)
	var r Readiness
	for r = c.Readiness(); r.Ready; r = c.Readiness() {
		if time.Now().After(deadline) {
			t.Fatalf("still ready %s after the store stopped answering (request timeout %s)", time.Since(faulted), rt)
		}
		time.Sleep(5 * time.Millisecond)
	}
	unreadyAfter := time.Since(faulted)
	failedReads := testutil.ToFloat64(c.store.Failures().WithLabelValues("snapshot", "timeout"))
	if !contains(r.Reasons, "store not answering") || failedReads != 0 {
		t.Fatalf("unready after %s with reasons %q and %v failed reads: want the view unconfirmed before any hanging read failed", unreadyAfter, r.Reasons, failedReads)
	}
	began := time.Now()
	_, _, err := c.Lookup(context.Background(), "k", 1)
	took := time.Since(began)
	if !protocol.IsCode(err, protocol.CodeNotReady) || took > rt/2 {
		t.Fatalf("lookup while unconfirmed: %v after %s, want not_ready without waiting for a read", err, took)
	}
	t.Logf("unready %s after the store stopped answering (request timeout %s); not_ready lookup in %s", unreadyAfter.Round(time.Millisecond), rt, took)
	store.ClearFault()
	waitFor(t, "ready again", func() bool { return c.Readiness().Ready })
}

// denyingStore refuses upserts of the nodes in deny (all nodes when all
// is set) with state.ErrPermissionDenied, as an API server does while its
// RBAC caches sync at startup, or for good for a key the rules leave out.
type denyingStore struct {
	*memory.Store
	all  atomic.Bool
	deny string
}

func (s *denyingStore) UpsertNode(ctx context.Context, rec *cluster.Record, ttl time.Duration, opts ...state.UpsertOption) (state.WriteResult, error) {
	if s.all.Load() || rec.NodeID == s.deny {
		return state.WriteResult{}, fmt.Errorf("test store upsert %s: %w", rec.NodeID, state.ErrPermissionDenied)
	}
	return s.Store.UpsertNode(ctx, rec, ttl, opts...)
}

// TestTransientAuthorizationIsRetryable: while the store refuses the
// coordinator's own writes too, a worker's write gets the retryable
// not_ready (go elsewhere, retry); once its own writes pass, a refusal of
// the worker's write is permanent and names what is missing.
func TestTransientAuthorizationIsRetryable(t *testing.T) {
	store := &denyingStore{Store: memory.New(memory.Options{}), deny: "w2"}
	store.all.Store(true)
	c, _, addr := newTestCoordinator(t, store, testTiming, 0, Limits{})
	runUntilCleanup(t, c)
	waitFor(t, "first view", func() bool { return c.current() })
	cn := dial(t, addr)
	_, err := register(t, cn, workerRecord("w1", "i", 0))
	if !protocol.IsCode(err, protocol.CodeNotReady) || !protocol.Retryable(err) {
		t.Fatalf("register while the store refuses the coordinator's own writes: %v, want retryable not_ready", err)
	}
	store.all.Store(false)
	waitFor(t, "coordinator ready", func() bool { return c.Readiness().Ready })
	if _, err := register(t, cn, workerRecord("w1", "i", 1)); err != nil {
		t.Fatalf("register once the store accepts writes: %v", err)
	}
	_, err = register(t, cn, workerRecord("w2", "i", 0))
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodePermissionDenied || pe.Retryable || !strings.Contains(pe.Message, "w2") || !strings.Contains(pe.Message, "lacks permission") {
		t.Fatalf("register refused for its key alone: %v, want a permanent permission_denied naming w2 and what is missing", err)
	}
}

// TestPresenceGauges: the coordinator exports the coordinators expected
// and present (issue 38: a missing coordinator had no metric to alert on).
func TestPresenceGauges(t *testing.T) {
	f := startWith(t, memory.New(memory.Options{}), 0)
	value := func(name string) float64 {
		mfs, err := f.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == name {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatalf("%s not exported", name)
		return 0
	}
	waitFor(t, "own record in the view", func() bool { return value("talon_coordinators_present") == 1 })
	if got := value("talon_coordinators_expected"); got != 1 {
		t.Fatalf("talon_coordinators_expected = %v, want 1 (default)", got)
	}
}
