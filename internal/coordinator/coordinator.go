package coordinator

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/membership"
	"github.com/talonhq/talon/internal/metrics"
	"github.com/talonhq/talon/internal/netlimit"
	"github.com/talonhq/talon/internal/readiness"
	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/tracing"
)

// ErrNotReady is returned by View and Lookup when no current snapshot can
// be had (fail closed). It wraps the store's error.
var ErrNotReady = errors.New("coordinator has no current cluster snapshot")

// Options configures a Coordinator. Every dependency is explicit.
type Options struct {
	ClusterID string
	NodeID    string
	Labels    map[string]string
	// ExpectedCoordinators is the number of coordinators the cluster is
	// configured to run (coordinator-replicas); 0 means 1. The API
	// compares the live ones with it.
	ExpectedCoordinators int
	// Advertise is the control address written to this coordinator's
	// record; empty means the listener's address.
	Advertise string
	// AdminAddress is the advertised administration address, if any.
	AdminAddress string

	Timing          cluster.Timing
	RequestTimeout  time.Duration
	DrainDelay      time.Duration
	ShutdownTimeout time.Duration
	// RecoveryHold is how long, after the store answers again following an
	// outage (or after the coordinator's own stall) long enough that a live
	// worker's record could have expired in it, or at tight timings turned
	// late (at least BlipTolerance; recovery.go), the coordinator observes the
	// cluster before it answers again: it stays unready, lookups and the API
	// fail closed with not_ready, and pushes wait, while workers heartbeat
	// again or re-register. When its own record could have expired too, it
	// also waits for the store to accept that record again. After a shorter
	// interruption there is no hold: no live record can have lapsed, and the
	// first good read is answered from at once. Zero means one heartbeat
	// interval plus two request timeouts: a worker's next attempt comes within
	// an interval of the store's return (its retries are capped at the
	// interval), may first wait out a request that was in flight, and
	// re-registers at once when its record is gone.
	RecoveryHold time.Duration
	// PlacementReplicas is the replica count clients read with; the
	// under-replication gauge compares eligible workers to it. Default 2.
	PlacementReplicas int

	Store    state.Store
	Listener net.Listener // the bound control listener; Run closes it
	Logger   *slog.Logger
	Clock    func() time.Time
	// LivenessClock times liveness: the evidence behind late and expiry
	// proposals, gaps between reads, the recovery hold. Default time.Now
	// (monotonic). It is separate from Clock, which stamps and ages for
	// display, so a display clock that jumps ages nothing; a test whose
	// records must never be proposed late passes a clock that stands still.
	LivenessClock func() time.Time
	// Registerer receives the coordinator's metrics; Process holds the
	// process-wide ones (shared with the admin listener).
	Registerer prometheus.Registerer
	// Tracers, when set, receives spans: control requests (placement
	// lookups, registrations, heartbeats) and every store operation. Nil
	// means no spans.
	Tracers trace.TracerProvider
	Process *metrics.Process
	// Limits bound the control listener; zero fields take the defaults.
	Limits Limits
	// EventCapacity is how many events (Events) the coordinator keeps in
	// memory; default DefaultEventCapacity.
	EventCapacity int
	// EventMaxAge is how long events are listed; default
	// DefaultEventMaxAge.
	EventMaxAge time.Duration
	// Events is the store's shared log of node events; nil takes Store
	// when it implements state.EventLog (every backend does), and keeps
	// node events in memory only otherwise.
	Events state.EventLog
	// TLS, when set, is the control listener's server configuration
	// (mutual TLS, see package pki): every connection must present a
	// certificate, and a write is allowed only for the worker node its
	// certificate names. Nil serves plain TCP and authorizes nothing
	// (insecure-control-plane).
	TLS *tls.Config
	// Revoked, when set, reports whether a peer's certificate is on the
	// deny list now: checked at every request, so a connection
	// established before its entry was added is refused (permission
	// denied, then closed) at its next request.
	Revoked func(*x509.Certificate) bool
	// DenyRecord, when set, reports whether the deny list refuses the
	// credential a record names (its role and node ID, and the serial of
	// the certificate it registered with) and which entry: the
	// coordinator then marks the record revoked in the store, so every
	// coordinator leaves it out of placement, not only those the worker
	// talks to.
	DenyRecord func(role cluster.Role, nodeID, serial string) (entry string, denied bool)
	// Attest, when set, verifies a worker's platform credential (an
	// Attest message; package attest, TokenReview on Kubernetes) and
	// turns attestation on: every worker write must then come on a
	// connection attested for the record's node, whatever the
	// certificate says. Errors wrapping ErrAttestationRefused are
	// refusals; any other error is retryable (the verifier is down).
	Attest func(ctx context.Context, token []byte) (Attestation, error)
}

// Attestation is a worker's verified platform credential: the node it is
// and until when.
type Attestation struct {
	NodeID  string
	Subject string // who vouched, e.g. the service account namespace/name
	Expires time.Time
}

// ErrAttestationRefused marks an Attest verdict that the credential does
// not attest a node (not retryable).
var ErrAttestationRefused = errors.New("attestation refused")

// Limits bound what peers can hold on the control listener and how many
// records a cluster accepts. Each refusal is counted in
// talon_coordinator_limit_refusals_total by limit.
type Limits struct {
	// MaxConnections caps concurrent control connections; more are closed
	// at accept. Default DefaultMaxConnections. Of them, half may come from
	// one source address, a quarter may be held by one credential (the
	// client certificate's identity, from any addresses), a quarter may be
	// still in the TLS handshake, and 32 of those from one address
	// (netlimit.Defaults): connections without credentials cannot take the
	// slots of peers that authenticated, nor one credential all of them. A
	// handshake must finish within min(FrameTimeout, MaxHandshakeTime).
	MaxConnections int
	// IdleTimeout closes a connection that sends nothing for this long
	// (subscribers ping well within it). Default DefaultIdleTimeout.
	IdleTimeout time.Duration
	// FrameTimeout bounds receiving one frame once its first byte
	// arrived, so a peer cannot pin a half-sent frame. Default
	// DefaultFrameTimeout.
	FrameTimeout time.Duration
	// MaxRecords caps the records of the cluster: a registration of a
	// node the cluster does not hold is refused with resource_exhausted
	// past it. Default DefaultMaxRecords.
	MaxRecords int
	// MaxInflightWrites bounds the registrations, heartbeats and
	// deregistrations this coordinator has at the store at once. A write
	// that finds every slot taken waits up to AdmissionWait, then is
	// refused with the retryable unavailable code, so that under
	// saturation latency stays bounded and workers back off, instead of an
	// unbounded queue. Default DefaultMaxInflightWrites.
	MaxInflightWrites int
	// AdmissionWait is how long a write waits for a slot; default
	// DefaultAdmissionWait.
	AdmissionWait time.Duration
	// NodeWritesPerInterval bounds one node's registrations, heartbeats
	// and deregistrations per heartbeat interval (past a burst of six
	// intervals' worth); more are refused with a retryable
	// resource_exhausted naming the wait. Default
	// DefaultNodeWritesPerInterval; negative turns the limit off (write
	// benchmarks, which heartbeat back to back).
	NodeWritesPerInterval int
}

// Limit defaults (the configuration's defaults too).
const (
	DefaultMaxConnections = 4096
	DefaultIdleTimeout    = 2 * time.Minute
	DefaultFrameTimeout   = 10 * time.Second
	DefaultMaxRecords     = 10000
	// DefaultMaxInflightWrites is a few store round trips' worth of
	// heartbeats of a large cluster.
	DefaultMaxInflightWrites = 512
	DefaultAdmissionWait     = 100 * time.Millisecond
	// DefaultNodeWritesPerInterval is ten times what a live worker writes.
	DefaultNodeWritesPerInterval = 10
	// MaxHandshakeTime bounds a TLS handshake on the control listener: a
	// healthy peer needs milliseconds, even on a loaded machine well under
	// a second.
	MaxHandshakeTime = 3 * time.Second
)

func (l Limits) withDefaults() Limits {
	if l.MaxConnections <= 0 {
		l.MaxConnections = DefaultMaxConnections
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = DefaultIdleTimeout
	}
	if l.FrameTimeout <= 0 {
		l.FrameTimeout = DefaultFrameTimeout
	}
	if l.MaxRecords <= 0 {
		l.MaxRecords = DefaultMaxRecords
	}
	if l.MaxInflightWrites <= 0 {
		l.MaxInflightWrites = DefaultMaxInflightWrites
	}
	if l.NodeWritesPerInterval == 0 {
		l.NodeWritesPerInterval = DefaultNodeWritesPerInterval
	}
	if l.AdmissionWait <= 0 {
		l.AdmissionWait = DefaultAdmissionWait
	}
	return l
}

// Readiness is the coordinator's readiness with the reasons it is not
// ready, in the order of readinessOrder.
type Readiness = readiness.Report

// Coordinator serves the control protocol. Create it with New and run it
// with Run.
type Coordinator struct {
	opts Options
	log  *slog.Logger
	now  func() time.Time // Options.Clock: stamps, display ages, durations
	// mono times liveness: evidence, read gaps, the recovery hold. It is
	// the process's monotonic clock, never Options.Clock, so a test that
	// moves the display clock does not age anything for liveness, and a
	// wall-clock step never does either.
	mono        func() time.Time
	m           *coordMetrics
	store       *state.Instrumented // opts.Store, measured and traced; assert optional interfaces on opts.Store
	tracer      trace.Tracer
	proc        *metrics.Process
	incarnation string
	startUnixMs int64
	advertise   string
	views       atomic.Pointer[batcher] // set by Run; nil before
	view        *tracker                // the view, readiness of the store, recovery
	evidence    *evidence               // what this coordinator observed, for proposals
	ctl         *controlServer          // the control protocol: listener, connections, drain
	departed    *departures             // deregistrations served here, reported as orderly leaves
	ready       *readiness.Tracker
	events      *eventLog     // what this coordinator observed, bounded, in memory
	shared      *sharedEvents // node events to and from the store's event log; nil without one
	jobs        *JobBoard     // the operator's cache jobs (jobs.go)
	authzLog    *rate.Limiter // the store's authorization refusals of client writes, for the log
	rates       *writeRates   // per-node write rates
	attestRates *writeRates   // per-peer attestations (TokenReviews)
	self        *membership.Loop
	bg          sync.WaitGroup  // background goroutines: batched reads, loops
	kick        chan struct{}   // asks the refresh loop for a new view now
	selfKick    chan struct{}   // asks the own-record loop to write now
	proposals   chan proposal   // transitions for the proposer
	revocations chan revocation // deny-listed records for the proposer to mark

	revokeMu      sync.Mutex    // guards revokeChecked; a leaf
	revokeChecked time.Time     // when the view was last compared with the deny list
	writeSlots    chan struct{} // one token per store write in flight (Limits.MaxInflightWrites)

	lookups      atomic.Uint64
	lookupErrors atomic.Uint64
	storeErrors  atomic.Uint64

	mu       sync.Mutex // guards the fields below: lifecycle
	draining bool
}

// New returns a coordinator. It has no side effects: nothing is read,
// written or started until Run.
func New(opts Options) (*Coordinator, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	opts.Limits = opts.Limits.withDefaults()
	if opts.PlacementReplicas <= 0 {
		opts.PlacementReplicas = 2
	}
	if opts.LivenessClock == nil {
		opts.LivenessClock = time.Now
	}
	if opts.RecoveryHold <= 0 {
		opts.RecoveryHold = opts.Timing.HeartbeatInterval + 2*opts.RequestTimeout
	}
	m, err := newCoordMetrics(opts.Registerer, opts.Store.Backend())
	if err != nil {
		return nil, fmt.Errorf("coordinator metrics: %w", err)
	}
	store, err := state.Instrument(opts.Store, opts.Registerer, opts.Tracers, opts.LivenessClock)
	if err != nil {
		return nil, fmt.Errorf("coordinator metrics: %w", err)
	}
	if sk, ok := opts.Store.(skewEstimator); ok {
		if err := registerSkew(opts.Registerer, sk); err != nil {
			return nil, fmt.Errorf("coordinator metrics: %w", err)
		}
	}
	if err := registerCapacity(opts.Registerer, opts.Store); err != nil {
		return nil, fmt.Errorf("coordinator metrics: %w", err)
	}
	advertise := opts.Advertise
	if advertise == "" {
		advertise = opts.Listener.Addr().String()
	}

	c := &Coordinator{
		opts:        opts,
		log:         opts.Logger.With("component", "coordinator"),
		now:         opts.Clock,
		mono:        opts.LivenessClock,
		m:           m,
		store:       store,
		tracer:      tracing.Tracer(opts.Tracers, "coordinator"),
		proc:        opts.Process,
		incarnation: cluster.NewIncarnationID(),
		startUnixMs: opts.Clock().UnixMilli(),
		advertise:   advertise,
		view:        newTracker(opts.RecoveryHold, maxReadGap(opts), newTolerances(opts.Timing, opts.RequestTimeout)),
		evidence:    newEvidence(opts.Timing),
		events:      newEventLog(opts.EventCapacity, cmp.Or(opts.EventMaxAge, DefaultEventMaxAge), opts.Clock),
		authzLog:    rate.NewLimiter(rate.Every(10*time.Second), 1),
		kick:        make(chan struct{}, 1),
		selfKick:    make(chan struct{}, 1),
		proposals:   make(chan proposal, maxQueuedProposals),
		revocations: make(chan revocation, maxQueuedProposals),
	}
	c.ready = c.newReadiness()
	c.departed = newDepartures(max(c.opts.Limits.MaxRecords, 1))
	c.proc.ReadyFrom(c.ready.Ready)
	c.jobs = newJobBoard(c)
	if err := c.registerPresence(opts.Registerer); err != nil {
		return nil, fmt.Errorf("coordinator metrics: %w", err)
	}
	if err := c.openSharedEvents(); err != nil {
		return nil, err
	}
	c.writeSlots = make(chan struct{}, c.opts.Limits.MaxInflightWrites)
	c.rates = newWriteRates(opts.Timing.HeartbeatInterval, c.opts.Limits.NodeWritesPerInterval, c.opts.Limits.MaxRecords)
	c.attestRates = newPeerRates(attestEvery, attestBurst, 2*c.opts.Limits.MaxRecords)
	lim := netlimit.Defaults(c.opts.Limits.MaxConnections)
	if opts.TLS == nil {
		// No credentials to wait for: nothing is ever pending.
		lim.MaxPending, lim.MaxPendingPerAddress = 0, 0
	}
	c.ctl = &controlServer{
		h: handler{c}, log: c.log, nodeID: opts.NodeID, m: m, proc: c.proc, tracer: c.tracer, now: c.now,
		opts:  controlOptions{Limits: c.opts.Limits, TLS: opts.TLS, Revoked: opts.Revoked, RequestTimeout: opts.RequestTimeout},
		ln:    netlimit.Wrap(opts.Listener, lim, func(reason string) { m.limitRefusals.WithLabelValues(reason).Inc() }),
		subs:  newSubscribers(),
		conns: map[*conn]struct{}{},
	}
	if c.self, err = c.newSelfLoop(); err != nil {
		return nil, err
	}
	return c, nil
}

func (o *Options) validate() error {
	if err := o.Timing.Validate(); err != nil {
		return err
	}
	switch {
	case o.Store == nil:
		return errors.New("coordinator: Store is required")
	case o.Listener == nil:
		return errors.New("coordinator: Listener is required")
	case o.Logger == nil, o.Clock == nil, o.Registerer == nil, o.Process == nil:
		return errors.New("coordinator: Logger, Clock, Registerer and Process are required")
	case o.RequestTimeout <= 0:
		return fmt.Errorf("coordinator: request timeout %s must be positive", o.RequestTimeout)
	}
	if err := o.Timing.ValidateTolerance(o.RequestTimeout); err != nil {
		return err
	}
	if err := cluster.ValidateID("cluster-id", o.ClusterID); err != nil {
		return err
	}
	return cluster.ValidateID("node-id", o.NodeID)
}

// Close releases a coordinator that will not be run: it closes the
// listener. Run closes it itself; do not call Close after Run.
func (c *Coordinator) Close() error { return c.ctl.ln.Close() }

// Addr returns the control listener's address.
func (c *Coordinator) Addr() net.Addr { return c.opts.Listener.Addr() }

// NodeID returns the coordinator's node ID.
func (c *Coordinator) NodeID() string { return c.opts.NodeID }

// ClusterID returns the coordinator's cluster ID.
func (c *Coordinator) ClusterID() string { return c.opts.ClusterID }

// Backend names the state backend.
func (c *Coordinator) Backend() string { return c.opts.Store.Backend() }

// PlacementReplicas returns the replica count the cluster's clients read
// with (Options.PlacementReplicas).
func (c *Coordinator) PlacementReplicas() int { return c.opts.PlacementReplicas }

// ExpectedCoordinators returns Options.ExpectedCoordinators, at least 1.
func (c *Coordinator) ExpectedCoordinators() int { return max(c.opts.ExpectedCoordinators, 1) }

// Timing returns the heartbeat timing the coordinator applies.
func (c *Coordinator) Timing() cluster.Timing { return c.opts.Timing }

// Run serves until ctx ends, then drains and returns. It returns an error
// only when the coordinator could not serve at all: ErrVersionSkew when a
// live process of the cluster is outside this build's version-skew
// policy (checked before anything is written; upgrade.go).
func (c *Coordinator) Run(ctx context.Context) error {
	if err := c.preflightSkew(ctx); err != nil {
		return err
	}
	base, stopBase := context.WithCancel(context.WithoutCancel(ctx))
	c.views.Store(&batcher{fetch: c.fetch, base: base, timeout: c.opts.RequestTimeout, wg: &c.bg})

	selfCtx, stopSelf := context.WithCancel(base)
	selfDone := make(chan struct{})
	go func() { defer close(selfDone); c.self.Run(selfCtx) }()
	c.bg.Add(3)
	if c.shared != nil {
		c.bg.Add(1)
		go func() { defer c.bg.Done(); c.shared.run(base) }()
	}
	go func() { defer c.bg.Done(); c.refreshLoop(base) }()
	go func() { defer c.bg.Done(); c.watchLoop(base) }()
	go func() { defer c.bg.Done(); c.proposeLoop(base) }()
	c.bg.Add(1)
	go func() { defer c.bg.Done(); c.jobs.run(base, c.opts.Timing.HeartbeatInterval) }()
	if log := c.renewalLog(); log != nil {
		c.evidence.shareRenewals()
		c.bg.Add(1)
		go func() { defer c.bg.Done(); c.renewalLoop(base, log) }()
	}
	c.ctl.start()
	c.log.Info("coordinator listening; waiting for the store before serving", "control", c.advertise, "node", c.opts.NodeID, "cluster", c.opts.ClusterID, "backend", c.opts.Store.Backend())

	<-ctx.Done()
	c.shutdown(func() { stopSelf(); <-selfDone })
	stopBase()
	c.bg.Wait()
	return nil
}

// shutdown drains: unready, serve for DrainDelay, stop accepting, wait for
// in-flight requests up to ShutdownTimeout, tell every connection it is
// draining (notifyDrain), close connections, stop heartbeats and
// deregister.
func (c *Coordinator) shutdown(stopHeartbeats func()) {
	c.mu.Lock()
	c.draining = true
	c.mu.Unlock()
	c.ready.Set(readiness.Draining, readiness.DrainingReason)
	c.updateReadyMetric()
	c.log.Info("draining: reporting unready and serving for the drain delay", "drain_delay", c.opts.DrainDelay)
	time.Sleep(c.opts.DrainDelay)

	c.ctl.stop(c.opts.ShutdownTimeout)

	// No heartbeat may follow the removal, or it would re-create the record.
	stopHeartbeats()
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.RequestTimeout)
	defer cancel()
	if _, err := c.store.RemoveNode(ctx, c.ownKey(), c.incarnation); err != nil {
		c.log.Warn("could not remove own record; it expires with its lease", "error", err)
	}
	c.log.Info("coordinator stopped")
}

// ownKey is the slot of this coordinator's own record.
func (c *Coordinator) ownKey() cluster.Key {
	return cluster.Key{ClusterID: c.opts.ClusterID, Role: cluster.RoleCoordinator, NodeID: c.opts.NodeID}
}

// Readiness reports whether the coordinator should receive traffic: the
// report of its one readiness tracker (readiness.go).
func (c *Coordinator) Readiness() Readiness { return c.ready.Report() }

// updateReadyMetric notes a change of readiness (logged and added to the
// event log once) and sets the recovery gauge; talon_ready reads the
// tracker itself.
func (c *Coordinator) updateReadyMetric() {
	c.ready.Report()
	recovering := 0.0
	if c.view.isRecovering() {
		recovering = 1
	}
	c.m.recovering.Set(recovering)
}
