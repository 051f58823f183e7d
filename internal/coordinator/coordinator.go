package coordinator

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/metrics"
	"github.com/talonhq/talon/internal/readiness"
	"github.com/talonhq/talon/internal/state"
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
	events      *eventLog      // what this coordinator observed, bounded, in memory
	shared      *sharedEvents  // node events to and from the store's event log; nil without one
	jobs        *JobBoard      // the operator's cache jobs (jobs.go)
	members     *membershipLog // node events from the difference of two views (membership_log.go)
	refresh     *refresher     // reads the view periodically, on request and on relevant changes (loops.go)
	cordons     *cordons       // the operator's cordons in the store (cordon.go)
	proposer    *proposer      // liveness transitions and revocations to the store (proposals.go)
	self        *ownRecord     // this coordinator's own record in the store (self.go)
	bg          sync.WaitGroup // background goroutines: batched reads, loops

	lookups      atomic.Uint64
	lookupErrors atomic.Uint64
	storeErrors  atomic.Uint64

	mu       sync.Mutex // guards the fields below: lifecycle
	draining bool
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

// Events returns the events this coordinator kept that match q (its own,
// and the cluster's node events, read from the store at start and every
// sharedEventsResync), in the order it learnt them, and a channel closed when the next event is added (for a
// watch: query again with AfterSeq once it closes).
func (c *Coordinator) Events(q EventQuery) (EventPage, <-chan struct{}) {
	return c.events.query(q)
}

// Incarnation returns this coordinator process's incarnation ID: event
// sequence numbers are meaningful within one incarnation.
func (c *Coordinator) Incarnation() string { return c.incarnation }

// HeardAtUnixMs returns the latest heartbeat of the incarnation of key
// this coordinator knows of that its record may not show: one it accepted
// that only renewed the lease, or a renewal the store reported (Unix ms,
// this coordinator's clock; 0 if none). The API raises a record's
// heartbeat time to it.
func (c *Coordinator) HeardAtUnixMs(key cluster.Key, incarnation string) int64 {
	return c.evidence.heardAt(key, incarnation)
}
