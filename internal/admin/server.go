package admin

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/coordinator"
	"github.com/talonhq/talon/internal/metrics"
	"github.com/talonhq/talon/internal/netlimit"
	"github.com/talonhq/talon/internal/pki"
	"github.com/talonhq/talon/internal/readiness"
)

// Coordinator is what the admin listener reads from a coordinator
// (*coordinator.Coordinator implements it).
type Coordinator interface {
	// View returns a view read after the call, or an error wrapping
	// coordinator.ErrNotReady.
	View(ctx context.Context) (*coordinator.View, error)
	// LastGood returns the last good view (diagnostics only) or nil.
	LastGood() *coordinator.View
	LastError() error
	Readiness() coordinator.Readiness
	ClusterID() string
	NodeID() string
	Backend() string
	Timing() cluster.Timing
	// Events returns the coordinator's kept events matching q and a
	// channel closed at the next one.
	Events(q coordinator.EventQuery) (coordinator.EventPage, <-chan struct{})
	Incarnation() string
	// SetCordon cordons or uncordons a worker through the store.
	SetCordon(ctx context.Context, req coordinator.CordonRequest) (coordinator.CordonResult, error)
	// HeardAtUnixMs is the latest heartbeat of a node's incarnation the
	// coordinator knows of that its record may not show (0 if none).
	HeardAtUnixMs(key cluster.Key, incarnation string) int64
	// ExpectedCoordinators is the cluster's coordinator-replicas.
	ExpectedCoordinators() int
	// PlacementReplicas is the replicas the cluster's clients read with.
	PlacementReplicas() int
}

// Worker is what the admin listener reads from a worker (*worker.Worker
// implements it).
type Worker interface {
	NodeID() string
	Incarnation() string
	DataAddress() string
	Readiness() readiness.Report
	LastAccepted() (*cluster.Record, string)
	Cordoned() (cordoned, persisted bool)
	// InflightRequests is how many data requests are being served.
	InflightRequests() int64
}

// UsageSource reads a worker's live capacity and counters
// (*stats.Stats and worker.StatusSource implementations qualify).
type UsageSource interface {
	Status() (cluster.Capacity, cluster.Counters)
}

// Server limits and defaults.
const (
	DefaultShutdownTimeout = 5 * time.Second
	// DefaultMaxConnections is the admin listener's budget: probes,
	// scrapes, talonctl and browsers need tens.
	DefaultMaxConnections = 1024
	readHeaderTimeout     = 5 * time.Second
	readTimeout           = 15 * time.Second
	// writeTimeout leaves room for a View that waits out the store's
	// request timeout and for a large /metrics or node page.
	writeTimeout   = 60 * time.Second
	idleTimeout    = 120 * time.Second
	maxHeaderBytes = 32 << 10
)

// uiCSP is the Content-Security-Policy of the UI route: same-origin
// scripts, styles, images and API calls only; no framing, no plugins.
const uiCSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Options configures a Server. Exactly one of Coordinator and Worker is set.
type Options struct {
	// Config holds TLS files, tokens and the exposure toggles.
	Config config.AdminConfig
	// Coordinator is set on coordinators: /api/v1 cluster, nodes,
	// placement, and readiness from it.
	Coordinator Coordinator
	// Jobs, on coordinators, serves /api/v1/jobs (the cache jobs); nil
	// answers 404.
	Jobs Jobs
	// Worker is set on workers: /api/v1/status and readiness from it.
	Worker Worker
	// WorkerUsage optionally gives /api/v1/status live capacity and
	// counters ("current"); without it they are those of the last
	// accepted heartbeat.
	WorkerUsage UsageSource
	// UI is the web UI, served on coordinators at / and every path not
	// taken by another route when Config.ExposeUI is on. Nil: 404. The
	// admin listener adds security headers and a CSP. The handler must
	// serve static assets only, the same for every caller: they are served
	// without a token, because a browser cannot attach a bearer token to a
	// page load; the page then calls /api/v1 with the token like any other
	// client, and all cluster data stays behind authentication.
	UI http.Handler

	// Gatherer is what /metrics exposes (the process's registry).
	Gatherer prometheus.Gatherer
	// Registerer receives the admin request metrics.
	Registerer prometheus.Registerer
	// Process tracks open admin connections (listener="admin").
	Process *metrics.Process
	Logger  *slog.Logger
	Clock   func() time.Time
	// MaxConnections bounds the admin listener's connections (its
	// descriptor budget, see netlimit.Defaults); default
	// DefaultMaxConnections.
	MaxConnections int
	// EffectiveConfig writes the process's configuration, secrets
	// redacted, for the debug route (config.Config.Effective); nil: that
	// route answers 404.
	EffectiveConfig func(io.Writer) error
	// ShutdownTimeout bounds how long Serve waits for in-flight requests
	// after ctx ends; default DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
}

// Server is the administration listener. Create it with New, serve it
// with Serve (once) or mount Handler.
type Server struct {
	opts Options
	log  *slog.Logger
	now  func() time.Time
	auth *authenticator
	tls  *tls.Config // nil: plain HTTP
	m    *adminMetrics
	// refusals logs refused requests and refused writes: the first of
	// each client or principal a minute, and a count of the rest.
	refusals *refusalLog
	metrics  http.Handler
	handler  http.Handler
	router   *http.ServeMux // finds routes; see newRouter
	ident    clientIdentity // who a request is from (trusted proxies)
	limiter  *clientLimiter // per client; nil when off
	api      *clusterAPI    // the coordinator's cluster routes
}

// New returns a server. It loads the TLS key pair (when configured) and
// registers the admin metrics, and has no other effect: nothing listens
// until Serve.
func New(opts Options) (*Server, error) {
	switch {
	case (opts.Coordinator == nil) == (opts.Worker == nil):
		return nil, errors.New("admin: exactly one of Coordinator and Worker is required")
	case opts.Gatherer == nil, opts.Registerer == nil, opts.Process == nil:
		return nil, errors.New("admin: Gatherer, Registerer and Process are required")
	case opts.Logger == nil, opts.Clock == nil:
		return nil, errors.New("admin: Logger and Clock are required")
	case opts.ShutdownTimeout < 0:
		return nil, fmt.Errorf("admin: shutdown timeout %s must not be negative", opts.ShutdownTimeout)
	}
	if opts.ShutdownTimeout == 0 {
		opts.ShutdownTimeout = DefaultShutdownTimeout
	}
	if opts.MaxConnections <= 0 {
		opts.MaxConnections = DefaultMaxConnections
	}
	s := &Server{
		opts:    opts,
		log:     opts.Logger.With("component", "admin"),
		now:     opts.Clock,
		auth:    newAuthenticator(opts.Config, opts.Logger.With("component", "admin"), opts.Clock),
		router:  newRouter(opts.Coordinator != nil),
		limiter: newClientLimiter(opts.Config.RateLimit, opts.Clock),
	}
	trusted, err := config.ParsePrefixes("admin-trusted-proxies", opts.Config.TrustedProxies)
	if err != nil {
		return nil, err
	}
	s.ident = clientIdentity{trusted: trusted}
	s.refusals = newRefusalLog(s.log, s.now)
	for _, p := range trusted {
		if wide := (p.Addr().Is4() && p.Bits() < 8) || (!p.Addr().Is4() && p.Bits() < 32); wide {
			s.log.Warn("admin-trusted-proxies names a range wider than a /8 (IPv4) or a /32 (IPv6): every host in it may claim to forward for any client, choosing the address logged and rate limited",
				"range", p.String())
		}
	}
	cfg := opts.Config
	switch {
	case cfg.TLSCertFile != "" && cfg.TLSKeyFile != "":
		// Reloaded when the files change; TLS 1.2+ with AEAD suites only.
		src, err := pki.Load(pki.Files{CertFile: cfg.TLSCertFile, KeyFile: cfg.TLSKeyFile}, pki.Options{Setting: "admin-tls", Logger: s.log, Clock: opts.Clock})
		if err != nil {
			return nil, err
		}
		s.tls = src.ServerConfig(pki.Expect{})
	case cfg.TLSCertFile != "":
		return nil, fmt.Errorf("admin-tls-cert-file %q is set without admin-tls-key-file: set both or neither", cfg.TLSCertFile)
	case cfg.TLSKeyFile != "":
		return nil, fmt.Errorf("admin-tls-key-file %q is set without admin-tls-cert-file: set both or neither", cfg.TLSKeyFile)
	}
	m, err := newAdminMetrics(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("admin metrics: %w", err)
	}
	s.m = m
	s.api = &clusterAPI{
		coord: opts.Coordinator, board: opts.Jobs, now: opts.Clock, totals: newTotals(),
		watches: newWatchSlots(), watchGauge: m.watches, ident: s.ident,
	}
	s.metrics = promhttp.HandlerFor(opts.Gatherer, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
		ErrorLog:      slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	})
	s.handler = http.HandlerFunc(s.serveHTTP)
	return s, nil
}

// Handler returns the listener's handler, for Serve or for mounting in
// tests. It applies routing, exposure, authentication, method and body
// checks, security headers and request metrics.
func (s *Server) Handler() http.Handler { return s.handler }

// TLS reports whether Serve terminates TLS.
func (s *Server) TLS() bool { return s.tls != nil }

// AuthRequired reports whether bearer tokens are configured.
func (s *Server) AuthRequired() bool { return s.auth.enabled() }

// Serve serves ln (TLS when configured) until ctx ends, then stops
// accepting and lets in-flight requests finish within ShutdownTimeout.
// It closes ln. It returns nil after a shutdown caused by ctx and the
// listener's error otherwise. Run it after the role's component and stop it
// after that component's Run returned, so /readyz reports the drain.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	proc := s.opts.Process
	// The admin listener has its own descriptor budget: a flood of idle
	// or slow connections here cannot take the control or data ports'
	// descriptors, and one address or connections that never sent a
	// request cannot take all of this one's.
	ln = netlimit.Wrap(ln, netlimit.Defaults(s.opts.MaxConnections), func(reason string) { s.m.refused.WithLabelValues(reason).Inc() })
	srv := &http.Server{
		Handler:           s.handler,
		TLSConfig:         s.tls,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		// TLS handshake failures and the like from scanners: debug only.
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		ConnState: func(c net.Conn, st http.ConnState) {
			switch st {
			case http.StateActive:
				netlimit.Promote(c) // it sent a request (after its TLS handshake)
			case http.StateNew:
				proc.ConnOpened("admin")
			case http.StateClosed, http.StateHijacked:
				proc.ConnClosed("admin")
			}
		},
	}
	if !s.auth.enabled() && !loopback(ln.Addr()) {
		// On loopback only this host can connect: no warning (talon dev).
		s.log.Warn("admin listener has no bearer tokens: /metrics and /api/v1 reads are open to anyone who can connect, and every write is refused; bind a trusted interface or configure admin-token-file", "listen", ln.Addr().String())
	}
	// The refusal log's summaries are written when their minute ends,
	// even when no refusal follows; the goroutine ends with Serve.
	fctx, stopFlush := context.WithCancel(ctx)
	flushed := make(chan struct{})
	go s.flushRefusals(fctx, flushed)
	defer func() { stopFlush(); <-flushed }()
	errc := make(chan error, 1)
	go func() {
		if s.tls != nil {
			errc <- srv.ServeTLS(ln, "", "")
		} else {
			errc <- srv.Serve(ln)
		}
	}()
	s.log.Info("admin listener serving", "address", ln.Addr().String(), "tls", s.tls != nil, "auth", s.auth.enabled())
	select {
	case err := <-errc:
		return fmt.Errorf("admin listener %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		s.log.Warn("admin shutdown timeout passed with requests in flight; closing", "shutdown_timeout", s.opts.ShutdownTimeout)
		_ = srv.Close()
	}
	<-errc
	s.log.Info("admin listener stopped")
	return nil
}

// flushRefusals writes the refusal log's summaries every refusalEvery
// and when ctx ends, then closes done.
func (s *Server) flushRefusals(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(refusalEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			s.refusals.flush()
			return
		case <-t.C:
			s.refusals.flush()
		}
	}
}

// resolve finds the route for r on this server's role, or nil.
func (s *Server) resolve(r *http.Request) *route {
	h, _ := s.router.Handler(r)
	rt, ok := h.(*route)
	if !ok || rt == routeUnmatched {
		return nil // not found, or the mux's redirect of a non-canonical path
	}
	return rt
}

func (s *Server) exposed(g group) bool {
	c := s.opts.Config
	switch g {
	case groupHealth:
		return c.ExposeHealth
	case groupMetrics:
		return c.ExposeMetrics
	case groupAPI:
		return c.ExposeAPI
	case groupUI:
		return c.ExposeUI && s.opts.UI != nil
	}
	return false
}

// serveHTTP is the root handler: route, exposure, authentication, method
// and body checks, then the route's handler, with headers and metrics.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	start := s.now()
	rt := s.resolve(r)
	if rt != nil && !s.exposed(rt.group) {
		rt = nil // not exposed: indistinguishable from unknown
	}
	label := routeUnmatched
	if rt != nil {
		label = rt
	}
	rec := &statusRecorder{ResponseWriter: w}
	h := rec.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	if label != routeUI {
		h.Set("Cache-Control", "no-store")
	}

	client, forwardedTLS := s.ident.client(r)
	r, aud := s.withAudit(r, rt)
	if r.TLS != nil || forwardedTLS {
		// Served over https, directly or by a trusted proxy: browsers
		// must not fall back to plain http.
		h.Set("Strict-Transport-Security", "max-age=31536000")
	}
	var err error
	if label.group != groupHealth && !s.limiter.allow(client) {
		// Probes are never limited: a throttled kubelet would flap
		// readiness. Everything else counts against the client, which
		// is the peer unless the peer is a trusted proxy.
		err = errRateLimited
	} else {
		err = s.dispatch(rec, r, rt)
	}
	if err != nil {
		s.writeError(rec, r, err)
	}
	s.m.observe(label.name, codeOfStatus(rec.status()), s.now().Sub(start))
	s.logRequest(label.name, r, rec.status(), client, err, aud)
}

// logRequest logs an answered request: the audit line of a write, a
// failure, a refusal (the first of a client a minute, see refusalLog),
// or at debug.
func (s *Server) logRequest(op string, r *http.Request, status int, client netip.Addr, err error, aud *audit) {
	switch {
	case aud != nil && aud.principal != "" && aud.principal != anonymous:
		// Every write of a token holder is audited: served, a line;
		// refused, a line for the principal's first refusal a minute
		// and a count for the rest (logAudit). Writes of no one (401,
		// 429, or 403 on a listener without tokens) are refusals,
		// logged likewise per client: neither a scanner nor a token
		// can flood the log.
		s.logAudit(aud, status, client)
	case status == http.StatusServiceUnavailable:
		// Fail closed: the coordinator logs the change to unready once,
		// with its cause; each probe or read answered 503 meanwhile is not
		// news (an outage would otherwise log a line per request).
		s.log.Debug("admin request answered unavailable", "operation", op, "method", r.Method, "status", status, "client", client, "error", err)
	case status >= 500:
		s.log.Warn("admin request failed", "operation", op, "method", r.Method, "status", status, "client", client, "error", err)
	case status == http.StatusTooManyRequests || status == http.StatusUnauthorized || (aud != nil && status == http.StatusForbidden):
		s.refusals.note(refusalKey{client: client}, slog.LevelInfo, op, status, "admin request refused", "operation", op, "method", loggable(r.Method), "status", status, "client", client)
	default:
		s.log.Debug("admin request", "operation", op, "method", r.Method, "status", status, "client", client)
	}
}

func (s *Server) dispatch(w http.ResponseWriter, r *http.Request, rt *route) error {
	if writes(r.Method) {
		// Before anything else, on any path: a page of another site
		// cannot even probe which paths take writes.
		if err := crossSite(r); err != nil {
			return err
		}
	}
	if rt == nil {
		return notFound("no resource at %s on this %s", strings.TrimSpace(quoteShort(r.URL.Path)), s.role())
	}
	p, err := s.admit(w, r, rt)
	if err != nil {
		return err
	}
	if r.ContentLength > 0 || len(r.TransferEncoding) > 0 {
		return errBodyNotAccepted
	}
	r.Body = http.MaxBytesReader(w, r.Body, 0)
	r = r.WithContext(context.WithValue(r.Context(), principalKey{}, p.name))
	return rt.serve(s, w, r, p.scopes.Has(config.ScopeRead))
}

// nodeID is this process's node ID.
func (s *Server) nodeID() string {
	if s.opts.Coordinator != nil {
		return s.opts.Coordinator.NodeID()
	}
	return s.opts.Worker.NodeID()
}

func (s *Server) role() cluster.Role {
	if s.opts.Coordinator != nil {
		return cluster.RoleCoordinator
	}
	return cluster.RoleWorker
}

// writeError answers err through errorTable as a JSON error.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, code, retryable := classify(err)
	body := apiv1.ErrorResponse{Error: apiv1.ErrorBody{
		Code:      code,
		Message:   publicMessage(err, code),
		Retryable: retryable,
	}}
	var pe *paramError
	if errors.As(err, &pe) {
		body.Error.Parameter = pe.param
	}
	switch status {
	case http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", strconv.Itoa(s.retryAfterSeconds()))
	case http.StatusTooManyRequests:
		w.Header().Set("Retry-After", "1")
	}
	w.Header().Del("Content-Security-Policy")
	writeJSON(w, status, body)
}

// retryAfterSeconds is the Retry-After of a 503: one heartbeat interval,
// the time in which the store is next tried, at least a second.
func (s *Server) retryAfterSeconds() int {
	if s.opts.Coordinator == nil {
		return 1
	}
	return max(1, int(math.Ceil(s.opts.Coordinator.Timing().HeartbeatInterval.Seconds())))
}
