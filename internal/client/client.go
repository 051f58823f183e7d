package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/talonhq/talon/internal/backoff"
	"github.com/talonhq/talon/internal/placement"
	"github.com/talonhq/talon/internal/protocol"
)

// ErrNoCoordinator is returned when no coordinator address could serve a call.
var ErrNoCoordinator = errors.New("no coordinator reachable")

// Attempt deadlines (Options.AttemptTimeout). A healthy coordinator
// answers in milliseconds and bounds its own store calls by its
// request-timeout, after which it answers a retryable code; an attempt
// that waits much longer is at a hung coordinator, and the next address
// serves sooner.
const (
	// DefaultMinAttemptTimeout is the floor of a derived attempt
	// deadline: room for a dial, a TLS handshake and an answer.
	DefaultMinAttemptTimeout = 250 * time.Millisecond
	// DefaultAttemptTimeout bounds each attempt of a call without a
	// deadline, which would otherwise wait for a hung coordinator forever.
	DefaultAttemptTimeout = time.Second
)

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
	// one that last answered (anything but a refusal) is tried first.
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
	// Retries is how many further passes over the addresses a retryable
	// failure gets, with jittered backoff between passes; default 3, and
	// -1 means one pass. Within a pass, a connection failure, an attempt
	// that outlives its deadline and a refusal (not_ready, draining,
	// unavailable) move on to the next address at once.
	Retries int
	// AttemptTimeout, when positive, is the deadline of every attempt at
	// one address (dial, TLS handshake, request and answer). Zero derives
	// it per attempt: a third of what remains of the call's deadline, at
	// least MinAttemptTimeout; DefaultAttemptTimeout when the call has no
	// deadline. The call's own deadline still bounds the whole, and the
	// last attempt of a call (last address, last pass) gets all of it.
	AttemptTimeout time.Duration
	// MinAttemptTimeout is the floor of a derived attempt deadline;
	// default DefaultMinAttemptTimeout.
	MinAttemptTimeout time.Duration
	// WatchProbeInterval is how long a placement watch waits in silence
	// before it pings its coordinator; a coordinator that does not answer
	// the subscription or a ping within WatchProbeTimeout is left for the
	// next address. Defaults 10 s and 5 s.
	WatchProbeInterval time.Duration
	WatchProbeTimeout  time.Duration
	// OnConnect, when set, runs on every new request connection before
	// its first request (a worker attests it: package attest). An error
	// fails the attempt at that address. A non-zero time is when the
	// connection's setup stops being valid: a pooled connection is not
	// reused within ConnRenewMargin of it, a new one is dialled instead.
	OnConnect func(ctx context.Context, cn *protocol.Conn) (validUntil time.Time, err error)
	Clock     func() time.Time
	Logger    *slog.Logger
}

// ConnRenewMargin is how long before its OnConnect validity ends a pooled
// connection is retired.
const ConnRenewMargin = 30 * time.Second

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
	// validUntil holds the OnConnect validity of the open request
	// connections that have one.
	validUntil map[*protocol.Conn]time.Time
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
	if opts.MinAttemptTimeout <= 0 {
		opts.MinAttemptTimeout = DefaultMinAttemptTimeout
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
	return &Client{opts: opts, now: opts.Clock, log: opts.Logger, pools: map[string][]*protocol.Conn{}, cache: map[cacheKey]entry{}, validUntil: map[*protocol.Conn]time.Time{}}, nil
}

// Close closes pooled connections.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for addr, conns := range c.pools {
		for _, cn := range conns {
			_ = cn.Close()
			delete(c.validUntil, cn)
		}
		delete(c.pools, addr)
	}
	return nil
}

// discard closes a request connection for good.
func (c *Client) discard(cn *protocol.Conn) {
	_ = cn.Close()
	c.mu.Lock()
	delete(c.validUntil, cn)
	c.mu.Unlock()
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
	resp, err := c.call(ctx, &protocol.PlacementLookup{Key: []byte(key), Replicas: uint16(replicas)}, CallOptions{})
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
// on connection errors, attempt deadlines and refusals, and retrying
// retryable errors with jittered backoff between passes.
func (c *Client) Call(ctx context.Context, req protocol.Message) (protocol.Message, error) {
	return c.call(ctx, req, CallOptions{})
}

// CallOptions adjusts one call (CallWith).
type CallOptions struct {
	// First, when set, is tried first in every pass instead of the
	// preferred address (a caller spreading its requests over the
	// coordinators in turn); the pass goes on over the other addresses.
	// It need not be one of Options.Coordinators.
	First string
	// AttemptTimeout, when positive, replaces Options.AttemptTimeout for
	// this call.
	AttemptTimeout time.Duration
	// Once makes one attempt, at First or the preferred address, with no
	// failover and no retry: for a request that is only worth asking the
	// coordinator that just answered (a worker's Instructions).
	Once bool
}

// CallWith is Call adjusted by o.
func (c *Client) CallWith(ctx context.Context, req protocol.Message, o CallOptions) (protocol.Message, error) {
	return c.call(ctx, req, o)
}

// Retry schedules: a request's retries across coordinators, and a placement
// watch's reconnects. Both spread by half either way, as a fleet of clients
// restarting together must not retry in step.
var (
	retryBackoff = backoff.Policy{Initial: 50 * time.Millisecond, Max: 2 * time.Second, Jitter: 0.5}
	watchBackoff = backoff.Policy{Initial: 100 * time.Millisecond, Max: 5 * time.Second, Jitter: 0.5}
)

// refusal reports whether a coordinator's error is its own refusal to
// serve now (another coordinator may serve at once), as opposed to an
// answer about the request or the shared store.
func refusal(pe *protocol.Error) bool {
	return pe.Code == protocol.CodeDraining || pe.Code == protocol.CodeNotReady || pe.Code == protocol.CodeUnavailable
}

func (c *Client) call(ctx context.Context, req protocol.Message, o CallOptions) (protocol.Message, error) {
	var lastErr error
	retry := backoff.New(retryBackoff)
	for pass := 0; pass <= c.opts.Retries; pass++ {
		order := c.order(o.First)
		if o.Once {
			order = order[:1]
		}
		for i, addr := range order {
			final := pass == c.opts.Retries && i == len(order)-1
			resp, err := c.attempt(ctx, addr, req, c.attemptTimeout(ctx, o.AttemptTimeout, final))
			var pe *protocol.Error
			isPE := errors.As(err, &pe)
			if err == nil || (isPE && !refusal(pe)) {
				c.preferAddr(addr) // it answered
			}
			if err == nil {
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
			if isPE {
				if !pe.Retryable {
					return nil, err
				}
				if !refusal(pe) {
					break // retryable but not this coordinator's fault: back off first
				}
			}
			// Connection failure, attempt deadline, or a refusal: try the
			// next address now.
		}
		if pass == c.opts.Retries || o.Once {
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

// order returns one pass's addresses: first (when set), then the
// coordinators from the preferred one on, in their configured order.
func (c *Client) order(first string) []string {
	c.mu.Lock()
	prefer := c.prefer
	c.mu.Unlock()
	n := len(c.opts.Coordinators)
	order := make([]string, 0, n+1)
	if first != "" {
		order = append(order, first)
	}
	for i := range n {
		if a := c.opts.Coordinators[(prefer+i)%n]; a != first {
			order = append(order, a)
		}
	}
	return order
}

// preferAddr makes addr, which answered, the first address of later calls.
func (c *Client) preferAddr(addr string) {
	i := slices.Index(c.opts.Coordinators, addr)
	if i < 0 {
		return
	}
	c.mu.Lock()
	c.prefer = i
	c.mu.Unlock()
}

// attemptTimeout is the deadline of the next attempt: fixed when set
// (this call's, then the client's), otherwise a third of what remains of
// the call, at least MinAttemptTimeout; never past the call's deadline,
// and all of it for the final attempt, after which nothing is tried.
func (c *Client) attemptTimeout(ctx context.Context, fixed time.Duration, final bool) time.Duration {
	if fixed <= 0 {
		fixed = c.opts.AttemptTimeout
	}
	dl, ok := ctx.Deadline()
	if !ok {
		if fixed > 0 {
			return fixed
		}
		return DefaultAttemptTimeout
	}
	left := time.Until(dl)
	if final {
		return left
	}
	if fixed <= 0 {
		fixed = max(left/3, c.opts.MinAttemptTimeout)
	}
	return min(fixed, left)
}

// attempt makes one call to addr within d. A pooled connection that fails
// at once as a closed one does, or that holds a drain notice (the
// coordinator behind it restarted, or closed it while it idled), is no
// verdict on the coordinator at that address now: that address's idle
// pool is dropped and the request redialled once, within the same
// deadline. A coordinator that is gone refuses the dial, and the call
// moves to the next address.
func (c *Client) attempt(ctx context.Context, addr string, req protocol.Message, d time.Duration) (protocol.Message, error) {
	actx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	cn, pooled, err := c.get(actx, addr)
	if err != nil {
		return nil, c.attemptErr(ctx, addr, d, err)
	}
	resp, err := c.send(actx, addr, cn, req)
	if err != nil && pooled && (stale(err) || drained(err)) {
		c.dropIdle(addr)
		c.log.Debug("pooled coordinator connection was closed while idle; redialling", "coordinator", addr, "error", err)
		if cn, err = c.dial(actx, addr); err != nil {
			return nil, c.attemptErr(ctx, addr, d, err)
		}
		resp, err = c.send(actx, addr, cn, req)
	}
	if err != nil {
		return nil, c.attemptErr(ctx, addr, d, err)
	}
	return resp, nil
}

// send makes one call on cn and pools it again unless it broke. A
// coordinator's drain notice (the draining code pushed on the connection)
// also closes the address's other idle connections: they belong to the
// same process, which is about to close them.
func (c *Client) send(ctx context.Context, addr string, cn *protocol.Conn, req protocol.Message) (protocol.Message, error) {
	resp, err := cn.Call(ctx, req)
	var pe *protocol.Error
	if err != nil && (!errors.As(err, &pe) || errors.Is(err, protocol.ErrConnBroken)) {
		c.discard(cn) // broken, told to go, or abandoned mid-call: do not reuse
		if pe != nil && pe.Code == protocol.CodeDraining {
			c.dropIdle(addr)
		}
		return nil, err
	}
	c.put(addr, cn)
	return resp, err
}

// drained reports whether err is a coordinator's drain notice on the
// connection (a push, not an answer): the process that sent it is going,
// but a pooled connection's process may already have been replaced by a
// new one on the same address.
func drained(err error) bool {
	return errors.Is(err, protocol.ErrConnBroken) && protocol.IsCode(err, protocol.CodeDraining)
}

// stale reports whether err is what a connection the peer closed gives on
// its first use: EOF, a reset or a broken pipe.
func stale(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNABORTED)
}

// attemptErr explains an attempt's failure: its own deadline (the call's
// still runs), or the hints for a connection error.
func (c *Client) attemptErr(ctx context.Context, addr string, d time.Duration, err error) error {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return err
	}
	if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("coordinator %s did not answer within the attempt deadline %s: %w", addr, d.Round(time.Millisecond), err)
	}
	return c.hint(addr, err)
}
