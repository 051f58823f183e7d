package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/talonhq/talon/internal/datav1"
	"github.com/talonhq/talon/internal/netlimit"
	"github.com/talonhq/talon/internal/pki"
)

// DataLimits bound the data listener.
type DataLimits struct {
	// MaxConnections caps concurrent data connections; more are closed at
	// accept. Default 4096.
	MaxConnections int
	// MaxPerCredential caps the data connections one client credential
	// holds once its first request arrives, from any addresses, so that
	// one or two credentials cannot take every slot other readers need.
	// Default a quarter of MaxConnections (at least 1).
	MaxPerCredential int
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
	if l.MaxPerCredential <= 0 {
		l.MaxPerCredential = max(1, l.MaxConnections/4)
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

// Refusal reason of a data connection that presented a worker's
// credential (talon_worker_data_connections_refused_total{reason}; the
// others are netlimit's).
const reasonWorkerCredential = "worker_credential"

// refusalReasons is the bounded set of the refusal metric's labels.
var refusalReasons = []string{netlimit.ReasonMax, netlimit.ReasonMaxPerAddress, netlimit.ReasonMaxPending,
	netlimit.ReasonMaxPendingPerAddress, netlimit.ReasonMaxPerIdentity, reasonWorkerCredential}

// connKey is the context key of a data connection's *dataConn.
type connKey struct{}

// dataConn is one data connection's admission state. Its requests come
// one at a time (HTTP/1.1), so the fields need no lock.
type dataConn struct {
	nc       net.Conn
	admitted bool
}

// withConn is the data server's ConnContext: each connection carries its
// admission state to the handler.
func withConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, &dataConn{nc: c})
}

// admission admits a data connection on its first request, before any
// other handler sees it: a worker's credential is refused (workers read
// no other worker's data: no path of Talon's needs it, and colluding
// workers could otherwise take an honest owner's slots and silence it),
// and a client credential counts against its share (MaxPerCredential)
// from then on. A refused connection gets an error answer that names the
// rule, and is closed after it.
type admission struct {
	next     http.Handler
	perCred  int
	refused  func(reason string)
	insecure bool // a plain listener: no credentials to tell apart
}

func (a *admission) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	dc, _ := r.Context().Value(connKey{}).(*dataConn)
	if dc == nil || dc.admitted {
		a.next.ServeHTTP(w, r)
		return
	}
	if status, code, msg := a.admit(dc, r); status != 0 {
		w.Header().Set("Connection", "close")
		writeDataError(w, status, code, msg)
		return
	}
	dc.admitted = true
	a.next.ServeHTTP(w, r)
}

// admit promotes dc (netlimit: no longer pending) as the request's
// credential, or returns the answer that refuses it.
func (a *admission) admit(dc *dataConn, r *http.Request) (status int, code, msg string) {
	if a.insecure || r.TLS == nil {
		netlimit.Promote(dc.nc)
		return 0, "", ""
	}
	id, err := pki.PeerIdentity(r.TLS)
	if err != nil { // the handshake verified it: cannot happen
		return http.StatusForbidden, datav1.CodeForbidden, err.Error()
	}
	if id.Role == pki.RoleWorker {
		a.refused(reasonWorkerCredential)
		return http.StatusForbidden, datav1.CodeForbidden, fmt.Sprintf("credential %s is a worker's: workers do not read from other workers' data ports; read with a client credential (OU=client)", id)
	}
	if !netlimit.PromoteAs(dc.nc, id.String()) { // counted by the listener's OnRefuse
		return http.StatusTooManyRequests, datav1.CodeResourceExhausted, fmt.Sprintf("credential %s holds %d data connections on this worker, its limit (a quarter of max-connections): reuse or close its connections", id, a.perCred)
	}
	return 0, "", ""
}

// writeDataError writes a datav1 error answer (the data server's own
// form, which this listener-level refusal shares).
func writeDataError(w http.ResponseWriter, status int, code, msg string) {
	var body datav1.ErrorBody
	body.Error.Code, body.Error.Message = code, msg
	b, _ := json.Marshal(body)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)+1))
	if status == http.StatusTooManyRequests {
		h.Set("Retry-After", "1")
	}
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
