package netlimit

import (
	"io"
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
	ReasonMaxPerIdentity       = "connections_per_identity"
)

// Limits bound one listener. A zero field means no limit of that kind.
type Limits struct {
	Max                  int
	MaxPerAddress        int
	MaxPending           int
	MaxPendingPerAddress int
	// MaxPerIdentity bounds the established connections of one identity
	// (see PromoteAs), whatever addresses they come from.
	MaxPerIdentity int
}

// Defaults derives the per-address, per-identity and pending limits from
// max, the listener's whole budget: a quarter of it may be pending, a half
// may come from one address, a quarter may be held by one identity, and
// at most 32 pending from one address.
func Defaults(max int) Limits {
	return Limits{Max: max, MaxPerAddress: max / 2, MaxPending: max / 4, MaxPendingPerAddress: min(32, max/4), MaxPerIdentity: max / 4}
}

// Listener wraps a net.Listener with Limits.
type Listener struct {
	net.Listener
	lim Limits
	// onRefuse, when set, is called with the reason of every refusal.
	onRefuse func(reason string)

	mu      sync.Mutex // guards the fields below and every Conn's state
	open    int
	pending int
	byAddr  map[netip.Addr]int
	// pendingBy holds each address's pending connections, oldest first.
	pendingBy map[netip.Addr][]*Conn
	// byIdentity counts the established connections of each identity
	// (PromoteAs).
	byIdentity map[string]int
	seq        uint64 // connections admitted
}

// Wrap returns ln limited by lim; onRefuse (optional) hears every refusal.
func Wrap(ln net.Listener, lim Limits, onRefuse func(reason string)) *Listener {
	return &Listener{Listener: ln, lim: lim, onRefuse: onRefuse, byAddr: map[netip.Addr]int{}, pendingBy: map[netip.Addr][]*Conn{}, byIdentity: map[string]int{}}
}

// Accept returns the next connection within the limits, closing and
// counting the ones past them. When the pending budget (or the whole
// budget) is full, the oldest pending connection of the address that has
// the most pending is closed to make room: a peer that completes its
// handshake in milliseconds is never the one waiting longest at the
// heaviest address, so floods from a few addresses cannot starve it, and
// a flood from many addresses costs each of them its oldest connection.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		lc := &Conn{Conn: c, l: l, addr: sourceOf(c)}
		reason, evicted := l.admit(lc)
		// Count a refusal before closing: whoever sees the close (a peer,
		// a test) then finds it counted.
		if evicted != nil {
			l.refused(ReasonMaxPending)
			_ = evicted.Conn.Close()
		}
		if reason != "" {
			l.refused(reason)
			_ = c.Close()
			continue
		}
		return lc, nil
	}
}

func (l *Listener) refused(reason string) {
	if l.onRefuse != nil {
		l.onRefuse(reason)
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

// admit counts c as pending, or returns why not; evicted is a pending
// connection it took the place of (already uncounted; the caller closes
// it).
func (l *Listener) admit(c *Conn) (reason string, evicted *Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.lim.MaxPerAddress > 0 && l.byAddr[c.addr] >= l.lim.MaxPerAddress:
		return ReasonMaxPerAddress, nil
	case l.lim.MaxPendingPerAddress > 0 && len(l.pendingBy[c.addr]) >= l.lim.MaxPendingPerAddress:
		return ReasonMaxPendingPerAddress, nil
	}
	full := l.lim.Max > 0 && l.open >= l.lim.Max
	if full || (l.lim.MaxPending > 0 && l.pending >= l.lim.MaxPending) {
		if evicted = l.victimLocked(); evicted == nil {
			return ReasonMax, nil // every connection authenticated: refuse
		}
		l.forgetLocked(evicted)
	}
	l.seq++
	c.seq = l.seq
	l.open++
	l.pending++
	l.byAddr[c.addr]++
	l.pendingBy[c.addr] = append(l.pendingBy[c.addr], c)
	return "", evicted
}

// victimLocked returns the oldest pending connection of the address with
// the most pending, or nil when none is pending.
func (l *Listener) victimLocked() *Conn {
	var worst []*Conn
	for _, q := range l.pendingBy {
		if len(q) > len(worst) || (len(q) == len(worst) && len(q) > 0 && q[0].seq < worst[0].seq) {
			worst = q
		}
	}
	if len(worst) == 0 {
		return nil
	}
	return worst[0]
}

// forgetLocked uncounts c, pending or not, and marks it closed.
func (l *Listener) forgetLocked(c *Conn) {
	switch c.state {
	case stateClosed:
		return
	case statePending:
		l.forgetPendingLocked(c)
	}
	l.open--
	if l.byAddr[c.addr] <= 1 {
		delete(l.byAddr, c.addr)
	} else {
		l.byAddr[c.addr]--
	}
	if c.identity != "" {
		if l.byIdentity[c.identity] <= 1 {
			delete(l.byIdentity, c.identity)
		} else {
			l.byIdentity[c.identity]--
		}
	}
	c.state = stateClosed
}

// Counts are a listener's connections now.
type Counts struct{ Open, Pending int }

// Counts returns the connections the listener holds now.
func (l *Listener) Counts() Counts {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Counts{Open: l.open, Pending: l.pending}
}

// IdentityCount returns the established connections identity holds now.
func (l *Listener) IdentityCount(identity string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.byIdentity[identity]
}

// Connection states, guarded by the Listener's mu.
const (
	statePending = iota
	statePromoted
	stateClosed
)

// Conn is a connection a Listener counts until it is closed.
type Conn struct {
	net.Conn
	l    *Listener
	addr netip.Addr
	seq  uint64 // accept order, for the choice of a victim
	// state is statePending, statePromoted or stateClosed, and identity
	// the one it was promoted as ("" if none); guarded by l.mu.
	state    int
	identity string
}

// Promote moves c from pending to established: its peer authenticated.
func (c *Conn) Promote() { c.PromoteAs("") }

// PromoteAs is Promote for a peer that authenticated as identity (""
// counts against no identity). It returns false, counting the refusal,
// when identity already holds MaxPerIdentity established connections: c
// stays pending and the caller closes it.
func (c *Conn) PromoteAs(identity string) bool {
	l := c.l
	l.mu.Lock()
	if c.state != statePending {
		l.mu.Unlock()
		return c.state == statePromoted
	}
	if identity != "" && l.lim.MaxPerIdentity > 0 && l.byIdentity[identity] >= l.lim.MaxPerIdentity {
		l.mu.Unlock()
		l.refused(ReasonMaxPerIdentity)
		return false
	}
	l.forgetPendingLocked(c)
	c.state, c.identity = statePromoted, identity
	if identity != "" {
		l.byIdentity[identity]++
	}
	l.mu.Unlock()
	return true
}

func (l *Listener) forgetPendingLocked(c *Conn) {
	l.pending--
	q := l.pendingBy[c.addr]
	for i, x := range q {
		if x == c {
			q = append(q[:i:i], q[i+1:]...)
			break
		}
	}
	if len(q) == 0 {
		delete(l.pendingBy, c.addr)
	} else {
		l.pendingBy[c.addr] = q
	}
}

// Close closes the connection and gives its slot back.
func (c *Conn) Close() error {
	c.l.mu.Lock()
	c.l.forgetLocked(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// ReadFrom passes to the connection beneath when it has one, so a
// *net.TCPConn keeps its sendfile and splice paths.
func (c *Conn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

// NetConn returns the connection beneath.
func (c *Conn) NetConn() net.Conn { return c.Conn }

// Promote promotes c when it is (or wraps, as a *tls.Conn does) a
// Listener's Conn; anything else is left alone.
func Promote(c net.Conn) { PromoteAs(c, "") }

// PromoteAs is Promote as identity (see Conn.PromoteAs); false means
// refused: the caller closes c. A connection that is no Listener's is
// left alone and true.
func PromoteAs(c net.Conn, identity string) bool {
	for c != nil {
		if lc, ok := c.(*Conn); ok {
			return lc.PromoteAs(identity)
		}
		nc, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return true
		}
		c = nc.NetConn()
	}
	return true
}
