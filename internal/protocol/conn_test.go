package protocol

import (
	"context"
	"errors"
	"io"
	"net"
	"reflect"
	"testing"
	"time"
)

func pipeConn(t *testing.T, handle func(Message) (Message, error), opts ConnOptions) (*Conn, *testServer) {
	t.Helper()
	cc, sc := net.Pipe()
	s := startServer(t, sc, handle)
	c := NewConn(cc, opts)
	t.Cleanup(func() { c.Close() })
	return c, s
}

// rawServer runs fn as the server side of a pipe, for servers that break
// the rules on purpose.
func rawServer(t *testing.T, fn func(nc net.Conn, dec *Decoder)) *Conn {
	t.Helper()
	cc, sc := net.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(sc, NewDecoder(sc))
	}()
	c := NewConn(cc, ConnOptions{})
	t.Cleanup(func() {
		c.Close()
		sc.Close()
		<-done
	})
	return c
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestConnCall(t *testing.T) {
	c, _ := pipeConn(t, func(m Message) (Message, error) {
		if _, ok := m.(*PlacementLookup); ok {
			return nil, NewError(CodeNoWorkers, "no healthy worker in cluster prod")
		}
		return coordinatorHandler(m)
	}, ConnOptions{})
	ctx := testCtx(t)
	hb, err := NewHeartbeat(testRecord())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		req  Message
		want Message
		code Code
	}{
		{&Ping{}, &Pong{}, 0},
		{hb, &Ack{Outcome: OutcomeAccepted, HeartbeatIntervalMs: 5000}, 0},
		{&Subscribe{}, &EpochBump{Version: 42}, 0},
		{&PlacementLookup{Key: []byte("k"), Replicas: 2}, nil, CodeNoWorkers},
		{&Deregister{ClusterID: "prod", Role: "worker", NodeID: "w1", IncarnationID: "i"}, nil, CodeInvalidArgument},
		{&Ping{}, &Pong{}, 0},
	}
	for _, tt := range tests {
		got, err := c.Call(ctx, tt.req)
		if tt.code != 0 {
			if got != nil || !IsCode(err, tt.code) || !errors.Is(err, &Error{Code: tt.code}) {
				t.Fatalf("Call(%s) = %v, %v; want code %v", tt.req.Type(), got, err, tt.code)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Fatalf("Call(%s) = %#v, %v; want %#v", tt.req.Type(), got, err, tt.want)
		}
	}
	if _, err := c.Call(ctx, &PlacementLookup{Key: []byte("k"), Replicas: 1}); !Retryable(err) {
		t.Fatalf("no_workers from the wire: Retryable(%v) = false", err)
	}
}

func TestConnDeliversPushes(t *testing.T) {
	var got []uint64
	var s *testServer
	c, s := pipeConn(t, func(m Message) (Message, error) {
		if _, ok := m.(*Ping); ok {
			// A push written before the response is delivered first.
			if err := s.write(0, &EpochBump{Version: 7}); err != nil {
				return nil, err
			}
		}
		return coordinatorHandler(m)
	}, ConnOptions{OnEpochBump: func(b EpochBump) { got = append(got, b.Version) }})
	ctx := testCtx(t)
	if resp, err := c.Call(ctx, &Subscribe{}); err != nil || resp.(*EpochBump).Version != 42 {
		t.Fatalf("Subscribe = %v, %v", resp, err)
	}
	if len(got) != 0 {
		t.Fatalf("the Subscribe response was delivered as a push: %v", got)
	}
	if _, err := c.Call(ctx, &Ping{}); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	if !reflect.DeepEqual(got, []uint64{7}) {
		t.Fatalf("pushes during Call = %v, want [7]", got)
	}

	// Pushes with no call in flight are read by Poll.
	go func() {
		_ = s.write(0, &EpochBump{Version: 8})
		_ = s.write(0, &EpochBump{Version: 9})
	}()
	pctx, cancel := context.WithCancel(ctx)
	c.onBump = func(b EpochBump) {
		got = append(got, b.Version)
		if len(got) == 3 {
			cancel()
		}
	}
	if err := c.Poll(pctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Poll = %v, want context.Canceled", err)
	}
	if !reflect.DeepEqual(got, []uint64{7, 8, 9}) {
		t.Fatalf("pushes = %v, want [7 8 9]", got)
	}
	if _, err := c.Call(ctx, &Ping{}); err != nil {
		t.Fatalf("Ping after Poll: %v", err)
	}
}

func TestConnPollDeadline(t *testing.T) {
	c, _ := pipeConn(t, coordinatorHandler, ConnOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := c.Poll(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Poll = %v, want context.DeadlineExceeded", err)
	}
	if _, err := c.Call(testCtx(t), &Ping{}); err != nil {
		t.Fatalf("Ping after Poll timed out: %v", err)
	}
}

// A call abandoned by its context leaves the connection usable; its late
// response is discarded by the next call.
func TestConnAbandonedCall(t *testing.T) {
	for _, name := range []string{"deadline", "cancel"} {
		t.Run(name, func(t *testing.T) {
			release := make(chan struct{})
			entered := make(chan struct{}, 1)
			// Loopback TCP, not a pipe: the late response must be able to
			// sit in a socket buffer while the next request is written.
			cc, sc := tcpPair(t)
			startServer(t, sc, func(m Message) (Message, error) {
				if _, ok := m.(*PlacementLookup); ok {
					entered <- struct{}{}
					<-release
					return &PlacementResponse{Version: 1}, nil
				}
				return coordinatorHandler(m)
			})
			c := NewConn(cc, ConnOptions{})
			defer close(release)

			var ctx context.Context
			var cancel context.CancelFunc
			want := context.DeadlineExceeded
			if name == "deadline" {
				ctx, cancel = context.WithTimeout(context.Background(), 30*time.Millisecond)
			} else {
				ctx, cancel = context.WithCancel(context.Background())
				go func() { <-entered; cancel() }()
				want = context.Canceled
			}
			defer cancel()
			if resp, err := c.Call(ctx, &PlacementLookup{Key: []byte("k"), Replicas: 1}); !errors.Is(err, want) {
				t.Fatalf("Call = %v, %v; want %v", resp, err, want)
			}
			release <- struct{}{} // the server now writes the late response
			resp, err := c.Call(testCtx(t), &Ping{})
			if err != nil {
				t.Fatalf("Ping after the abandoned call: %v", err)
			}
			if _, ok := resp.(*Pong); !ok {
				t.Fatalf("Ping answered with %#v: the late response was not discarded", resp)
			}
		})
	}
}

func TestConnEncodeErrorKeepsConnection(t *testing.T) {
	c, _ := pipeConn(t, coordinatorHandler, ConnOptions{})
	ctx := testCtx(t)
	if _, err := c.Call(ctx, &PlacementLookup{}); !errors.Is(err, ErrInvalidValue) {
		t.Fatalf("Call(invalid) = %v, want ErrInvalidValue", err)
	}
	if _, err := c.Call(ctx, &Ping{}); err != nil {
		t.Fatalf("Ping after a refused encode: %v", err)
	}
}

func TestConnExpiredContext(t *testing.T) {
	c, _ := pipeConn(t, coordinatorHandler, ConnOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Call(ctx, &Ping{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Call(done ctx) = %v", err)
	}
	if err := c.Poll(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Poll(done ctx) = %v", err)
	}
}

// A server that speaks only newer versions answers with an Error frame of
// its own version; the client reads it because the Error layout is frozen.
func TestConnReadsErrorOfNewerServer(t *testing.T) {
	c := rawServer(t, func(nc net.Conn, dec *Decoder) {
		f, err := dec.ReadFrame()
		if err != nil {
			return
		}
		e := &Error{Code: CodeUnsupportedVersion, MinVersion: 2, MaxVersion: 3, Message: "protocol schema version 1 is not supported (this build speaks versions 2 to 3)"}
		b := AppendHeader(nil, Header{Version: 3, Type: TypeError, RequestID: f.RequestID, Length: uint32(len(mustAppend(t, e)))})
		_, _ = nc.Write(append(b, mustAppend(t, e)...))
		nc.Close()
	})
	_, err := c.Call(testCtx(t), &Ping{})
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeUnsupportedVersion || e.MinVersion != 2 || e.MaxVersion != 3 {
		t.Fatalf("Call = %v, want unsupported_version naming versions 2 to 3", err)
	}
	if _, err := c.Call(testCtx(t), &Ping{}); !errors.Is(err, ErrConnBroken) {
		t.Fatalf("next Call = %v, want ErrConnBroken: the server closed the connection", err)
	}
}

func TestConnBroken(t *testing.T) {
	tests := []struct {
		name   string
		server func(t *testing.T, nc net.Conn, f Frame)
		check  func(t *testing.T, err error)
	}{
		{"connection-level error", func(t *testing.T, nc net.Conn, f Frame) {
			_ = NewEncoder(nc).Encode(0, NewError(CodeDraining, "coordinator shutting down"))
		}, func(t *testing.T, err error) {
			if !IsCode(err, CodeDraining) || !Retryable(err) {
				t.Fatalf("error %v is not a retryable draining", err)
			}
		}},
		{"response to a request never sent", func(t *testing.T, nc net.Conn, f Frame) {
			_ = NewEncoder(nc).Encode(f.RequestID+5, &Pong{})
		}, func(t *testing.T, err error) { wantContains(t, err, "never sent") }},
		{"unexpected push", func(t *testing.T, nc net.Conn, f Frame) {
			_ = NewEncoder(nc).Encode(0, &Pong{})
		}, func(t *testing.T, err error) { wantContains(t, err, "unexpected pong push") }},
		{"peer closes", func(t *testing.T, nc net.Conn, f Frame) {}, func(t *testing.T, err error) {
			wantErrIs(t, err, io.EOF)
		}},
		{"newer frame version", func(t *testing.T, nc net.Conn, f Frame) {
			_, _ = nc.Write(rawFrame(2, TypePong, f.RequestID, nil))
		}, func(t *testing.T, err error) { wantErrIs(t, err, ErrUnsupportedVersion) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := rawServer(t, func(nc net.Conn, dec *Decoder) {
				f, err := dec.ReadFrame()
				if err != nil {
					return
				}
				tt.server(t, nc, f)
				nc.Close()
			})
			_, err := c.Call(testCtx(t), &Ping{})
			wantErrIs(t, err, ErrConnBroken)
			tt.check(t, err)
			// A broken connection is redialled, except when the peer
			// speaks another protocol version.
			if want := !errors.Is(err, ErrUnsupportedVersion); Retryable(err) != want {
				t.Fatalf("Retryable(%v) = %v, want %v", err, !want, want)
			}
			_, again := c.Call(testCtx(t), &Ping{})
			if again != err {
				t.Fatalf("next Call = %v, want the same terminal error %v", again, err)
			}
			if perr := c.Poll(testCtx(t)); perr != err {
				t.Fatalf("Poll = %v, want the terminal error", perr)
			}
		})
	}
}

func TestConnWrongResponseTypeKeepsConnection(t *testing.T) {
	c := rawServer(t, func(nc net.Conn, dec *Decoder) {
		enc := NewEncoder(nc)
		for {
			f, err := dec.ReadFrame()
			if err != nil {
				return
			}
			var resp Message = &Pong{}
			if f.Type == TypeSubscribe {
				resp = &Ack{Outcome: OutcomeAccepted}
			}
			if enc.Encode(f.RequestID, resp) != nil {
				return
			}
		}
	})
	if _, err := c.Call(testCtx(t), &Subscribe{}); !errors.Is(err, ErrMalformed) || errors.Is(err, ErrConnBroken) {
		t.Fatalf("Subscribe answered by Ack: %v, want ErrMalformed and a usable connection", err)
	}
	if _, err := c.Call(testCtx(t), &Ping{}); err != nil {
		t.Fatalf("Ping after the bad response: %v", err)
	}
}

func TestConnCloseInterruptsCall(t *testing.T) {
	release := make(chan struct{})
	c, _ := pipeConn(t, func(m Message) (Message, error) {
		<-release
		return &Pong{}, nil
	}, ConnOptions{})
	defer close(release)
	done := make(chan error, 1)
	go func() {
		_, err := c.Call(context.Background(), &Ping{})
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	c.Close()
	select {
	case err := <-done:
		wantErrIs(t, err, ErrConnBroken)
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not interrupt Call")
	}
}
