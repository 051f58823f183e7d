package netlimit

import (
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// server accepts on a limited loopback listener bound to 127.0.0.1 and
// keeps every connection until the test ends; promote says which to
// promote (by accept order).
type server struct {
	l       *Listener
	mu      sync.Mutex
	conns   []net.Conn
	refused map[string]int
	wg      sync.WaitGroup
}

func serve(t *testing.T, lim Limits, promote bool) *server {
	t.Helper()
	if !promote {
		return serveAs(t, lim, nil)
	}
	return serveAs(t, lim, func(net.Conn) string { return "" })
}

// serveAs is serve that promotes every connection as the identity
// identity gives it (nil: none is promoted), closing those refused.
func serveAs(t *testing.T, lim Limits, identity func(net.Conn) string) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{refused: map[string]int{}}
	s.l = Wrap(ln, lim, func(r string) { s.mu.Lock(); s.refused[r]++; s.mu.Unlock() })
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := s.l.Accept()
			if err != nil {
				return
			}
			if identity != nil && !PromoteAs(c, identity(c)) {
				c.Close()
				continue
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		s.l.Close()
		s.wg.Wait()
		s.mu.Lock()
		for _, c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
	})
	return s
}

// dialFrom connects from local address src and reports whether the server
// kept the connection (a refused one is closed at once: EOF).
func dialFrom(t *testing.T, src, addr string) (net.Conn, bool) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	_, err = c.Read(make([]byte, 1))
	kept := err != io.EOF
	return c, kept
}

// snapshot copies the refusals counted so far.
func (s *server) snapshot() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.refused))
	for k, v := range s.refused {
		out[k] = v
	}
	return out
}

// refusals returns the refusals counted for reason.
func (s *server) refusals(reason string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused[reason]
}

func (s *server) waitConns(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s.mu.Lock()
		got := len(s.conns)
		s.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("server accepted %d connections, want %d", got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestFloodLeavesRoomForOthers: one address's pending connections stop at
// its per-address limit; when the pending budget is full, a newcomer takes
// the place of the oldest pending connection of the heaviest address; a
// promoted connection no longer counts as pending, and a closed one gives
// its slot back.
func TestFloodLeavesRoomForOthers(t *testing.T) {
	s := serve(t, Limits{Max: 20, MaxPerAddress: 10, MaxPending: 8, MaxPendingPerAddress: 4}, false)
	addr := s.l.Addr().String()
	var flood []net.Conn
	for range 10 {
		if c, ok := dialFrom(t, "127.0.0.2", addr); ok {
			flood = append(flood, c)
		}
	}
	if len(flood) != 4 || s.refusals(ReasonMaxPendingPerAddress) != 6 {
		t.Fatalf("flood from one address: %d kept, refusals %v; want 4 kept and 6 pending_per_address", len(flood), s.snapshot())
	}
	// Other addresses fill the pending budget (8) ...
	for _, src := range []string{"127.0.0.3", "127.0.0.4"} {
		for range 2 {
			if _, ok := dialFrom(t, src, addr); !ok {
				t.Fatalf("a first connection from %s was refused: %v", src, s.snapshot())
			}
		}
	}
	// ... and a newcomer still gets in, in place of the flood's oldest.
	if _, ok := dialFrom(t, "127.0.0.5", addr); !ok || s.refusals(ReasonMaxPending) != 1 {
		t.Fatalf("past the pending budget: kept %v, refusals %v; want kept, one pending eviction", ok, s.snapshot())
	}
	_ = flood[0].SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := flood[0].Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("the oldest connection of the heaviest address: read %v, want EOF (evicted)", err)
	}
	if c := s.l.Counts(); c.Open != 8 || c.Pending != 8 {
		t.Fatalf("after the eviction: %+v, want 8 open, 8 pending", c)
	}
	s.waitConns(t, 9)
	s.mu.Lock()
	promoted := s.conns[5] // one from 127.0.0.3
	s.mu.Unlock()
	Promote(promoted)
	if c := s.l.Counts(); c.Open != 8 || c.Pending != 7 {
		t.Fatalf("after one promotion: %+v, want 8 open, 7 pending", c)
	}
	if _, ok := dialFrom(t, "127.0.0.6", addr); !ok || s.refusals(ReasonMaxPending) != 1 {
		t.Fatalf("a connection after a promotion: kept %v, refusals %v; want kept without an eviction", ok, s.snapshot())
	}
	promoted.Close()
	promoted.Close() // twice: counted once
	if c := s.l.Counts(); c.Open != 8 || c.Pending != 8 {
		t.Fatalf("after closing the promoted one: %+v, want 8 open, 8 pending", c)
	}
}

// TestEstablishedPerAddressAndTotal: promoted connections count against
// the per-address and the total limits; with none pending, a connection
// past the total is refused.
func TestEstablishedPerAddressAndTotal(t *testing.T) {
	s := serve(t, Limits{Max: 6, MaxPerAddress: 4}, true)
	addr := s.l.Addr().String()
	for i := range 5 {
		_, ok := dialFrom(t, "127.0.0.2", addr)
		if ok != (i < 4) {
			t.Fatalf("connection %d from one address kept %v", i, ok)
		}
	}
	for i := range 3 {
		_, ok := dialFrom(t, "127.0.0.3", addr)
		if ok != (i < 2) {
			t.Fatalf("connection %d from a second address kept %v (total limit 6)", i, ok)
		}
	}
	if s.refusals(ReasonMaxPerAddress) != 1 || s.refusals(ReasonMax) != 1 {
		t.Fatalf("refusals %v, want one per-address and one total", s.snapshot())
	}
}

// TestPerIdentity: one identity spread over many source addresses holds
// at most MaxPerIdentity established connections, so a fresh peer with
// another identity still gets in during the flood (per address and total
// limits alone let one credential over four addresses take every slot),
// and a closed connection gives its identity's slot back.
func TestPerIdentity(t *testing.T) {
	s := serveAs(t, Limits{Max: 8, MaxPerAddress: 4, MaxPerIdentity: 4}, func(c net.Conn) string {
		if strings.HasPrefix(c.RemoteAddr().String(), "127.0.0.9:") {
			return "client/fresh"
		}
		return "client/flood"
	})
	addr := s.l.Addr().String()
	var held []net.Conn
	for _, src := range []string{"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"} {
		for range 3 {
			if c, ok := dialFrom(t, src, addr); ok {
				held = append(held, c)
			}
		}
	}
	if len(held) != 4 || s.l.IdentityCount("client/flood") != 4 || s.refusals(ReasonMaxPerIdentity) != 8 {
		t.Fatalf("the flooding identity holds %d connections (%d counted), refusals %v; want 4 and 8 per-identity refusals",
			len(held), s.l.IdentityCount("client/flood"), s.snapshot())
	}
	if _, ok := dialFrom(t, "127.0.0.9", addr); !ok {
		t.Fatalf("a fresh identity was refused during the flood: %v", s.snapshot())
	}
	s.mu.Lock()
	s.conns[0].Close() // the server closes one of the flood's
	s.mu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for s.l.IdentityCount("client/flood") != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("a closed connection did not give its slot back: %d", s.l.IdentityCount("client/flood"))
		}
		time.Sleep(5 * time.Millisecond)
	}
}
