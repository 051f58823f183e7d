package shapeproxy

import (
	"context"
	"net"

	"golang.org/x/time/rate"
)

// maxBurst bounds the bytes a connection may send or receive at once
// beyond its rate: 64 KiB, a few hundred microseconds at 100 MB/s.
const maxBurst = 64 << 10

// burstFor is the token bucket's size at bandwidth bytes per second:
// 10 ms of it, at most maxBurst, at least one byte.
func burstFor(bandwidth int64) int {
	return int(max(1, min(bandwidth/100, maxBurst)))
}

// shapedListener gives every connection it accepts its own bandwidth.
type shapedListener struct {
	net.Listener
	bandwidth int64
	lifetime  context.Context // the proxy's: ends the waits when it closes
}

func (l *shapedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	b := burstFor(l.bandwidth)
	return &shapedConn{
		Conn: c, lifetime: l.lifetime,
		in:  rate.NewLimiter(rate.Limit(l.bandwidth), b),
		out: rate.NewLimiter(rate.Limit(l.bandwidth), b),
	}, nil
}

// shapedConn carries at most its limiters' rates: in for what it reads
// from the client, out for what it writes to it. A rate.Limiter is safe
// for concurrent use; net/http reads and writes a connection from
// different goroutines.
type shapedConn struct {
	net.Conn
	lifetime context.Context
	in, out  *rate.Limiter
}

// Read reads at most a burst, then waits until the bytes read fit the
// rate.
func (c *shapedConn) Read(b []byte) (int, error) {
	if burst := c.in.Burst(); len(b) > burst {
		b = b[:burst]
	}
	n, err := c.Conn.Read(b)
	if n > 0 {
		if werr := c.in.WaitN(c.lifetime, n); werr != nil && err == nil {
			err = werr
		}
	}
	return n, err
}

// Write writes b a burst at a time, each when the rate allows it.
func (c *shapedConn) Write(b []byte) (int, error) {
	written := 0
	for len(b) > 0 {
		k := min(len(b), c.out.Burst())
		if err := c.out.WaitN(c.lifetime, k); err != nil {
			return written, err
		}
		n, err := c.Conn.Write(b[:k])
		written += n
		if err != nil {
			return written, err
		}
		b = b[k:]
	}
	return written, nil
}
