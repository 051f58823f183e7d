package coordinator

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/talonhq/talon/internal/metrics"
	"github.com/talonhq/talon/internal/netlimit"
	"github.com/talonhq/talon/internal/pki"
	"github.com/talonhq/talon/internal/protocol"
)

// pushTimeout bounds a placement-version push to one subscriber; a
// subscriber that cannot take it in time is disconnected.
const pushTimeout = time.Second

// controlHandler is what the control-protocol server asks of the
// coordinator: the view (a subscriber's first version), a placement
// lookup, the record writes (upsert, remove), each admitted within the
// write limits, and a worker connection's attestation and instructions.
// The server owns the listener, the connections, their limits, framing,
// authentication of the peer and the drain; the handler owns the
// cluster.
type controlHandler interface {
	view(ctx context.Context) error
	lookup(ctx context.Context, m *protocol.PlacementLookup) protocol.Message
	upsert(ctx context.Context, cn *conn, op string, payload []byte) protocol.Message
	remove(ctx context.Context, cn *conn, m *protocol.Deregister) protocol.Message
	attest(ctx context.Context, cn *conn, token []byte) protocol.Message
	instructions(cn *conn, m *protocol.Instructions) protocol.Message
	jobs(cn *conn, m *protocol.Jobs) protocol.Message
}

// controlServer serves the control protocol on the coordinator's
// listener: one goroutine per connection, requests answered in order,
// placement-version pushes to subscribers, and the drain on shutdown.
type controlServer struct {
	h        controlHandler
	log      *slog.Logger
	nodeID   string
	opts     controlOptions
	m        *coordMetrics
	proc     *metrics.Process
	tracer   trace.Tracer
	now      func() time.Time
	ln       *netlimit.Listener // the control listener within Limits.MaxConnections
	subs     *subscribers       // connections that asked for version pushes
	connWG   sync.WaitGroup     // connection goroutines and the accept loop
	inflight sync.WaitGroup     // requests being served

	requests      atomic.Uint64
	requestErrors atomic.Uint64

	mu      sync.Mutex // guards the fields below
	closing bool       // past the drain delay: new requests are refused
	conns   map[*conn]struct{}
}

// controlOptions are the coordinator options the server reads.
type controlOptions struct {
	Limits         Limits
	TLS            *tls.Config
	Revoked        func(*x509.Certificate) bool
	RequestTimeout time.Duration
}

// conn is one control connection.
type conn struct {
	srv *controlServer
	nc  net.Conn

	wmu sync.Mutex // guards enc and writes to nc
	enc *protocol.Encoder

	// bumps is the subscriber's one-slot mailbox: the newest placement
	// version waiting to be pushed. pusher, started on Subscribe, writes it.
	bumps chan uint64

	// peer is the verified identity of a TLS peer, and peerCert its
	// certificate, set by serveConn before the first request; nil on a
	// plain (insecure) listener.
	peer     *pki.Identity
	peerCert *x509.Certificate

	// attested is the connection's verified platform credential (Attest),
	// nil before one. Only the connection's serving goroutine reads or
	// sets it (requests on a connection are served in order).
	attested *Attestation
	// attests counts the connection's Attest requests (maxAttests).
	attests int

	// serving is set once the connection may carry frames (after the TLS
	// handshake): only then may shutdown write the drain notice to it.
	serving atomic.Bool
}

// drainNotice tells the peer, under the push request ID, that this
// coordinator is shutting down, then half-closes: the peer's protocol.Conn
// fails its pending and next call with the retryable draining code (a
// refusal: the client goes to the next address at once, without counting
// a failure) instead of finding a connection that ends mid-call. Requests
// that still arrive are answered draining until the connection closes.
func (cn *conn) drainNotice() {
	if !cn.serving.Load() {
		_ = cn.nc.Close() // still handshaking: nothing of ours was sent yet
		return
	}
	err := cn.write(0, protocol.NewError(protocol.CodeDraining, "coordinator %s is shutting down; use another coordinator", cn.srv.nodeID))
	if err != nil {
		_ = cn.nc.Close()
		return
	}
	if cw, ok := cn.nc.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

func (cn *conn) write(requestID uint64, m protocol.Message) error {
	cn.wmu.Lock()
	defer cn.wmu.Unlock()
	return cn.writeLocked(requestID, m)
}

func (cn *conn) writeLocked(requestID uint64, m protocol.Message) error {
	_ = cn.nc.SetWriteDeadline(time.Now().Add(pushTimeout + cn.srv.opts.RequestTimeout))
	return cn.enc.Encode(requestID, m)
}

// offer puts version in the mailbox, replacing an older one not yet sent.
// It never blocks.
func (cn *conn) offer(version uint64) {
	for {
		select {
		case cn.bumps <- version:
			return
		default:
		}
		select {
		case <-cn.bumps: // drop the stale one
		default:
		}
	}
}

// pusher writes mailbox versions until done closes; a subscriber that
// cannot take a push in time is disconnected.
func (cn *conn) pusher(done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		case v := <-cn.bumps:
			if err := cn.write(0, &protocol.EpochBump{Version: v}); err != nil {
				_ = cn.nc.Close()
				return
			}
		}
	}
}

func (c *controlServer) acceptLoop() {
	for {
		nc, err := c.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			c.log.Warn("accept failed", "error", err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if c.opts.TLS != nil {
			nc = tls.Server(nc, c.opts.TLS)
		}
		cn := &conn{srv: c, nc: nc, enc: protocol.NewEncoder(nc), bumps: make(chan uint64, 1)}
		c.mu.Lock()
		if c.closing {
			c.mu.Unlock()
			_ = nc.Close()
			continue
		}
		c.conns[cn] = struct{}{}
		c.mu.Unlock()
		c.connWG.Add(1)
		go func() {
			defer c.connWG.Done()
			c.serveConn(cn)
		}()
	}
}

func (c *controlServer) serveConn(cn *conn) {
	c.proc.ConnOpened("control")
	done := make(chan struct{})
	var pusherWG sync.WaitGroup
	defer func() {
		c.mu.Lock()
		delete(c.conns, cn)
		c.mu.Unlock()
		c.subs.remove(cn)
		close(done)
		_ = cn.nc.Close()
		pusherWG.Wait()
		c.proc.ConnClosed("control")
	}()
	if !c.admit(cn) {
		return
	}
	cn.serving.Store(true)
	br := bufio.NewReaderSize(cn.nc, 4096)
	dec := protocol.NewDecoder(br)
	for {
		f, ok := c.readFrame(cn, br, dec)
		if !ok {
			return
		}
		msg, err := f.Message()
		if err != nil {
			if werr := cn.write(f.RequestID, wireError(err)); werr != nil {
				return
			}
			continue
		}
		if _, ok := msg.(*protocol.Subscribe); ok {
			first, err := c.subscribe(cn, f.RequestID)
			if err != nil {
				return
			}
			if first {
				pusherWG.Add(1)
				go func() { defer pusherWG.Done(); cn.pusher(done) }()
			}
			continue
		}
		if cn.peerCert != nil && c.opts.Revoked != nil && c.opts.Revoked(cn.peerCert) {
			c.m.authRefusals.WithLabelValues("revoked").Inc()
			_ = cn.write(f.RequestID, protocol.NewError(protocol.CodePermissionDenied, "credential %s revoked: its certificate is on the deny list", cn.peer))
			return // and close: a revoked credential keeps no connection
		}
		resp := c.serveRequest(cn, f.Type, msg)
		if err := cn.write(f.RequestID, resp); err != nil {
			return
		}
	}
}

// admit completes a TLS connection's handshake, then counts the
// connection against its credential's share. Authenticated (or on a
// plain listener), it is no longer pending: one credential may hold a
// quarter of the connections, from any number of addresses
// (netlimit.Defaults), so that it cannot take every slot and keep fresh
// peers' handshakes out.
func (c *controlServer) admit(cn *conn) bool {
	if tc, ok := cn.nc.(*tls.Conn); ok && !c.handshake(cn, tc) {
		return false
	}
	identity := "" // a plain listener's peers have none
	if cn.peer != nil {
		identity = cn.peer.String()
	}
	if !netlimit.PromoteAs(cn.nc, identity) {
		c.log.Debug("control connection refused: its credential holds its share of connections", "credential", peerName(cn), "remote", cn.nc.RemoteAddr().String())
		return false
	}
	return true
}

// readFrame reads the next request frame within the connection's
// limits. It reports false when the connection must close: idle or frame
// timeout, a reserved request ID, a broken or unsupported frame (answered
// first where the protocol defines an answer), or the peer gone.
func (c *controlServer) readFrame(cn *conn, br *bufio.Reader, dec *protocol.Decoder) (protocol.Frame, bool) {
	lim := c.opts.Limits
	// Idle until a frame starts, then a bounded time for the whole
	// frame: a peer can neither hold a connection in silence nor pin
	// a half-sent frame's buffer.
	_ = cn.nc.SetReadDeadline(time.Now().Add(lim.IdleTimeout))
	if _, err := br.Peek(1); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			c.m.limitRefusals.WithLabelValues("idle_timeout").Inc()
		}
		return protocol.Frame{}, false
	}
	_ = cn.nc.SetReadDeadline(time.Now().Add(lim.FrameTimeout))
	f, err := dec.ReadFrame()
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		c.m.limitRefusals.WithLabelValues("frame_timeout").Inc()
		return f, false
	case err == nil && f.RequestID == 0:
		// Request ID 0 is reserved for pushes: an answer under it
		// would look like one. Refuse, then close.
		c.m.limitRefusals.WithLabelValues("request_id").Inc()
		_ = cn.write(0, protocol.NewError(protocol.CodeInvalidArgument, "request ID 0 is reserved for pushes; requests number from 1"))
		return f, false
	case err != nil:
		c.frameError(cn, f, err)
		return f, false
	}
	return f, true
}

// frameError answers a frame the decoder refused, where the protocol
// defines an answer (unsupported version, oversize frame: the frozen Error
// layout, then a half-close so the reply is delivered before the
// connection goes).
func (c *controlServer) frameError(cn *conn, f protocol.Frame, err error) {
	reply := protocol.FrameErrorReply(err)
	if reply == nil {
		if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
			c.log.Debug("control connection closed", "error", err)
		}
		return
	}
	if cn.write(f.RequestID, reply) != nil {
		return
	}
	if tc, ok := cn.nc.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
		_ = tc.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		_, _ = io.Copy(io.Discard, io.LimitReader(tc, protocol.MaxFrame))
	}
}

// handshake completes a TLS handshake within min(FrameTimeout,
// MaxHandshakeTime) and records the
// peer's identity (the listener's configuration verified the chain).
func (c *controlServer) handshake(cn *conn, tc *tls.Conn) bool {
	limit := min(c.opts.Limits.FrameTimeout, MaxHandshakeTime)
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	err := tc.HandshakeContext(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		c.m.limitRefusals.WithLabelValues("handshake_timeout").Inc()
	}
	var id pki.Identity
	if err == nil {
		cs := tc.ConnectionState()
		id, err = pki.PeerIdentity(&cs)
	}
	if err != nil {
		c.m.authRefusals.WithLabelValues("handshake").Inc()
		c.log.Debug("control connection refused: tls handshake", "remote", tc.RemoteAddr().String(), "error", err)
		return false
	}
	cn.peer = &id
	cn.peerCert = tc.ConnectionState().PeerCertificates[0]
	return true
}

// subscribe registers cn for placement-version pushes and answers with
// the current version. The reply is written while holding cn's write lock
// and under the same lock that registers the subscriber, so no push can
// overtake it: every later push carries a version at least as new.
func (c *controlServer) subscribe(cn *conn, requestID uint64) (first bool, err error) {
	start := c.now()
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.RequestTimeout)
	defer cancel()
	if verr := c.h.view(ctx); verr != nil {
		c.proc.Observe("subscribe", protocol.CodeNotReady.String(), c.now().Sub(start))
		return false, cn.write(requestID, protocol.NewError(protocol.CodeNotReady, "no current cluster view; retry"))
	}
	cn.wmu.Lock()
	defer cn.wmu.Unlock()
	first, v := c.subs.add(cn)
	version := uint64(v)
	select { // a pending push is no newer than version
	case <-cn.bumps:
	default:
	}
	c.proc.Observe("subscribe", "ok", c.now().Sub(start))
	return first, cn.writeLocked(requestID, &protocol.EpochBump{Version: version})
}

// serveRequest answers one request (every request but Subscribe).
func (c *controlServer) serveRequest(cn *conn, t protocol.Type, msg protocol.Message) protocol.Message {
	c.mu.Lock()
	closing := c.closing
	if !closing {
		c.inflight.Add(1)
	}
	c.mu.Unlock()
	if closing {
		return protocol.NewError(protocol.CodeDraining, "coordinator %s is shutting down; reconnect", c.nodeID)
	}
	defer c.inflight.Done()

	start := c.now()
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.RequestTimeout)
	defer cancel()
	span := trace.SpanFromContext(ctx) // a no-op span for pings
	if t != protocol.TypePing {
		ctx, span = c.tracer.Start(ctx, "control.request", trace.WithSpanKind(trace.SpanKindServer))
	}
	op, resp := c.dispatch(ctx, cn, t, msg)
	outcome := "ok"
	c.requests.Add(1)
	if e, ok := resp.(*protocol.Error); ok {
		outcome = e.Code.String()
		c.requestErrors.Add(1)
		span.SetStatus(codes.Error, e.Message)
	}
	span.SetName("control." + op)
	span.SetAttributes(attribute.String("talon.control.outcome", outcome), attribute.String("net.peer.address", cn.nc.RemoteAddr().String()))
	span.End()
	c.proc.Observe(op, outcome, c.now().Sub(start))
	return resp
}

// dispatch answers one request by its type and names its operation.
func (c *controlServer) dispatch(ctx context.Context, cn *conn, t protocol.Type, msg protocol.Message) (op string, resp protocol.Message) {
	switch m := msg.(type) {
	case *protocol.Ping:
		return "ping", &protocol.Pong{}
	case *protocol.Attest:
		return "attest", c.h.attest(ctx, cn, m.Token)
	case *protocol.Instructions:
		return "instructions", c.h.instructions(cn, m)
	case *protocol.Jobs:
		return "jobs", c.h.jobs(cn, m)
	case *protocol.Register:
		return "register", c.h.upsert(ctx, cn, "register", m.Record)
	case *protocol.Heartbeat:
		return "heartbeat", c.h.upsert(ctx, cn, "heartbeat", m.Record)
	case *protocol.Deregister:
		return "deregister", c.h.remove(ctx, cn, m)
	case *protocol.PlacementLookup:
		return "placement_lookup", c.h.lookup(ctx, m)
	default:
		return "unknown", protocol.NewError(protocol.CodeInvalidArgument, "message type %s is not a request", t)
	}
}

// start starts accepting connections.
func (c *controlServer) start() {
	c.connWG.Add(1)
	go func() { defer c.connWG.Done(); c.acceptLoop() }()
}

// stop ends the server, past the drain delay: new requests are refused
// and the listener closed; requests in flight get up to timeout; then
// every connection is told to use another coordinator (notifyDrain) and
// closed. It returns when every connection goroutine has.
func (c *controlServer) stop(timeout time.Duration) {
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	_ = c.ln.Close()
	done := make(chan struct{})
	go func() { c.inflight.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		c.log.Warn("shutdown timeout passed with requests in flight; closing connections", "shutdown_timeout", timeout)
	}
	c.notifyDrain(timeout)
	c.mu.Lock()
	for cn := range c.conns {
		_ = cn.nc.Close()
	}
	c.mu.Unlock()
	c.connWG.Wait()
	<-done
}

// drainLinger is how long a connection stays open after its drain notice:
// a request already on the wire gets the draining answer, and a peer that
// reads the notice closes first, instead of finding a reset.
const drainLinger = 200 * time.Millisecond

// notifyDrain sends every open connection the drain notice and waits up
// to drainLinger (within timeout) for their peers to close them.
func (c *controlServer) notifyDrain(timeout time.Duration) {
	c.mu.Lock()
	conns := make([]*conn, 0, len(c.conns))
	for cn := range c.conns {
		conns = append(conns, cn)
	}
	c.mu.Unlock()
	if len(conns) == 0 {
		return
	}
	for _, cn := range conns {
		cn.drainNotice()
	}
	c.log.Info("told connected clients and workers to use another coordinator", "connections", len(conns))
	deadline := time.After(min(drainLinger, timeout))
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for c.openConns() > 0 {
		select {
		case <-deadline:
			return
		case <-tick.C:
		}
	}
}

// openConns returns how many connections are open.
func (c *controlServer) openConns() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.conns)
}
