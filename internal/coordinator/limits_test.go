package coordinator

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/protocol"
	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/state/memory"
)

func refusals(f *fixture, limit string) float64 {
	return testutil.ToFloat64(f.c.m.limitRefusals.WithLabelValues(limit))
}

// closedWithin reports whether the server closes nc within d.
func closedWithin(nc net.Conn, d time.Duration) bool {
	_ = nc.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, nc)
	return err == nil // io.Copy returns nil at EOF; a deadline is an error
}

func (c *Coordinator) openConns() int { return c.ctl.openConns() }

// TestConnectionCap: past max-connections, connections are closed at
// accept and counted; those within the cap are served (the old listener
// had no cap: 3,000 idle connections held for 47 s).
func TestConnectionCap(t *testing.T) {
	f := startLimited(t, memory.New(memory.Options{}), 0, Limits{MaxConnections: 5})
	var held []*protocol.Conn
	// Half the cap (2) from one address: five from three addresses.
	for _, src := range []string{"127.0.0.2", "127.0.0.2", "127.0.0.3", "127.0.0.3", "127.0.0.4"} {
		nc, err := (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}).Dial("tcp", f.addr)
		if err != nil {
			t.Fatal(err)
		}
		cn := protocol.NewConn(nc, protocol.ConnOptions{})
		t.Cleanup(func() { cn.Close() })
		if _, err := cn.Call(context.Background(), &protocol.Ping{}); err != nil {
			t.Fatalf("a connection within the cap: %v", err)
		}
		held = append(held, cn)
	}
	for i := range 20 {
		nc, err := (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.5")}}).Dial("tcp", f.addr)
		if err != nil {
			t.Fatal(err)
		}
		if !closedWithin(nc, 5*time.Second) {
			t.Fatalf("connection %d past the cap was not closed", 5+i)
		}
		nc.Close()
	}
	if n := refusals(f, "connections"); n != 20 {
		t.Fatalf("connections refused %v, want 20", n)
	}
	if _, err := held[0].Call(context.Background(), &protocol.Ping{}); err != nil {
		t.Fatalf("a held connection stopped working: %v", err)
	}
}

// TestSlowloris: silent connections are closed after the idle timeout and
// half-sent frames after the frame timeout, so neither pins a connection
// or its buffer (the old listener kept 2,000 half-frames, heap 25 -> 148 MB).
func TestSlowloris(t *testing.T) {
	f := startLimited(t, memory.New(memory.Options{}), 0, Limits{IdleTimeout: 300 * time.Millisecond, FrameTimeout: 200 * time.Millisecond})
	const n = 100
	var idle, half []net.Conn
	frame, err := protocol.AppendFrame(nil, 1, &protocol.Ping{})
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		a, err := net.Dial("tcp", f.addr)
		if err != nil {
			t.Fatal(err)
		}
		b, err := net.Dial("tcp", f.addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Write(frame[:len(frame)/2]); err != nil {
			t.Fatal(err)
		}
		idle, half = append(idle, a), append(half, b)
	}
	start := time.Now()
	for i := range n {
		if !closedWithin(idle[i], 5*time.Second) || !closedWithin(half[i], 5*time.Second) {
			t.Fatalf("connection pair %d still open after %s", i, time.Since(start))
		}
		idle[i].Close()
		half[i].Close()
	}
	waitFor(t, "no connection left", func() bool { return f.c.openConns() == 0 })
	if refusals(f, "idle_timeout") < n || refusals(f, "frame_timeout") < n {
		t.Fatalf("idle timeouts %v, frame timeouts %v, want %d each", refusals(f, "idle_timeout"), refusals(f, "frame_timeout"), n)
	}
}

// TestRequestIDZeroRefused: ID 0 is reserved for pushes; a request using
// it is refused and the connection closed.
func TestRequestIDZeroRefused(t *testing.T) {
	f := start(t, memory.New(memory.Options{}), 0)
	nc, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if err := protocol.NewEncoder(nc).Encode(0, &protocol.Ping{}); err != nil {
		t.Fatal(err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	fr, err := protocol.NewDecoder(nc).ReadFrame()
	if err != nil {
		t.Fatalf("no answer to request ID 0: %v", err)
	}
	msg, err := fr.Message()
	e, ok := msg.(*protocol.Error)
	if err != nil || !ok || e.Code != protocol.CodeInvalidArgument {
		t.Fatalf("answer to request ID 0: %v %v", msg, err)
	}
	if !closedWithin(nc, 5*time.Second) {
		t.Fatal("connection left open after request ID 0")
	}
	if refusals(f, "request_id") != 1 {
		t.Fatalf("request_id refusals %v", refusals(f, "request_id"))
	}
}

// TestMaxRecords: 1,000 registrations of new nodes on one connection
// against a cap of 10 records: the cluster never holds more than the cap,
// the rest are refused with resource_exhausted and counted, and a node the
// cluster holds may still register again (the old coordinator accepted
// 1,000 fake workers in 9.6 s).
func TestMaxRecords(t *testing.T) {
	store := memory.New(memory.Options{})
	// Leases long enough that no registration expires during the run (a
	// loaded machine takes seconds for the 1,000 registrations).
	f := startTimed(t, store, 0, Limits{MaxRecords: 10}, cluster.Timing{HeartbeatInterval: time.Second, UnhealthyAfter: 30 * time.Second, LeaseTTL: time.Minute})
	cn := dial(t, f.addr)
	accepted, refused := 0, 0
	for i := range 1000 {
		ack, err := register(t, cn, fakeWorker(i, "i"))
		switch {
		case err == nil && ack.Outcome == protocol.OutcomeAccepted:
			accepted++
		case protocol.IsCode(err, protocol.CodeResourceExhausted) && !protocol.Retryable(err):
			refused++
		default:
			t.Fatalf("registration %d: %v %v", i, ack, err)
		}
	}
	snap, err := store.Snapshot(context.Background(), "test")
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Records) > 10 || accepted+refused != 1000 || accepted > 9 {
		t.Fatalf("%d records stored, %d accepted, %d refused; cap 10 (one is the coordinator's own)", len(snap.Records), accepted, refused)
	}
	if got := refusals(f, "records"); got != float64(refused) {
		t.Fatalf("records refusals counted %v, want %d", got, refused)
	}
	// A node the cluster already holds is not a new record.
	if ack, err := register(t, cn, fakeWorker(0, "i2")); err != nil || ack.Outcome != protocol.OutcomeAccepted {
		t.Fatalf("re-registration of a held node at the cap: %v %v", ack, err)
	}
}

func fakeWorker(i int, incarnation string) *cluster.Record {
	r := workerRecord(fmt.Sprintf("fake-%04d", i), incarnation, 0)
	r.Address = fmt.Sprintf("127.0.0.1:%d", 10000+i)
	return r
}

// gatedStore holds worker writes until gate is closed.
type gatedStore struct {
	*memory.Store
	gate chan struct{}
}

func (s *gatedStore) UpsertNode(ctx context.Context, rec *cluster.Record, ttl time.Duration, opts ...state.UpsertOption) (state.WriteResult, error) {
	if rec.Role == cluster.RoleWorker {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return state.WriteResult{}, ctx.Err()
		}
	}
	return s.Store.UpsertNode(ctx, rec, ttl, opts...)
}

// TestWriteAdmission: with every store-write slot taken, a further write
// waits AdmissionWait and is refused with the retryable unavailable code
// and counted, instead of queueing without bound; the held one completes.
func TestWriteAdmission(t *testing.T) {
	store := &gatedStore{Store: memory.New(memory.Options{}), gate: make(chan struct{})}
	t.Cleanup(func() { store.Close() })
	f := startLimited(t, store, 0, Limits{MaxInflightWrites: 1, AdmissionWait: 50 * time.Millisecond})
	first := make(chan error, 1)
	go func() {
		_, err := register(t, dial(t, f.addr), fakeWorker(1, "i"))
		first <- err
	}()
	waitFor(t, "the first write holds the slot", func() bool { return len(f.c.ctl.h.(*handler).writeSlots) == 1 })
	_, err := register(t, dial(t, f.addr), fakeWorker(2, "i"))
	if !protocol.IsCode(err, protocol.CodeUnavailable) || !protocol.Retryable(err) {
		t.Fatalf("write past the limit: %v, want retryable unavailable", err)
	}
	if got := refusals(f, "inflight_writes"); got != 1 {
		t.Fatalf("inflight_writes refusals %v, want 1", got)
	}
	close(store.gate)
	if err := <-first; err != nil {
		t.Fatalf("the admitted write: %v", err)
	}
}

// TestHeartbeatAgeHistogram: each accepted heartbeat observes how old the
// node's record was in the coordinator's view.
func TestHeartbeatAgeHistogram(t *testing.T) {
	f := start(t, memory.New(memory.Options{}), 0)
	cn := dial(t, f.addr)
	rec := workerRecord("w1", "i", 0)
	if _, err := register(t, cn, rec); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "w1 in the view", func() bool {
		owners, _, err := f.c.Lookup(context.Background(), "k#0", 1)
		return err == nil && len(owners) == 1
	})
	time.Sleep(150 * time.Millisecond)
	rec.HeartbeatSeq = 1
	if ack, err := heartbeat(t, cn, rec); err != nil || ack.Outcome != protocol.OutcomeAccepted {
		t.Fatalf("heartbeat: %v %v", ack, err)
	}
	var m dto.Metric
	if err := f.c.m.heartbeatAge.Write(&m); err != nil {
		t.Fatal(err)
	}
	h := m.GetHistogram()
	if h.GetSampleCount() != 1 || h.GetSampleSum() < 0.1 || h.GetSampleSum() > 10 {
		t.Fatalf("heartbeat age histogram: %d samples, sum %gs; want one of about 0.15s", h.GetSampleCount(), h.GetSampleSum())
	}
}

// TestPerAddressCap: one source address gets half of max-connections;
// another address is still served.
func TestPerAddressCap(t *testing.T) {
	f := startLimited(t, memory.New(memory.Options{}), 0, Limits{MaxConnections: 8})
	from := func(src string) (*protocol.Conn, error) {
		nc, err := (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}).Dial("tcp", f.addr)
		if err != nil {
			t.Fatal(err)
		}
		cn := protocol.NewConn(nc, protocol.ConnOptions{})
		t.Cleanup(func() { cn.Close() })
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = cn.Call(ctx, &protocol.Ping{})
		return cn, err
	}
	for i := range 6 {
		_, err := from("127.0.0.2")
		if (err == nil) != (i < 4) {
			t.Fatalf("connection %d from one address: %v", i, err)
		}
	}
	if _, err := from("127.0.0.3"); err != nil {
		t.Fatalf("another address after one address's flood: %v", err)
	}
	if n := refusals(f, "connections_per_address"); n != 2 {
		t.Fatalf("per-address refusals %v, want 2", n)
	}
}

// TestWriteRatePerNode: one node writing far faster than its heartbeat
// interval is refused past its burst with a retryable resource_exhausted
// naming the wait, and counted; another node is not affected, and the
// node is served again once its bucket refills.
func TestWriteRatePerNode(t *testing.T) {
	f := start(t, memory.New(memory.Options{}), 0)
	cn := dial(t, f.addr)
	if _, err := register(t, cn, workerRecord("w1", "i", 0)); err != nil {
		t.Fatal(err)
	}
	accepted, refused := 0, 0
	var last error
	for seq := uint64(1); seq <= 200; seq++ {
		_, err := heartbeat(t, cn, workerRecord("w1", "i", seq))
		switch {
		case err == nil:
			accepted++
		case protocol.IsCode(err, protocol.CodeResourceExhausted) && protocol.Retryable(err):
			refused++
			last = err
		default:
			t.Fatalf("heartbeat %d: %v", seq, err)
		}
	}
	if burst := writeBurstIntervals * DefaultNodeWritesPerInterval; accepted > burst+20 || refused < 100 || !strings.Contains(last.Error(), "retry in") {
		t.Fatalf("200 heartbeats at once: %d accepted, %d refused (last %v); want about the burst of %d accepted, the rest refused with a wait", accepted, refused, last, writeBurstIntervals*DefaultNodeWritesPerInterval)
	}
	if n := refusals(f, "write_rate"); int(n) != refused {
		t.Fatalf("write_rate refusals counted %v, want %d", n, refused)
	}
	if _, err := register(t, cn, workerRecord("w2", "i", 0)); err != nil {
		t.Fatalf("another node while w1 is limited: %v", err)
	}
	time.Sleep(50 * time.Millisecond) // 5 tokens
	if _, err := heartbeat(t, cn, workerRecord("w1", "i", 1000)); err != nil {
		t.Fatalf("w1 after its bucket refilled: %v", err)
	}
}
