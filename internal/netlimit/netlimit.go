// Package netlimit bounds the connections a listener holds before and
// after its peers authenticate, so that connections without credentials
// cannot take the slots, descriptors and memory that authenticated peers
// need.
//
// A Listener counts every connection it hands out until it is closed, in
// two classes: pending (accepted, the peer not yet authenticated) and
// established (Promote was called, after a TLS handshake that verified the
// peer, or the first request on a listener without client
// authentication). At accept it closes, and counts through OnRefuse, a
// connection that would pass any of:
//
//   - Limits.Max connections in all (the descriptor budget of the
//     listener);
//   - Limits.MaxPerAddress from one source IP address;
//   - Limits.MaxPending pending connections in all: the rest of Max is
//     reserved for established ones, so a flood of handshakes from many
//     addresses still leaves room for authenticated peers;
//   - Limits.MaxPendingPerAddress pending connections from one address.
//
// The server bounds how long a connection may stay pending (its handshake
// deadline); this package only counts. A Listener is safe for concurrent
// use; Conn's Promote and Close may be called from any goroutine, each
// takes effect once.
package netlimit

import (
	"net"
	"net/netip"
	"sync"
)

// Refusal reasons, for OnRefuse and metrics labels (a bounded set).
const (
	ReasonMax                  = "connections"
	ReasonMaxPerAddress        = "connections_per_address"
	ReasonMaxPending           = "pending"
	ReasonMaxPendingPerAddress = "pending_per_address"
)

// Limits bound one listener. A zero field means no limit of that kind.
type Limits struct {
	Max                  int
	MaxPerAddress        int
	MaxPending           int
	MaxPendingPerAddress int
}

// Defaults derives the per-address and pending limits from max, the
// listener's whole budget: a quarter of it may be pending, a half may come
// from one address, and at most 32 pending from one address.
func Defaults(max int) Limits {
	return Limits{Max: max, MaxPerAddress: max / 2, MaxPending: max / 4, MaxPendingPerAddress: min(32, max/4)}
}

// Listener wraps a net.Listener with Limits.
type Listener struct {
	net.Listener
	lim Limits
	// onRefuse, when set, is called with the reason of every refusal.
	onRefuse func(reason string)

	mu        sync.Mutex // guards the fields below
	open      int
	pending   int
	byAddr    map[netip.Addr]int
	pendingBy map[netip.Addr]int
}

// Wrap returns ln limited by lim; onRefuse (optional) hears every refusal.
func Wrap(ln net.Listener, lim Limits, onRefuse func(reason string)) *Listener {
	return &Listener{Listener: ln, lim: lim, onRefuse: onRefuse, byAddr: map[netip.Addr]int{}, pendingBy: map[netip.Addr]int{}}
}

// Accept returns the next connection within the limits, closing and
// counting the ones past them.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		addr := sourceOf(c)
		if reason := l.admit(addr); reason != "" {
			_ = c.Close()
			if l.onRefuse != nil {
				l.onRefuse(reason)
			}
			continue
		}
		return &Conn{Conn: c, l: l, addr: addr}, nil
	}
}

func sourceOf(c net.Conn) netip.Addr {
	if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		if a, ok := netip.AddrFromSlice(ta.IP); ok {
			return a.Unmap()
		}
	}
	return netip.Addr{}
}

// admit counts a new pending connection from addr, or returns why not.
func (l *Listener) admit(addr netip.Addr) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.lim.Max > 0 && l.open >= l.lim.Max:
		return ReasonMax
	case l.lim.MaxPerAddress > 0 && l.byAddr[addr] >= l.lim.MaxPerAddress:
		return ReasonMaxPerAddress
	case l.lim.MaxPending > 0 && l.pending >= l.lim.MaxPending:
		return ReasonMaxPending
	case l.lim.MaxPendingPerAddress > 0 && l.pendingBy[addr] >= l.lim.MaxPendingPerAddress:
		return ReasonMaxPendingPerAddress
	}
	l.open++
	l.pending++
	l.byAddr[addr]++
	l.pendingBy[addr]++
	return ""
}

// Counts are a listener's connections now.
type Counts struct{ Open, Pending int }

// Counts returns the connections the listener holds now.
func (l *Listener) Counts() Counts {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Counts{Open: l.open, Pending: l.pending}
}

// Conn is a connection a Listener counts until it is closed.
type Conn struct {
	net.Conn
	l    *Listener
	addr netip.Addr

	mu       sync.Mutex // guards the fields below
	promoted bool
	closed   bool
}

// Promote moves c from pending to established: its peer authenticated.
func (c *Conn) Promote() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.promoted || c.closed {
		return
	}
	c.promoted = true
	c.l.mu.Lock()
	c.l.pending--
	decr(c.l.pendingBy, c.addr)
	c.l.mu.Unlock()
}

// Close closes the connection and gives its slot back.
func (c *Conn) Close() error {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		c.l.mu.Lock()
		c.l.open--
		decr(c.l.byAddr, c.addr)
		if !c.promoted {
			c.l.pending--
			decr(c.l.pendingBy, c.addr)
		}
		c.l.mu.Unlock()
	}
	c.mu.Unlock()
	return c.Conn.Close()
}

func decr(m map[netip.Addr]int, a netip.Addr) {
	if m[a] <= 1 {
		delete(m, a)
		return
	}
	m[a]--
}

// Promote promotes c when it is (or wraps, as a *tls.Conn does) a
// Listener's Conn; anything else is left alone.
func Promote(c net.Conn) {
	for c != nil {
		if lc, ok := c.(*Conn); ok {
			lc.Promote()
			return
		}
		nc, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return
		}
		c = nc.NetConn()
	}
}
