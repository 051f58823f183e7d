package shapeproxy

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/netutil"
)

// ListenAddr is where a Proxy listens: its own loopback address, a port
// the kernel picks.
const ListenAddr = "127.0.0.21:0"

// The defaults of a Shape, near a cloud region's object store seen from
// a host in the same region.
const (
	// DefaultLatency is the time to a response's first byte.
	DefaultLatency = 30 * time.Millisecond
	// DefaultBandwidth is the bytes per second one connection carries.
	DefaultBandwidth = 100_000_000
	// DefaultMaxConns is high enough that a benchmark's readers never
	// meet it, and bounds a client that opens connections without end.
	DefaultMaxConns = 256
)

// Shape is what a Proxy adds to its upstream. A zero field takes its
// default; a negative one turns that part off.
type Shape struct {
	// Latency holds each request this long before it is forwarded.
	Latency time.Duration
	// Bandwidth is the bytes per second each client connection carries
	// in each direction.
	Bandwidth int64
	// MaxConns caps the client connections served at once.
	MaxConns int
}

// DefaultShape is the shape of a real region's store: DefaultLatency,
// DefaultBandwidth, DefaultMaxConns.
func DefaultShape() Shape { return Shape{}.WithDefaults() }

// WithDefaults returns s with every zero field set to its default.
func (s Shape) WithDefaults() Shape {
	if s.Latency == 0 {
		s.Latency = DefaultLatency
	}
	if s.Bandwidth == 0 {
		s.Bandwidth = DefaultBandwidth
	}
	if s.MaxConns == 0 {
		s.MaxConns = DefaultMaxConns
	}
	return s
}

// String describes s (with its defaults) for a benchmark's report, such
// as "30 ms to first byte, 100 MB/s per connection, at most 256
// connections".
func (s Shape) String() string {
	s = s.WithDefaults()
	lat, bw, conns := "no added latency", "unlimited bandwidth", "no connection cap"
	if s.Latency > 0 {
		lat = fmt.Sprintf("%d ms to first byte", s.Latency.Milliseconds())
	}
	if s.Bandwidth > 0 {
		bw = fmt.Sprintf("%.0f MB/s per connection", float64(s.Bandwidth)/1e6)
	}
	if s.MaxConns > 0 {
		conns = fmt.Sprintf("at most %d connections", s.MaxConns)
	}
	return lat + ", " + bw + ", " + conns
}

// Stats are a Proxy's counts since it started.
type Stats struct {
	// Requests is the number of requests received.
	Requests int64
	// Conns is the number of client connections open now, and PeakConns
	// the most open at once.
	Conns, PeakConns int64
}

// Proxy is a shaping HTTP proxy in front of one upstream server.
type Proxy struct {
	// URL is the proxy's address, http://127.0.0.21:PORT: give it to a
	// client in place of the upstream's.
	URL   string
	shape Shape
	rp    *httputil.ReverseProxy
	srv   *http.Server
	tr    *http.Transport
	// lifetime ends the waits for bandwidth when the proxy closes;
	// cancel ends it.
	lifetime  context.Context
	cancel    context.CancelFunc
	served    chan struct{} // closed when the server's Serve returns
	closeOnce sync.Once

	requests, conns, peak atomic.Int64
}

// Start starts a Proxy in front of upstream (http://host:port) with
// shape s (zero fields at their defaults) on ListenAddr. It fails tb when
// upstream is not such a URL or the proxy cannot listen; a cleanup closes
// it.
func Start(tb testing.TB, upstream string, s Shape) *Proxy {
	tb.Helper()
	target, err := url.Parse(upstream)
	if err != nil || target.Scheme != "http" || target.Host == "" {
		tb.Fatalf("shapeproxy: upstream %q: must be http://host:port", upstream)
	}
	ln, err := net.Listen("tcp", ListenAddr)
	if err != nil {
		tb.Fatalf("shapeproxy: %v", err)
	}
	p := newProxy(target, s.WithDefaults())
	p.URL = "http://" + ln.Addr().String()
	go p.serve(ln)
	tb.Cleanup(p.Close)
	return p
}

func newProxy(target *url.URL, s Shape) *Proxy {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = max(s.MaxConns, 64)
	// The client's Accept-Encoding, not the transport's, reaches the
	// upstream: the bytes are forwarded as they are.
	tr.DisableCompression = true
	lifetime, cancel := context.WithCancel(context.Background())
	p := &Proxy{shape: s, tr: tr, lifetime: lifetime, cancel: cancel, served: make(chan struct{})}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			// The Host the client signed (AWS Signature Version 4
			// signs it), not the upstream's.
			pr.Out.Host = pr.In.Host
		},
		Transport:  tr,
		BufferPool: newBufferPool(),
		ErrorLog:   log.New(io.Discard, "", 0), // the client gets a 502
	}
	p.srv = &http.Server{
		Handler:           p,
		ReadHeaderTimeout: 10 * time.Second,
		// An idle keep-alive connection holds a slot of MaxConns until
		// it closes; a store closes idle connections too.
		IdleTimeout: 20 * time.Second,
		ConnState:   p.connState,
		ErrorLog:    log.New(io.Discard, "", 0),
	}
	return p
}

// serve runs the server on ln, capped and shaped, until Close.
func (p *Proxy) serve(ln net.Listener) {
	defer close(p.served)
	if p.shape.MaxConns > 0 {
		ln = netutil.LimitListener(ln, p.shape.MaxConns)
	}
	if p.shape.Bandwidth > 0 {
		ln = &shapedListener{Listener: ln, bandwidth: p.shape.Bandwidth, lifetime: p.lifetime}
	}
	_ = p.srv.Serve(ln) // http.ErrServerClosed after Close
}

// ServeHTTP holds the request for the shape's latency, then forwards it.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.requests.Add(1)
	if d := p.shape.Latency; d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	p.rp.ServeHTTP(w, r)
}

// connState counts the open client connections.
func (p *Proxy) connState(_ net.Conn, st http.ConnState) {
	switch st {
	case http.StateNew:
		n := p.conns.Add(1)
		for peak := p.peak.Load(); n > peak && !p.peak.CompareAndSwap(peak, n); peak = p.peak.Load() {
		}
	case http.StateClosed, http.StateHijacked:
		p.conns.Add(-1)
	}
}

// Shape returns the proxy's shape, defaults filled in.
func (p *Proxy) Shape() Shape { return p.shape }

// Stats returns the proxy's counts now.
func (p *Proxy) Stats() Stats {
	return Stats{Requests: p.requests.Load(), Conns: p.conns.Load(), PeakConns: p.peak.Load()}
}

// Close stops the proxy: the listener and every connection close, and it
// returns when the server has stopped.
func (p *Proxy) Close() {
	p.closeOnce.Do(func() {
		p.cancel()
		_ = p.srv.Close()
		<-p.served
		p.tr.CloseIdleConnections()
	})
}

// bufferPool lends the reverse proxy its copy buffers.
type bufferPool struct{ pool sync.Pool }

func newBufferPool() *bufferPool {
	return &bufferPool{pool: sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}}
}

func (b *bufferPool) Get() []byte  { return *b.pool.Get().(*[]byte) }
func (b *bufferPool) Put(x []byte) { b.pool.Put(&x) }
