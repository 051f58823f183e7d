package protocol

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/talonhq/talon/internal/cluster"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testRecord() *cluster.Record {
	return &cluster.Record{
		ClusterID:       "prod",
		NodeID:          "worker-1",
		Role:            cluster.RoleWorker,
		IncarnationID:   "3f2a9c",
		Address:         "10.0.0.1:7500",
		AdminAddress:    "10.0.0.1:7501",
		Version:         "v1.2.3",
		StartTimeUnixMs: 1_700_000_000_000,
		HeartbeatSeq:    7,
		Health:          cluster.HealthHealthy,
		Ready:           true,
		Capacity:        cluster.Capacity{CapacityBytes: 1 << 30, ResidentBytes: 1 << 20, Blocks: 4},
		Counters:        cluster.Counters{RequestsTotal: 10, HitsTotal: 6, MissesTotal: 4},
		Labels:          map[string]string{"zone": "a", "region": "eu-west-1"},
	}
}

func encodedRecord(t testing.TB, r *cluster.Record) []byte {
	t.Helper()
	b, err := cluster.Encode(r)
	if err != nil {
		t.Fatalf("cluster.Encode: %v", err)
	}
	return b
}

// recordWithVersion returns the encoding of a valid record with its
// schemaVersion replaced by v, as a build of another record schema would
// write it.
func recordWithVersion(t testing.TB, v string) []byte {
	t.Helper()
	b := encodedRecord(t, testRecord())
	const field = `"schemaVersion":1`
	if !bytes.Contains(b, []byte(field)) {
		t.Fatalf("record encoding %s has no %s", b, field)
	}
	return bytes.Replace(b, []byte(field), []byte(`"schemaVersion":`+v), 1)
}

// sampleMessages holds one message of every type with every field set.
func sampleMessages(t testing.TB) []Message {
	rec := encodedRecord(t, testRecord())
	return []Message{
		&Error{Code: CodeNotReady, Retryable: true, MinVersion: 1, MaxVersion: 1, Message: "no current snapshot: state store timeout"},
		&Ping{},
		&Pong{},
		&Register{Record: rec},
		&Heartbeat{Record: rec},
		&Deregister{ClusterID: "prod", Role: cluster.RoleWorker, NodeID: "worker-1", IncarnationID: "3f2a9c"},
		&Ack{Outcome: OutcomeDuplicate, Retry: true, HeartbeatIntervalMs: 5000, LeaseTTLMs: 30000, UpdatedAtUnixMs: 1_700_000_005_000, Revision: "48213"},
		&Subscribe{},
		&EpochBump{Version: 0x0123456789abcdef},
		&PlacementLookup{Key: []byte("bucket/object#block-17"), Replicas: 3},
		&PlacementResponse{Version: 0xfedcba9876543210, Owners: []Owner{
			{NodeID: "worker-1", DataAddress: "10.0.0.1:7500"},
			{NodeID: "worker-2", DataAddress: "10.0.0.2:7500"},
		}},
	}
}

func mustAppend(t testing.TB, m Message) []byte {
	t.Helper()
	b, err := m.AppendBinary(nil)
	if err != nil {
		t.Fatalf("%s.AppendBinary: %v", m.Type(), err)
	}
	return b
}

func mustFrame(t testing.TB, id uint64, m Message) []byte {
	t.Helper()
	b, err := AppendFrame(nil, id, m)
	if err != nil {
		t.Fatalf("AppendFrame(%s): %v", m.Type(), err)
	}
	return b
}

// rawFrame builds a frame with an arbitrary header, for frames this build
// would never write.
func rawFrame(version uint16, typ Type, id uint64, payload []byte) []byte {
	b := AppendHeader(nil, Header{Version: version, Type: typ, RequestID: id, Length: uint32(len(payload))})
	return append(b, payload...)
}

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	defer ln.Close()
	type res struct {
		c   net.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := ln.Accept()
		ch <- res{c, err}
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	r := <-ch
	if r.err != nil {
		t.Fatalf("accept: %v", r.err)
	}
	t.Cleanup(func() { client.Close(); r.c.Close() })
	return client, r.c
}

// testServer is a minimal coordinator loop that follows the rules of
// doc.go using only the package's exported policy: FrameErrorReply for
// frames that cannot be read, ErrorOf for everything else.
type testServer struct {
	nc   net.Conn
	mu   sync.Mutex // guards enc: the loop and push write concurrently
	enc  *Encoder
	done chan struct{}
}

func startServer(t *testing.T, nc net.Conn, handle func(Message) (Message, error)) *testServer {
	t.Helper()
	s := &testServer{nc: nc, enc: NewEncoder(nc), done: make(chan struct{})}
	go s.loop(handle)
	t.Cleanup(func() {
		nc.Close()
		<-s.done
	})
	return s
}

func (s *testServer) write(id uint64, m Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.enc.Encode(id, m)
}

func (s *testServer) loop(handle func(Message) (Message, error)) {
	defer close(s.done)
	dec := NewDecoder(bufio.NewReader(s.nc))
	for {
		f, err := dec.ReadFrame()
		if err != nil {
			if reply := FrameErrorReply(err); reply != nil {
				_ = s.write(f.RequestID, reply)
			}
			if tc, ok := s.nc.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
			s.nc.Close()
			return
		}
		m, err := f.Message()
		var resp Message
		if err == nil {
			resp, err = handle(m)
		}
		if err != nil {
			resp = ErrorOf(err)
		}
		if resp != nil {
			if err := s.write(f.RequestID, resp); err != nil {
				return
			}
		}
	}
}

// coordinatorHandler answers like a coordinator whose store accepts
// everything.
func coordinatorHandler(m Message) (Message, error) {
	switch m := m.(type) {
	case *Ping:
		return &Pong{}, nil
	case *Heartbeat:
		if _, err := DecodeRecordPayload(m.Record); err != nil {
			return nil, err
		}
		return &Ack{Outcome: OutcomeAccepted, HeartbeatIntervalMs: 5000}, nil
	case *Register:
		if _, err := DecodeRecordPayload(m.Record); err != nil {
			return nil, err
		}
		return &Ack{Outcome: OutcomeAccepted, HeartbeatIntervalMs: 5000}, nil
	case *Subscribe:
		return &EpochBump{Version: 42}, nil
	}
	return nil, NewError(CodeInvalidArgument, "%s is not a request", m.Type())
}

func wantErrIs(t *testing.T, err error, targets ...error) {
	t.Helper()
	for _, target := range targets {
		if !errors.Is(err, target) {
			t.Fatalf("error %v: errors.Is(%v) = false", err, target)
		}
	}
}

func wantContains(t *testing.T, err error, subs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("error = nil, want one containing %q", subs)
	}
	for _, s := range subs {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("error %q does not contain %q", err, s)
		}
	}
}
