package worker

import (
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"time"
)

// DataLimits bound the data listener.
type DataLimits struct {
	// MaxConnections caps concurrent data connections; more are closed at
	// accept. Default 4096.
	MaxConnections int
	// IdleTimeout closes a keep-alive connection with no request for this
	// long. Default 2 minutes.
	IdleTimeout time.Duration
	// FrameTimeout bounds reading a request's headers. Default 10 s.
	FrameTimeout time.Duration
	// WriteTimeout bounds writing one response. Default 2 minutes.
	WriteTimeout time.Duration
}

func (l DataLimits) withDefaults() DataLimits {
	if l.MaxConnections <= 0 {
		l.MaxConnections = 4096
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = 2 * time.Minute
	}
	if l.FrameTimeout <= 0 {
		l.FrameTimeout = 10 * time.Second
	}
	if l.WriteTimeout <= 0 {
		l.WriteTimeout = 2 * time.Minute
	}
	return l
}

// limitListener reports the deadlines that end its connections' reads
// and writes (netlimit, beneath it, counts and caps them).
type limitListener struct {
	net.Listener
	timeout func(reason string)
}

func (l *limitListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &limitedConn{Conn: c, timeout: l.timeout}, nil
}

// limitedConn reports the first deadline that ends a read or a write.
type limitedConn struct {
	net.Conn
	timeout func(reason string)
	// readDeadline is the last read deadline set (Unix ns): net/http also
	// sets one in the past to stop a background read, which is no timeout.
	readDeadline atomic.Int64
	reported     atomic.Bool
}

// aborted is before any real deadline: net/http's "a long time ago".
var aborted = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()

// NetConn returns the connection beneath (netlimit.Promote finds its own
// through it).
func (c *limitedConn) NetConn() net.Conn { return c.Conn }

func (c *limitedConn) SetDeadline(t time.Time) error {
	c.readDeadline.Store(t.UnixNano())
	return c.Conn.SetDeadline(t)
}

func (c *limitedConn) SetReadDeadline(t time.Time) error {
	c.readDeadline.Store(t.UnixNano())
	return c.Conn.SetReadDeadline(t)
}

func (c *limitedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) && c.readDeadline.Load() > aborted {
		c.report("read")
	}
	return n, err
}

func (c *limitedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		c.report("write")
	}
	return n, err
}

// ReadFrom hands r to the connection's own ReadFrom when it has one
// (*net.TCPConn does): net/http copies a response body from an *os.File
// through it, and it is what sends a cached block with sendfile(2).
// Without it the embedded net.Conn hides that method, and every body
// would be copied through a 32 KiB user-space buffer instead.
func (c *limitedConn) ReadFrom(r io.Reader) (int64, error) {
	rf, ok := c.Conn.(io.ReaderFrom)
	if !ok {
		return io.Copy(struct{ io.Writer }{c}, r) // through Write, which reports
	}
	n, err := rf.ReadFrom(r)
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		c.report("write")
	}
	return n, err
}

func (c *limitedConn) report(reason string) {
	if c.timeout != nil && c.reported.CompareAndSwap(false, true) {
		c.timeout(reason)
	}
}
