package worker_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/metrics"
	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/state/memory"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/coordtest"
	"github.com/talonhq/talon/internal/worker"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var timing = cluster.Timing{HeartbeatInterval: 100 * time.Millisecond, UnhealthyAfter: 400 * time.Millisecond, LeaseTTL: 800 * time.Millisecond}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// runCoordinator runs coordinator id over store until the test ends and
// returns its control address.
func runCoordinator(t *testing.T, store state.Store, id string) string {
	t.Helper()
	return coordtest.Start(t, coordtest.Options{
		ClusterID: "test", NodeID: id, Timing: timing, RequestTimeout: 200 * time.Millisecond,
		ShutdownTimeout: time.Second, Store: store, Logger: discard(),
	}).ControlAddr
}

func newWorker(t *testing.T, coordinators []string, rotate bool) *worker.Worker {
	t.Helper()
	return newWorkerWith(t, coordinators, rotate, 0, func(*worker.Worker) http.Handler { return http.NotFoundHandler() })
}

// newWorkerWith builds a worker with a drain delay and a data handler
// that may consult the worker.
func newWorkerWith(t *testing.T, coordinators []string, rotate bool, drain time.Duration, handler func(*worker.Worker) http.Handler) *worker.Worker {
	t.Helper()
	return newWorkerStatus(t, coordinators, rotate, drain, handler, nil)
}

func newWorkerStatus(t *testing.T, coordinators []string, rotate bool, drain time.Duration, handler func(*worker.Worker) http.Handler, status worker.StatusSource) *worker.Worker {
	t.Helper()
	return newWorkerOpts(t, coordinators, rotate, drain, handler, func(o *worker.Options) { o.Status = status })
}

func newWorkerOpts(t *testing.T, coordinators []string, rotate bool, drain time.Duration, handler func(*worker.Worker) http.Handler, edit func(*worker.Options)) *worker.Worker {
	t.Helper()
	var w *worker.Worker
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(client.Options{Coordinators: coordinators})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	proc, _ := metrics.NewProcess(prometheus.NewRegistry(), "worker")
	o := worker.Options{
		ClusterID: "test", NodeID: "w1", Coordinators: coordinators, Rotate: rotate, Timing: timing,
		RequestTimeout: 300 * time.Millisecond, ShutdownTimeout: time.Second, DrainDelay: drain,
		DataListener: ln, DataHandler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { handler(w).ServeHTTP(rw, r) }), Client: cl,
		Logger: discard(), Clock: time.Now, Registerer: prometheus.NewRegistry(), Process: proc,
	}
	edit(&o)
	w, err = worker.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func find(t *testing.T, store state.Store) *cluster.Record {
	snap, err := store.Snapshot(context.Background(), "test")
	if err != nil {
		t.Fatal(err)
	}
	return snap.Find(cluster.Key{ClusterID: "test", Role: cluster.RoleWorker, NodeID: "w1"})
}

// TestRegisterHeartbeatFailoverDeregister runs a worker against a dead
// address and two live coordinators sharing one store: it registers
// through a live one, its sequence advances, it reports ready, and on
// shutdown it deregisters.
func TestRegisterHeartbeatFailoverDeregister(t *testing.T) {
	for _, rotate := range []bool{false, true} {
		t.Run(map[bool]string{false: "failover", true: "rotate"}[rotate], func(t *testing.T) {
			store := memory.New(memory.Options{})
			a := runCoordinator(t, store, "coord-a")
			b := runCoordinator(t, store, "coord-b")
			dead, _ := net.Listen("tcp", "127.0.0.1:0")
			deadAddr := dead.Addr().String()
			dead.Close()
			w := newWorker(t, []string{deadAddr, a, b}, rotate)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- w.Run(ctx) }()
			testsupport.WaitFor(t, 5*time.Second, "worker ready", func() bool { return w.Readiness().Ready })
			var first *cluster.Record
			testsupport.WaitFor(t, 5*time.Second, "record stored", func() bool { first = find(t, store); return first != nil })
			if first.IncarnationID != w.Incarnation() || !first.Ready || first.Address != w.DataAddress() {
				t.Fatalf("stored record %+v", first)
			}
			testsupport.WaitFor(t, 5*time.Second, "sequence advances", func() bool {
				r := find(t, store)
				return r != nil && r.HeartbeatSeq >= first.HeartbeatSeq+3
			})
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("Run: %v", err)
			}
			if r := find(t, store); r != nil {
				t.Fatalf("record left after clean shutdown: %+v", r)
			}
		})
	}
}

// TestNewIncarnationEachStart checks a restarted worker is accepted at once
// with a new incarnation, even though its sequence starts again at 0.
func TestNewIncarnationEachStart(t *testing.T) {
	store := memory.New(memory.Options{})
	a := runCoordinator(t, store, "coord-a")
	var incs []string
	for range 2 {
		w := newWorker(t, []string{a}, false)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		testsupport.WaitFor(t, 5*time.Second, "record of this incarnation", func() bool {
			r := find(t, store)
			return r != nil && r.IncarnationID == w.Incarnation()
		})
		incs = append(incs, w.Incarnation())
		cancel()
		<-done
	}
	if incs[0] == incs[1] {
		t.Fatal("two starts shared an incarnation ID")
	}
}

// TestDrainKeepsServingData: on shutdown the worker turns unready at once
// but keeps answering data requests for the drain delay.
func TestDrainKeepsServingData(t *testing.T) {
	store := memory.New(memory.Options{})
	a := runCoordinator(t, store, "coord-a")
	w := newWorkerWith(t, []string{a}, false, 800*time.Millisecond, func(w *worker.Worker) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
			if !w.Serving() {
				rw.WriteHeader(http.StatusServiceUnavailable)
			}
		})
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	testsupport.WaitFor(t, 5*time.Second, "worker ready", func() bool { return w.Readiness().Ready })
	cancel()
	testsupport.WaitFor(t, 5*time.Second, "unready", func() bool { return !w.Readiness().Ready })
	resp, err := http.Get("http://" + w.DataAddress() + "/v1/objects/x")
	if err != nil {
		t.Fatalf("data request during the drain delay: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("data request during the drain delay: HTTP %d, want 200", resp.StatusCode)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestDuplicateNodeIDIsReported: two live workers with one node ID. The
// one that registered last holds the slot; the other is refused, turns
// unready with a reason naming the duplicate and stops serving data,
// instead of both flapping the record (the old rule) or silently staying
// ready (the old readiness).
func TestDuplicateNodeIDIsReported(t *testing.T) {
	store := memory.New(memory.Options{})
	a := runCoordinator(t, store, "coord-a")
	first := newWorker(t, []string{a}, false)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done1 := make(chan error, 1)
	go func() { done1 <- first.Run(ctx) }()
	testsupport.WaitFor(t, 5*time.Second, "first worker ready", func() bool { return first.Readiness().Ready })

	second := newWorker(t, []string{a}, false)
	done2 := make(chan error, 1)
	go func() { done2 <- second.Run(ctx) }()
	testsupport.WaitFor(t, 5*time.Second, "second worker ready", func() bool { return second.Readiness().Ready })
	testsupport.WaitFor(t, 5*time.Second, "first worker refused", func() bool {
		rd := first.Readiness()
		return !rd.Ready && len(rd.Reasons) == 1 && strings.Contains(rd.Reasons[0], "duplicate node ID")
	})
	if first.Serving() {
		t.Fatal("a superseded worker still serves data")
	}
	// The slot stays with the later registration: no flapping.
	for range 5 {
		if r := find(t, store); r == nil || r.IncarnationID != second.Incarnation() {
			t.Fatalf("slot holds %+v, want the second worker's incarnation %s", r, second.Incarnation())
		}
		time.Sleep(timing.HeartbeatInterval)
	}
	if !second.Readiness().Ready {
		t.Fatalf("the worker holding the slot is not ready: %v", second.Readiness().Reasons)
	}
	cancel()
	<-done1
	<-done2
}

// TestReRegistersWhenTheRecordIsGone: a heartbeat for a slot with no
// record is refused (a heartbeat never creates one); the worker registers
// again at once and is ready again.
func TestReRegistersWhenTheRecordIsGone(t *testing.T) {
	store := memory.New(memory.Options{})
	a := runCoordinator(t, store, "coord-a")
	w := newWorker(t, []string{a}, false)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	testsupport.WaitFor(t, 5*time.Second, "worker ready", func() bool { return w.Readiness().Ready })
	key := cluster.Key{ClusterID: "test", Role: cluster.RoleWorker, NodeID: "w1"}
	if _, err := store.RemoveNode(context.Background(), key, w.Incarnation()); err != nil {
		t.Fatal(err)
	}
	testsupport.WaitFor(t, 5*time.Second, "record registered again", func() bool {
		r := find(t, store)
		return r != nil && r.IncarnationID == w.Incarnation() && r.Generation >= 2
	})
	testsupport.WaitFor(t, 5*time.Second, "worker ready again", func() bool { return w.Readiness().Ready })
	cancel()
	<-done
}

// backendErrors is a StatusSource whose backend error counter a test moves.
type backendErrors struct{ n atomic.Uint64 }

func (b *backendErrors) Status() (cluster.Capacity, cluster.Counters) {
	return cluster.Capacity{}, cluster.Counters{BackendErrorsTotal: b.n.Load()}
}

// TestDegradedSurvivesFailedHeartbeats: blob-store errors while heartbeats
// fail still reach the store as degraded at the next accepted heartbeat;
// a failed heartbeat does not swallow the signal.
func TestDegradedSurvivesFailedHeartbeats(t *testing.T) {
	store := memory.New(memory.Options{})
	a := runCoordinator(t, store, "coord-a")
	be := &backendErrors{}
	w := newWorkerStatus(t, []string{a}, false, 0, func(*worker.Worker) http.Handler { return http.NotFoundHandler() }, be)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	testsupport.WaitFor(t, 5*time.Second, "healthy record", func() bool {
		r := find(t, store)
		return r != nil && r.Health == cluster.HealthHealthy
	})
	store.SetFault(state.ErrUnavailable)
	be.n.Add(1)
	// Let several heartbeats fail while the error is new.
	time.Sleep(5 * timing.HeartbeatInterval)
	store.ClearFault()
	testsupport.WaitFor(t, 5*time.Second, "degraded record after recovery", func() bool {
		r := find(t, store)
		return r != nil && r.Health == cluster.HealthDegraded && r.Counters.BackendErrorsTotal == 1
	})
	// Once reported, the signal clears.
	testsupport.WaitFor(t, 5*time.Second, "healthy again", func() bool {
		r := find(t, store)
		return r != nil && r.Health == cluster.HealthHealthy
	})
	cancel()
	<-done
}

// TestDataPortLimits: the data listener closes connections past its caps
// at accept (here the 4 of 16 that may be pending, without a first
// request, from one address), and closes connections that send a partial
// request header or nothing at all within the frame timeout (the old data
// port had no idle or write timeout and no cap).
func TestDataPortLimits(t *testing.T) {
	store := memory.New(memory.Options{})
	a := runCoordinator(t, store, "coord-a")
	reg := prometheus.NewRegistry()
	w := newWorkerOpts(t, []string{a}, false, 0, func(*worker.Worker) http.Handler { return http.NotFoundHandler() }, func(o *worker.Options) {
		o.DataLimits = worker.DataLimits{MaxConnections: 16, FrameTimeout: 200 * time.Millisecond, IdleTimeout: 300 * time.Millisecond}
		o.Registerer = reg
	})
	refused := func() float64 {
		return counterValue(t, reg, "talon_worker_data_connections_refused_total", "reason", "pending_per_address")
	}
	readTimeouts := func() float64 { return counterValue(t, reg, "talon_worker_data_timeouts_total", "reason", "read") }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	testsupport.WaitFor(t, 5*time.Second, "worker ready", func() bool { return w.Readiness().Ready })
	closed := func(nc net.Conn) bool {
		_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := io.Copy(io.Discard, nc)
		return err == nil
	}
	var slow []net.Conn
	for i := range 4 {
		nc, err := net.Dial("tcp", w.DataAddress())
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			_, _ = nc.Write([]byte("GET /v1/objects/x HTTP/1.1\r\nHost: x\r\n")) // never finished
		}
		slow = append(slow, nc)
	}
	time.Sleep(50 * time.Millisecond) // the four are accepted
	extra, err := net.Dial("tcp", w.DataAddress())
	if err != nil {
		t.Fatal(err)
	}
	if !closed(extra) {
		t.Fatal("a connection past the cap was not closed")
	}
	testsupport.WaitFor(t, 5*time.Second, "the refusal counted", func() bool { return refused() == 1 })
	start := time.Now()
	for i, nc := range slow {
		if !closed(nc) {
			t.Fatalf("slow connection %d still open after %s", i, time.Since(start))
		}
		nc.Close()
	}
	// The half-sent headers hit the frame timeout, the silent ones the
	// header timeout too: four read timeouts, each counted once.
	testsupport.WaitFor(t, 5*time.Second, "read timeouts counted", func() bool { return readTimeouts() == 4 })
	cancel()
	<-done
}

// TestDiskErrorsDegradeThenUnready: new cache disk errors make the record
// degraded; DiskErrorStreak heartbeats in a row with new ones make the
// worker unready (record Ready false, so placement moves away) while it
// keeps serving; a quiet interval makes it ready again.
func TestDiskErrorsDegradeThenUnready(t *testing.T) {
	store := memory.New(memory.Options{})
	a := runCoordinator(t, store, "coord-a")
	var diskErrors, failing atomic.Int64
	w := newWorkerOpts(t, []string{a}, false, 0, func(*worker.Worker) http.Handler { return http.NotFoundHandler() }, func(o *worker.Options) {
		o.DiskErrors = func() uint64 {
			if failing.Load() == 1 {
				return uint64(diskErrors.Add(1)) // a new error each time a record is built
			}
			return uint64(diskErrors.Load())
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	testsupport.WaitFor(t, 5*time.Second, "worker ready", func() bool { return w.Readiness().Ready })
	record := func() *cluster.Record {
		snap, err := store.Snapshot(context.Background(), "test")
		if err != nil {
			t.Fatal(err)
		}
		return snap.Find(cluster.Key{ClusterID: "test", Role: cluster.RoleWorker, NodeID: w.NodeID()})
	}
	failing.Store(1)
	testsupport.WaitFor(t, 5*time.Second, "degraded record", func() bool { r := record(); return r != nil && r.Health == cluster.HealthDegraded })
	testsupport.WaitFor(t, 5*time.Second, "unready after a streak", func() bool {
		r := record()
		return !w.Readiness().Ready && r != nil && !r.Ready
	})
	if !w.Serving() {
		t.Fatal("the worker stopped serving; it should read through to the blob store")
	}
	failing.Store(0)
	testsupport.WaitFor(t, 5*time.Second, "ready again", func() bool {
		r := record()
		return w.Readiness().Ready && r != nil && r.Ready && r.Health == cluster.HealthHealthy
	})
}

// readFromConn is a TCP connection that counts the calls to its ReadFrom,
// the method net/http sends a file body through (sendfile(2)).
type readFromConn struct {
	*net.TCPConn
	calls *atomic.Int64
}

func (c readFromConn) ReadFrom(r io.Reader) (int64, error) {
	c.calls.Add(1)
	return c.TCPConn.ReadFrom(r)
}

type readFromListener struct {
	net.Listener
	calls *atomic.Int64
}

func (l readFromListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return readFromConn{TCPConn: c.(*net.TCPConn), calls: l.calls}, nil
}

// TestDataListenerKeepsSendfile: the data listener's connection wrapper
// (the connection cap and timeout reports) must not hide the connection's
// ReadFrom, or a body copied from a file is no longer sent with sendfile.
func TestDataListenerKeepsSendfile(t *testing.T) {
	store := memory.New(memory.Options{})
	a := runCoordinator(t, store, "coord-a")
	body := strings.Repeat("talon block ", 100_000)
	path := filepath.Join(t.TempDir(), "block")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	handler := func(*worker.Worker) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
			f, err := os.Open(path)
			if err != nil {
				rw.WriteHeader(http.StatusInternalServerError)
				return
			}
			defer f.Close()
			rw.Header().Set("Content-Length", strconv.Itoa(len(body)))
			_, _ = io.Copy(rw, f)
		})
	}
	w := newWorkerOpts(t, []string{a}, false, 0, handler, func(o *worker.Options) {
		o.DataListener = readFromListener{Listener: o.DataListener, calls: &calls}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get("http://" + w.DataAddress() + "/v1/objects/x")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(got) != body {
		t.Fatalf("read %d of %d bytes, error %v", len(got), len(body), err)
	}
	if calls.Load() == 0 {
		t.Fatal("the response body never reached the TCP connection's ReadFrom: it was copied through user space, not sent with sendfile")
	}
}

// TestWriteTimeoutReportedThroughSendfile: a client that stops reading
// a body sent from a file hits the write timeout inside the connection's
// ReadFrom, and the timeout is still reported as a write timeout.
func TestWriteTimeoutReportedThroughSendfile(t *testing.T) {
	store := memory.New(memory.Options{})
	a := runCoordinator(t, store, "coord-a")
	const size = 64 << 20 // more than loopback socket buffers hold
	path := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, size); err != nil { // sparse: nothing to write
		t.Fatal(err)
	}
	var calls atomic.Int64
	reg := prometheus.NewRegistry()
	handler := func(*worker.Worker) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
			f, err := os.Open(path)
			if err != nil {
				rw.WriteHeader(http.StatusInternalServerError)
				return
			}
			defer f.Close()
			rw.Header().Set("Content-Length", strconv.Itoa(size))
			_, _ = io.Copy(rw, f)
		})
	}
	w := newWorkerOpts(t, []string{a}, false, 0, handler, func(o *worker.Options) {
		o.DataListener = readFromListener{Listener: o.DataListener, calls: &calls}
		o.DataLimits = worker.DataLimits{WriteTimeout: 300 * time.Millisecond}
		o.Registerer = reg
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	nc, err := net.Dial("tcp", w.DataAddress())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Write([]byte("GET /v1/objects/big HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	// Never read: the server's sendfile blocks, then its deadline passes.
	testsupport.WaitFor(t, 10*time.Second, "the write timeout reported", func() bool { return counterValue(t, reg, "talon_worker_data_timeouts_total", "reason", "write") == 1 })
	if calls.Load() == 0 {
		t.Fatal("the body never reached the connection's ReadFrom")
	}
}

// TestAdoptsTheClustersHeartbeatInterval: a worker started with a much
// longer interval than the cluster's heartbeats at the interval every Ack
// carries, so its record never goes silent for the cluster's
// unhealthy-after: it stays healthy and its record is never marked late.
func TestAdoptsTheClustersHeartbeatInterval(t *testing.T) {
	store := memory.New(memory.Options{})
	a := runCoordinator(t, store, "coord-a")
	own := cluster.Timing{HeartbeatInterval: 5 * time.Second, UnhealthyAfter: 15 * time.Second, LeaseTTL: 30 * time.Second}
	w := newWorkerOpts(t, []string{a}, false, 0, func(*worker.Worker) http.Handler { return http.NotFoundHandler() },
		func(o *worker.Options) { o.Timing = own })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	testsupport.WaitFor(t, 5*time.Second, "worker ready", func() bool { return w.Readiness().Ready })
	first := find(t, store)
	// Ten of the cluster's intervals, a small part of the worker's own.
	window := 10 * timing.HeartbeatInterval
	deadline := time.Now().Add(window)
	for time.Now().Before(deadline) {
		r := find(t, store)
		if r == nil || r.Late || !w.Readiness().Ready {
			t.Fatalf("record %+v ready %v: a worker on the cluster's interval is never late", r, w.Readiness().Ready)
		}
		time.Sleep(timing.HeartbeatInterval / 4)
	}
	beats := find(t, store).HeartbeatSeq - first.HeartbeatSeq
	if beats < 5 {
		t.Fatalf("%d heartbeats in %s: the worker kept its own %s interval instead of the cluster's %s", beats, window, own.HeartbeatInterval, timing.HeartbeatInterval)
	}
}
