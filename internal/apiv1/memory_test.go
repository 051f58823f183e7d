package apiv1

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestServerMemoryShared: two clients sharing a memory pay for a silent
// server once; the second goes to the server that answered the first, and
// a client of the silent server alone gets the remembered error at once.
func TestServerMemoryShared(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0") // accepts, never answers
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	}))
	defer ok.Close()
	hung := "http://" + ln.Addr().String()
	mem := NewServerMemory(nil)
	opts := ClientOptions{AttemptTimeout: 300 * time.Millisecond, Memory: mem}
	newClient := func(bases ...string) *Client {
		c, err := NewClient(bases, opts)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	timed := func(c *Client) (time.Duration, error) {
		start := time.Now()
		_, err := c.Healthz(context.Background())
		return time.Since(start), err
	}
	if d, err := timed(newClient(hung, ok.URL)); err != nil || d < 300*time.Millisecond {
		t.Fatalf("first client: %s, %v: want the attempt deadline paid, then an answer", d, err)
	}
	if d, err := timed(newClient(hung, ok.URL)); err != nil || d >= 300*time.Millisecond {
		t.Fatalf("second client: %s, %v: want the answering server first", d, err)
	}
	d, err := timed(newClient(hung))
	if !errors.Is(err, ErrUnavailable) || d >= 300*time.Millisecond {
		t.Fatalf("client of the silent server alone: %s, %v: want the remembered error at once", d, err)
	}
	answered, silent := mem.Snapshot()
	if answered != ok.URL || len(silent) != 1 {
		t.Fatalf("snapshot %q %v", answered, silent)
	}

	// A later run seeded with this: the silent server is probed briefly.
	later := NewServerMemory(nil)
	later.Seed(answered, silent)
	opts.Memory, opts.AttemptTimeout = later, 3*time.Second
	d, err = timed(newClient(hung))
	if !errors.Is(err, ErrUnavailable) || d < ProbeAttemptTimeout || d >= 3*time.Second {
		t.Fatalf("probe of a server silent in an earlier run: %s, %v: want ProbeAttemptTimeout", d, err)
	}
	if got := later.order([]string{hung, ok.URL}, 0); got[0] != 1 {
		t.Fatalf("order %v: want the answering server first", got)
	}
}

// TestServerMemoryHoldThenProbe: a base URL silent in this run is skipped
// for SilentHold, then probed with ProbeAttemptTimeout; an answer clears it.
func TestServerMemoryHoldThenProbe(t *testing.T) {
	now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	m := NewServerMemory(func() time.Time { return now })
	const base = "http://127.0.0.1:1"
	m.noteSilent(base, errors.New("refused"))
	if m.skip(base) == nil || m.probing(base) {
		t.Fatal("just silent: want skipped, not probed")
	}
	now = now.Add(SilentHold)
	if m.skip(base) != nil || !m.probing(base) {
		t.Fatal("after the hold: want probed")
	}
	m.noteAnswer(base)
	if m.skip(base) != nil || m.probing(base) {
		t.Fatal("answered: want neither skipped nor probed")
	}
}
