package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/talonhq/talon/internal/backoff"
	"github.com/talonhq/talon/internal/placement"
	"github.com/talonhq/talon/internal/protocol"
)

// ErrNoCoordinator is returned when no coordinator address could serve a call.
var ErrNoCoordinator = errors.New("no coordinator reachable")

// Placement is a lookup answer.
type Placement struct {
	// Owners are the workers chosen for the key, first is primary.
	Owners []placement.Owner
	// Version is the PlacementVersion the owners were computed from: an
	// equality token, never ordered.
	Version placement.Version
	// Cached reports whether the answer came from the cache.
	Cached bool
}

// Options configures a Client.
type Options struct {
	// Coordinators are control addresses host:port, tried in order; the
	// one that last answered is tried first.
	Coordinators []string
	// Dial opens a connection; default net.Dialer.DialContext.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// TLS, when set, wraps every connection Dial opens in TLS with this
	// configuration (see pki.Source.ClientConfig: mutual TLS, the peer
	// must be a coordinator). Its session cache makes reconnections
	// resume.
	TLS *tls.Config
	// CacheTTL bounds how long a cached placement is used; 0 disables the cache.
	CacheTTL time.Duration
	// MaxCacheEntries bounds the cache; default 65,536.
	MaxCacheEntries int
	// MaxIdleConns bounds pooled connections per coordinator; default 4.
	MaxIdleConns int
	// Retries is how many further attempts a retryable failure gets,
	// with jittered backoff; default 3.
	Retries int
	// WatchProbeInterval is how long a placement watch waits in silence
	// before it pings its coordinator; a coordinator that does not answer
	// the subscription or a ping within WatchProbeTimeout is left for the
	// next address. Defaults 10 s and 5 s.
	WatchProbeInterval time.Duration
	WatchProbeTimeout  time.Duration
	Clock              func() time.Time
	Logger             *slog.Logger
}

// Client looks up placements.
type Client struct {
	opts Options
	now  func() time.Time
	log  *slog.Logger

	mu      sync.Mutex // guards the fields below
	pools   map[string][]*protocol.Conn
	prefer  int // index of the coordinator that last answered
	version placement.Version
	haveVer bool
	// changes counts version changes observed, so a lookup can tell that
	// a newer version arrived while it was in flight.
	changes uint64
	cache   map[cacheKey]entry
	closed  bool
}

type cacheKey struct {
	key      string
	replicas int
}

type entry struct {
	owners  []placement.Owner
	version placement.Version
	expires time.Time
}

// New returns a client. It connects lazily.
func New(opts Options) (*Client, error) {
	if len(opts.Coordinators) == 0 {
		return nil, errors.New("client: at least one coordinator address is required")
	}
	if opts.Dial == nil {
		var d net.Dialer
		opts.Dial = d.DialContext
	}
	if opts.TLS != nil {
		opts.Dial = tlsDial(opts.Dial, opts.TLS)
	}
	if opts.MaxCacheEntries <= 0 {
		opts.MaxCacheEntries = 1 << 16
	}
	if opts.MaxIdleConns <= 0 {
		opts.MaxIdleConns = 4
	}
	if opts.Retries < 0 {
		opts.Retries = 0
	} else if opts.Retries == 0 {
		opts.Retries = 3
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.WatchProbeInterval <= 0 {
		opts.WatchProbeInterval = 10 * time.Second
	}
	if opts.WatchProbeTimeout <= 0 {
		opts.WatchProbeTimeout = 5 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Client{opts: opts, now: opts.Clock, log: opts.Logger, pools: map[string][]*protocol.Conn{}, cache: map[cacheKey]entry{}}, nil
}

// Close closes pooled connections.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for addr, conns := range c.pools {
		for _, cn := range conns {
			_ = cn.Close()
		}
		delete(c.pools, addr)
	}
	return nil
}

// Lookup returns the owners of key, from the cache when a fresh entry of
// the current version exists.
func (c *Client) Lookup(ctx context.Context, key string, replicas int) (Placement, error) {
	if replicas < 1 || replicas > protocol.MaxReplicas {
		return Placement{}, fmt.Errorf("client: replicas %d: must be from 1 to %d", replicas, protocol.MaxReplicas)
	}
	ck := cacheKey{key, replicas}
	if c.opts.CacheTTL > 0 {
		c.mu.Lock()
		e, ok := c.cache[ck]
		if ok && c.now().Before(e.expires) && (!c.haveVer || e.version == c.version) {
			c.mu.Unlock()
			return Placement{Owners: e.owners, Version: e.version, Cached: true}, nil
		}
		c.mu.Unlock()
	}
	c.mu.Lock()
	before := c.changes
	c.mu.Unlock()
	resp, err := c.call(ctx, &protocol.PlacementLookup{Key: []byte(key), Replicas: uint16(replicas)})
	if err != nil {
		return Placement{}, err
	}
	pr, ok := resp.(*protocol.PlacementResponse)
	if !ok {
		return Placement{}, fmt.Errorf("client: unexpected %s answer to a placement lookup", resp.Type())
	}
	p := placementFrom(pr)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.changes != before && c.version != p.Version {
		// Another version was observed (a push, another lookup) while this
		// one was in flight: this answer may predate it. Versions have no
		// order, so the newest observation stands; the answer is returned
		// but neither adopted nor cached.
		return p, nil
	}
	c.observeLocked(p.Version)
	if c.opts.CacheTTL > 0 {
		if len(c.cache) >= c.opts.MaxCacheEntries {
			clear(c.cache) // simple bound: a full cache starts over
		}
		c.cache[ck] = entry{owners: p.Owners, version: p.Version, expires: c.now().Add(c.opts.CacheTTL)}
	}
	return p, nil
}

// placementFrom converts a wire answer to its domain form: the one place
// where protocol.Owner becomes placement.Owner on the client side.
func placementFrom(pr *protocol.PlacementResponse) Placement {
	p := Placement{Version: placement.Version(pr.Version), Owners: make([]placement.Owner, len(pr.Owners))}
	for i, o := range pr.Owners {
		p.Owners[i] = placement.Owner{NodeID: o.NodeID, Address: o.DataAddress}
	}
	return p
}

// ObserveVersion records a PlacementVersion a coordinator sent (a lookup
// answer, a push). A version different from the current one drops every
// cached entry. A worker's version (in a wrong-owner answer) is not a
// coordinator's view and must not be observed: invalidate the key instead.
// v is the wire form (the u64 of EpochBump and PlacementResponse).
func (c *Client) ObserveVersion(v uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.observeLocked(placement.Version(v))
}

func (c *Client) observeLocked(v placement.Version) {
	if c.haveVer && c.version == v {
		return
	}
	c.version, c.haveVer = v, true
	c.changes++
	clear(c.cache)
}

// Version returns the last PlacementVersion observed, in its wire form.
func (c *Client) Version() (uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return uint64(c.version), c.haveVer
}

// Invalidate drops the cached placement of key (every replica count), for
// a connection failure, a wrong owner or a not-found answer.
func (c *Client) Invalidate(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for ck := range c.cache {
		if ck.key == key {
			delete(c.cache, ck)
		}
	}
}

// Call sends one request to a coordinator, failing over across addresses
// on connection errors and retrying retryable errors with jittered backoff.
func (c *Client) Call(ctx context.Context, req protocol.Message) (protocol.Message, error) {
	return c.call(ctx, req)
}

// Retry schedules: a request's retries across coordinators, and a placement
// watch's reconnects. Both spread by half either way, as a fleet of clients
// restarting together must not retry in step.
var (
	retryBackoff = backoff.Policy{Initial: 50 * time.Millisecond, Max: 2 * time.Second, Jitter: 0.5}
	watchBackoff = backoff.Policy{Initial: 100 * time.Millisecond, Max: 5 * time.Second, Jitter: 0.5}
)

func (c *Client) call(ctx context.Context, req protocol.Message) (protocol.Message, error) {
	var lastErr error
	retry := backoff.New(retryBackoff)
	n := len(c.opts.Coordinators)
	for attempt := 0; attempt <= c.opts.Retries; attempt++ {
		c.mu.Lock()
		first := c.prefer
		c.mu.Unlock()
		for i := range n {
			idx := (first + i) % n
			addr := c.opts.Coordinators[idx]
			resp, err := c.callOne(ctx, addr, req)
			if err == nil {
				c.mu.Lock()
				c.prefer = idx
				c.mu.Unlock()
				return resp, nil
			}
			lastErr = err
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
				// The connection deadline (the context's) passed a moment
				// before the context's own timer fired.
				return nil, context.DeadlineExceeded
			}
			var pe *protocol.Error
			if errors.As(err, &pe) {
				if !pe.Retryable {
					return nil, err
				}
				if pe.Code != protocol.CodeDraining && pe.Code != protocol.CodeNotReady && pe.Code != protocol.CodeUnavailable {
					break // retryable but not this coordinator's fault: back off first
				}
			}
			// Connection failure, draining or not-ready coordinator: try the next one.
		}
		if attempt == c.opts.Retries {
			break
		}
		if err := backoff.Sleep(ctx, retry.Next()); err != nil {
			return nil, err
		}
	}
	var pe *protocol.Error
	if errors.As(lastErr, &pe) {
		return nil, lastErr
	}
	return nil, fmt.Errorf("%w: %w", ErrNoCoordinator, lastErr)
}

// callOne makes one call on a pooled connection to addr.
func (c *Client) callOne(ctx context.Context, addr string, req protocol.Message) (protocol.Message, error) {
	cn, err := c.get(ctx, addr)
	if err != nil {
		return nil, c.hint(addr, err)
	}
	resp, err := cn.Call(ctx, req)
	var pe *protocol.Error
	if err != nil && !errors.As(err, &pe) {
		_ = cn.Close() // broken or abandoned mid-call: do not reuse
		return nil, c.hint(addr, err)
	}
	c.put(addr, cn)
	return resp, err
}

func (c *Client) get(ctx context.Context, addr string) (*protocol.Conn, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, errors.New("client: closed")
	}
	if p := c.pools[addr]; len(p) > 0 {
		cn := p[len(p)-1]
		c.pools[addr] = p[:len(p)-1]
		c.mu.Unlock()
		return cn, nil
	}
	c.mu.Unlock()
	nc, err := c.opts.Dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return protocol.NewConn(nc, protocol.ConnOptions{}), nil
}

func (c *Client) put(addr string, cn *protocol.Conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || len(c.pools[addr]) >= c.opts.MaxIdleConns {
		_ = cn.Close()
		return
	}
	c.pools[addr] = append(c.pools[addr], cn)
}

// Watch subscribes to placement-version pushes from a coordinator until
// ctx ends, failing over and reconnecting as needed, and applies each
// version to the cache. onChange, if not nil, is called with each version.
func (c *Client) Watch(ctx context.Context, onChange func(uint64)) {
	retry := backoff.New(watchBackoff)
	n := len(c.opts.Coordinators)
	for i := 0; ctx.Err() == nil; i++ {
		addr := c.opts.Coordinators[i%n]
		began := time.Now()
		err := c.watchOne(ctx, addr, onChange)
		if ctx.Err() != nil {
			return
		}
		if time.Since(began) > time.Minute {
			retry.Reset() // it was healthy: start over
		}
		c.log.Debug("placement watch interrupted", "coordinator", addr, "error", err)
		if backoff.Sleep(ctx, retry.Next()) != nil {
			return
		}
	}
}

// watchOne subscribes at addr and applies pushes until ctx ends or the
// coordinator fails: the subscription and every probe must be answered
// within WatchProbeTimeout, and after WatchProbeInterval of silence the
// watch pings, so a coordinator that accepts but never answers (or stops
// answering) is left for the next address instead of hanging the watch.
func (c *Client) watchOne(ctx context.Context, addr string, onChange func(uint64)) error {
	dctx, cancel := context.WithTimeout(ctx, c.opts.WatchProbeTimeout)
	nc, err := c.opts.Dial(dctx, "tcp", addr)
	cancel()
	if err != nil {
		return err
	}
	apply := func(v uint64) {
		c.ObserveVersion(v)
		if onChange != nil {
			onChange(v)
		}
	}
	cn := protocol.NewConn(nc, protocol.ConnOptions{OnEpochBump: func(b protocol.EpochBump) { apply(b.Version) }})
	defer cn.Close()
	probe := func(req protocol.Message) (protocol.Message, error) {
		pctx, cancel := context.WithTimeout(ctx, c.opts.WatchProbeTimeout)
		defer cancel()
		resp, err := cn.Call(pctx, req)
		if err != nil && ctx.Err() == nil {
			return nil, fmt.Errorf("coordinator %s did not answer %s within %s: %w", addr, req.Type(), c.opts.WatchProbeTimeout, err)
		}
		return resp, err
	}
	resp, err := probe(&protocol.Subscribe{})
	if err != nil {
		return err
	}
	if b, ok := resp.(*protocol.EpochBump); ok {
		apply(b.Version)
	}
	for {
		pctx, cancel := context.WithTimeout(ctx, c.opts.WatchProbeInterval)
		err := cn.Poll(pctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case !errors.Is(err, context.DeadlineExceeded):
			return err // the connection broke
		}
		if _, err := probe(&protocol.Ping{}); err != nil {
			return err
		}
	}
}

// tlsDial wraps dial: the connection is handed over after a TLS handshake
// bounded by ctx.
func tlsDial(dial func(ctx context.Context, network, addr string) (net.Conn, error), cfg *tls.Config) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		nc, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = nc.Close()
			return nil, fmt.Errorf("tls handshake with coordinator %s: %w", addr, err)
		}
		return tc, nil
	}
}

// hint explains the usual causes of a failure to talk to addr: a port that
// is not a coordinator's control port, or TLS on one side only.
func (c *Client) hint(addr string, err error) error {
	var rh tls.RecordHeaderError
	switch {
	case errors.Is(err, protocol.ErrBadMagic) && strings.Contains(err.Error(), `"HTTP"`):
		return fmt.Errorf("%s answered HTTP, not Talon's control protocol: it is an admin or data address; give coordinators' control addresses (port 7400 by default): %w", addr, err)
	case errors.Is(err, protocol.ErrBadMagic):
		return fmt.Errorf("%s is not a Talon coordinator's control port: %w", addr, err)
	case c.opts.TLS != nil && errors.As(err, &rh):
		return fmt.Errorf("%s does not speak TLS: a coordinator run with insecure-control-plane? (then pass --insecure-control-plane): %w", addr, err)
	case c.opts.TLS == nil && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)):
		return fmt.Errorf("%s closed the connection without answering: if its coordinators use mutual TLS, give a client credential (--tls-ca-file, --tls-cert-file, --tls-key-file, or --dir of a talon dev cluster): %w", addr, err)
	}
	return err
}
