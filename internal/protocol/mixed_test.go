package protocol

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"
)

// A coordinator answers a heartbeat whose record has another schema
// version, newer or older, with unsupported_version, applies nothing of
// it, and keeps serving the connection.
func TestMixedRecordVersionKeepsConnection(t *testing.T) {
	cc, sc := tcpPair(t)
	var applied atomic.Int32
	startServer(t, sc, func(m Message) (Message, error) {
		if hb, ok := m.(*Heartbeat); ok {
			if _, err := DecodeRecordPayload(hb.Record); err != nil {
				return nil, err
			}
			applied.Add(1)
			return &Ack{Outcome: OutcomeAccepted, HeartbeatIntervalMs: 5000}, nil
		}
		return coordinatorHandler(m)
	})
	c := NewConn(cc, ConnOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	for _, v := range []string{"2", "0"} {
		resp, err := c.Call(ctx, &Heartbeat{Record: recordWithVersion(t, v)})
		var e *Error
		if resp != nil || !errors.As(err, &e) {
			t.Fatalf("record version %s: Call = %v, %v; want an *Error", v, resp, err)
		}
		if e.Code != CodeUnsupportedVersion || e.Retryable || Retryable(err) {
			t.Fatalf("record version %s: %+v, want unsupported_version, not retryable", v, e)
		}
		wantContains(t, err, "record schema version "+v+" is not supported", "reads version 1")
	}
	if n := applied.Load(); n != 0 {
		t.Fatalf("%d records of unsupported versions were applied", n)
	}
	resp, err := c.Call(ctx, &Heartbeat{Record: recordWithVersion(t, "1")})
	if err != nil {
		t.Fatalf("heartbeat after refused ones: %v", err)
	}
	if ack := resp.(*Ack); ack.Outcome != OutcomeAccepted || ack.HeartbeatInterval() != 5*time.Second {
		t.Fatalf("Ack = %+v", ack)
	}
	if _, err := c.Call(ctx, &Ping{}); err != nil {
		t.Fatalf("Ping after refused heartbeats: %v", err)
	}
	if n := applied.Load(); n != 1 {
		t.Fatalf("applied %d records, want 1", n)
	}
}

// A frame of another protocol version, newer or older, is answered with an
// Error at the frozen layout under its request ID, and the connection is
// closed.
func TestMixedProtocolVersionRepliesThenCloses(t *testing.T) {
	for _, v := range []uint16{0, 2} {
		t.Run(fmt.Sprintf("version %d", v), func(t *testing.T) {
			cc, sc := tcpPair(t)
			startServer(t, sc, coordinatorHandler)
			payload := bytes.Repeat([]byte{0xee}, 200) // whatever version v means by it
			if _, err := cc.Write(rawFrame(v, TypeHeartbeat, 7, payload)); err != nil {
				t.Fatalf("write: %v", err)
			}
			_ = cc.SetReadDeadline(time.Now().Add(10 * time.Second))
			dec := NewDecoder(cc)
			f, err := dec.ReadFrame()
			if err != nil {
				t.Fatalf("ReadFrame: %v", err)
			}
			if f.Type != TypeError || f.RequestID != 7 {
				t.Fatalf("reply header %+v, want an Error for request 7", f.Header)
			}
			m, err := f.Message()
			if err != nil {
				t.Fatalf("reply: %v", err)
			}
			e := m.(*Error)
			if e.Code != CodeUnsupportedVersion || e.Retryable || e.MinVersion != MinVersion || e.MaxVersion != MaxVersion {
				t.Fatalf("reply = %+v", e)
			}
			wantContains(t, e, fmt.Sprintf("protocol schema version %d is not supported", v), "speaks version 1")
			if _, err := dec.ReadFrame(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("ReadFrame after the reply = %v, want the connection closed", err)
			}
		})
	}
}

func TestOversizeFrameRepliesThenCloses(t *testing.T) {
	cc, sc := tcpPair(t)
	startServer(t, sc, coordinatorHandler)
	if _, err := cc.Write(AppendHeader(nil, Header{Version: Version, Type: TypeRegister, RequestID: 3, Length: 1 << 30})); err != nil {
		t.Fatalf("write: %v", err)
	}
	_ = cc.SetReadDeadline(time.Now().Add(10 * time.Second))
	dec := NewDecoder(cc)
	f, err := dec.ReadFrame()
	if err != nil {
		t.Fatalf("ReadFrame: %v", err)
	}
	m, err := f.Message()
	if err != nil || f.RequestID != 3 || m.(*Error).Code != CodeTooLarge {
		t.Fatalf("reply %+v %+v, %v; want too_large for request 3", f.Header, m, err)
	}
	wantContains(t, m.(*Error), "1073741824 bytes exceeds the 65536 byte limit")
	if _, err := dec.ReadFrame(); err == nil {
		t.Fatal("connection still open after an oversize frame")
	}
}

func TestBadMagicClosesWithoutReply(t *testing.T) {
	cc, sc := tcpPair(t)
	startServer(t, sc, coordinatorHandler)
	if _, err := io.WriteString(cc, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatalf("write: %v", err)
	}
	_ = cc.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(cc)
	var ne net.Error
	if len(b) != 0 || (err != nil && errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("read %q, %v; want the connection closed with nothing sent", b, err)
	}
}

// An unknown message type or a malformed payload is answered with
// invalid_argument; the frame was read whole, so the connection stays up.
func TestPayloadErrorsKeepConnection(t *testing.T) {
	cc, sc := tcpPair(t)
	startServer(t, sc, coordinatorHandler)
	_ = cc.SetDeadline(time.Now().Add(10 * time.Second))
	enc, dec := NewEncoder(cc), NewDecoder(cc)
	frames := [][]byte{
		rawFrame(Version, 99, 1, []byte("future message")),
		rawFrame(Version, TypePlacementLookup, 2, []byte{0, 0}),
	}
	for i, fr := range frames {
		if _, err := cc.Write(fr); err != nil {
			t.Fatalf("write: %v", err)
		}
		f, err := dec.ReadFrame()
		if err != nil {
			t.Fatalf("ReadFrame: %v", err)
		}
		m, err := f.Message()
		if err != nil || f.RequestID != uint64(i+1) || m.(*Error).Code != CodeInvalidArgument {
			t.Fatalf("reply to frame %d: %+v %+v, %v; want invalid_argument", i, f.Header, m, err)
		}
	}
	if err := enc.Encode(3, &Ping{}); err != nil {
		t.Fatalf("Encode: %v", err)
	}
	if f, err := dec.ReadFrame(); err != nil || f.Type != TypePong || f.RequestID != 3 {
		t.Fatalf("Ping after payload errors: %+v, %v", f.Header, err)
	}
}
