package client_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/protocol"
)

// TestOnConnect: the hook runs once per new connection before its first
// request, a pooled connection is reused while its validity lasts past
// ConnRenewMargin and replaced by a new one (the hook runs again) after,
// and a hook's error fails the attempt without a request on that
// connection.
func TestOnConnect(t *testing.T) {
	addr, _ := coord(t, "w1")
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	var calls atomic.Int32
	var fail atomic.Bool
	c, err := client.New(client.Options{Coordinators: []string{addr}, Clock: clock, Retries: -1,
		OnConnect: func(ctx context.Context, cn *protocol.Conn) (time.Time, error) {
			calls.Add(1)
			if fail.Load() {
				return time.Time{}, errors.New("no token")
			}
			if _, err := cn.Call(ctx, &protocol.Ping{}); err != nil { // the connection works before the first request
				return time.Time{}, err
			}
			return clock().Add(time.Minute), nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ping := func() error {
		_, err := c.Call(context.Background(), &protocol.Ping{})
		return err
	}
	for range 3 {
		if err := ping(); err != nil {
			t.Fatal(err)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("OnConnect ran %d times for three calls on one pooled connection, want 1", n)
	}
	now.Add(int64(time.Minute - client.ConnRenewMargin + time.Second)) // inside the renewal margin
	if err := ping(); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("OnConnect ran %d times after the validity neared its end, want 2 (a new connection)", n)
	}
	now.Add(int64(20 * time.Second)) // the new connection (valid a minute from its dial) is still outside the margin
	fail.Store(true)
	if err := ping(); err != nil {
		t.Fatalf("a valid pooled connection was not reused: %v", err)
	}
	now.Add(int64(time.Minute))
	if err := ping(); err == nil || calls.Load() != 3 {
		t.Fatalf("with the hook failing: call %v, hook ran %d times; want the hook's error from a third connection", err, calls.Load())
	}
}
