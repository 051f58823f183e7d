package coordinator

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/protocol"
	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/state/memory"
)

// rawFrame sends hdr (and payload) on a fresh connection and returns the
// Error the coordinator answers with, and whether it then closed.
func rawFrame(t *testing.T, addr string, h protocol.Header, payload []byte) (*protocol.Error, bool) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	b := protocol.AppendHeader(nil, h)
	if _, err := nc.Write(append(b, payload...)); err != nil {
		t.Fatal(err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	dec := protocol.NewDecoder(bufio.NewReader(nc))
	f, err := dec.ReadFrame()
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	m, err := f.Message()
	if err != nil {
		t.Fatalf("answer does not decode: %v", err)
	}
	e, ok := m.(*protocol.Error)
	if !ok {
		t.Fatalf("answer is %s, want an Error", f.Type)
	}
	_, err = dec.ReadFrame()
	return e, errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed)
}

// TestFrameErrorsFromTheRealServer: an unsupported protocol version and an
// oversize frame are answered with a readable Error, then the connection
// is closed; the payload of either is never read.
func TestFrameErrorsFromTheRealServer(t *testing.T) {
	f := start(t, memory.New(memory.Options{}), 0)
	e, closed := rawFrame(t, f.addr, protocol.Header{Version: 99, Type: protocol.TypePing, RequestID: 7}, nil)
	if e.Code != protocol.CodeUnsupportedVersion || !closed {
		t.Fatalf("version 99: %v (closed %v)", e, closed)
	}
	e, closed = rawFrame(t, f.addr, protocol.Header{Version: protocol.Version, Type: protocol.TypeHeartbeat, RequestID: 8, Length: protocol.MaxPayload + 1}, nil)
	if e.Code != protocol.CodeTooLarge || !closed {
		t.Fatalf("oversize frame: %v (closed %v)", e, closed)
	}
	// A truncated payload inside a valid frame is a request error; the
	// connection stays usable.
	cn := dial(t, f.addr)
	_, err := cn.Call(context.Background(), &protocol.Heartbeat{Record: []byte("{")})
	if !protocol.IsCode(err, protocol.CodeInvalidArgument) {
		t.Fatalf("garbage record: %v", err)
	}
	if _, err := cn.Call(context.Background(), &protocol.Ping{}); err != nil {
		t.Fatalf("connection unusable after a bad record: %v", err)
	}
}

func TestDeregisterOnlyWorkers(t *testing.T) {
	f := start(t, memory.New(memory.Options{}), 0)
	cn := dial(t, f.addr)
	_, err := cn.Call(context.Background(), &protocol.Deregister{ClusterID: "test", Role: cluster.RoleCoordinator, NodeID: "coord-a", IncarnationID: f.c.incarnation})
	if !protocol.IsCode(err, protocol.CodeInvalidArgument) {
		t.Fatalf("deregistering a coordinator over the control protocol: %v", err)
	}
	snap, _ := f.store.Snapshot(context.Background(), "test")
	if snap.Find(cluster.Key{ClusterID: "test", Role: cluster.RoleCoordinator, NodeID: "coord-a"}) == nil {
		t.Fatal("the coordinator's record was removed")
	}
}

// countingStore counts snapshot reads.
type countingStore struct {
	*memory.Store
	snapshots atomic.Int64
}

func (s *countingStore) Snapshot(ctx context.Context, id string) (*state.Snapshot, error) {
	s.snapshots.Add(1)
	return s.Store.Snapshot(ctx, id)
}

// TestHeartbeatsDoNotStormTheStore: plain heartbeats (sequence and
// counters only) must not each cause a snapshot read.
func TestHeartbeatsDoNotStormTheStore(t *testing.T) {
	store := &countingStore{Store: memory.New(memory.Options{})}
	f := startWith(t, store, 0)
	cn := dial(t, f.addr)
	for _, id := range []string{"w1", "w2", "w3"} {
		if _, err := register(t, cn, workerRecord(id, "i", 0)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	before := store.snapshots.Load()
	const beats = 150
	for seq := uint64(1); seq <= beats; seq++ {
		rec := workerRecord([]string{"w1", "w2", "w3"}[seq%3], "i", seq)
		rec.Counters.RequestsTotal = seq
		if _, err := heartbeat(t, cn, rec); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	reads := store.snapshots.Load() - before
	if reads >= beats/3 {
		t.Fatalf("%d snapshot reads for %d plain heartbeats", reads, beats)
	}
	t.Logf("%d snapshot reads during %d heartbeats", reads, beats)
}
