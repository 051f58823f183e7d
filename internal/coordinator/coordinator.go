package coordinator

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/talonhq/talon/internal/buildinfo"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/metrics"
	"github.com/talonhq/talon/internal/placement"
	"github.com/talonhq/talon/internal/protocol"
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
	// Advertise is the control address written to this coordinator's
	// record; empty means the listener's address.
	Advertise string
	// AdminAddress is the advertised administration address, if any.
	AdminAddress string

	Timing          cluster.Timing
	RequestTimeout  time.Duration
	DrainDelay      time.Duration
	ShutdownTimeout time.Duration
	// RecoveryGrace is how long, after the store answers again following
	// an outage, the coordinator keeps placing on workers of its last
	// placement that the store no longer lists: leases that expired during
	// the outage come back as the workers re-register (at their next
	// heartbeat), and an empty or shrunken membership that only reflects
	// the outage is never published. Zero means two heartbeat intervals;
	// negative turns it off.
	RecoveryGrace time.Duration
	// PlacementReplicas is the replica count clients read with; the
	// under-replication gauge compares eligible workers to it. Default 2.
	PlacementReplicas int

	Store    state.Store
	Listener net.Listener // the bound control listener; Run closes it
	Logger   *slog.Logger
	Clock    func() time.Time
	// Registerer receives the coordinator's metrics; Process holds the
	// process-wide ones (shared with the admin listener).
	Registerer prometheus.Registerer
	Process    *metrics.Process
	// Limits bound the control listener; zero fields take the defaults.
	Limits Limits
	// TLS, when set, is the control listener's server configuration
	// (mutual TLS, see package pki): every connection must present a
	// certificate, and a write is allowed only for the worker node its
	// certificate names. Nil serves plain TCP and authorizes nothing
	// (insecure-control-plane).
	TLS *tls.Config
}

// Limits bound what peers can hold on the control listener and how many
// records a cluster accepts. Each refusal is counted in
// talon_coordinator_limit_refusals_total by limit.
type Limits struct {
	// MaxConnections caps concurrent control connections; more are closed
	// at accept. Default DefaultMaxConnections.
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
	if l.AdmissionWait <= 0 {
		l.AdmissionWait = DefaultAdmissionWait
	}
	return l
}

// Readiness is the coordinator's readiness with the reasons it is not ready.
type Readiness struct {
	Ready   bool
	Reasons []string
}

// Coordinator serves the control protocol. Create it with New and run it
// with Run.
type Coordinator struct {
	opts          Options
	log           *slog.Logger
	now           func() time.Time
	m             *coordMetrics
	proc          *metrics.Process
	incarnation   string
	startUnixMs   int64
	advertise     string
	views         atomic.Pointer[batcher] // set by Run; nil before
	bg            sync.WaitGroup          // background goroutines: batched reads, loops
	connWG        sync.WaitGroup          // connection goroutines
	inflight      sync.WaitGroup          // requests being served
	kick          chan struct{}           // asks the refresh loop for a new view now
	writeSlots    chan struct{}           // one token per store write in flight (Limits.MaxInflightWrites)
	lookups       atomic.Uint64
	lookupErrors  atomic.Uint64
	storeErrors   atomic.Uint64
	requests      atomic.Uint64
	requestErrors atomic.Uint64

	mu       sync.Mutex // guards the fields below
	lastGood *View
	// appliedRead is the sequence number of the latest-started snapshot
	// read whose outcome was applied (see applyRead).
	appliedRead uint64
	// graceUntil ends the recovery grace after a store outage (see
	// holdAfterOutage); zero when none is open.
	graceUntil time.Time
	// newSinceView holds the nodes this coordinator registered since
	// lastGood was read, so max-records counts them before a view does.
	// Each maps to the number of snapshot reads started when it was
	// noted: a read started after that includes it.
	newSinceView map[cluster.Key]uint64
	lastErr      error
	storeOK      bool
	synced       bool   // a view has been read at least once
	registered   bool   // this coordinator's own record has been accepted
	refusal      string // why the store refuses this coordinator's own record; "" when it does not
	draining     bool
	closing      bool // past the drain delay: new requests are refused
	pushed       placement.Version
	havePushed   bool
	conns        map[*conn]struct{}
	subscribers  map[*conn]struct{}
}

// New returns a coordinator. It has no side effects: nothing is read,
// written or started until Run.
func New(opts Options) (*Coordinator, error) {
	if err := opts.Timing.Validate(); err != nil {
		return nil, err
	}
	switch {
	case opts.Store == nil:
		return nil, errors.New("coordinator: Store is required")
	case opts.Listener == nil:
		return nil, errors.New("coordinator: Listener is required")
	case opts.Logger == nil, opts.Clock == nil, opts.Registerer == nil, opts.Process == nil:
		return nil, errors.New("coordinator: Logger, Clock, Registerer and Process are required")
	case opts.RequestTimeout <= 0:
		return nil, fmt.Errorf("coordinator: request timeout %s must be positive", opts.RequestTimeout)
	}
	if err := cluster.ValidateID("cluster-id", opts.ClusterID); err != nil {
		return nil, err
	}
	if err := cluster.ValidateID("node-id", opts.NodeID); err != nil {
		return nil, err
	}
	opts.Limits = opts.Limits.withDefaults()
	if opts.PlacementReplicas <= 0 {
		opts.PlacementReplicas = 2
	}
	m, err := newCoordMetrics(opts.Registerer, opts.Store.Backend())
	if err != nil {
		return nil, fmt.Errorf("coordinator metrics: %w", err)
	}
	if sk, ok := opts.Store.(skewEstimator); ok {
		if err := registerSkew(opts.Registerer, sk); err != nil {
			return nil, fmt.Errorf("coordinator metrics: %w", err)
		}
	}
	advertise := opts.Advertise
	if advertise == "" {
		advertise = opts.Listener.Addr().String()
	}
	c := &Coordinator{
		opts:         opts,
		log:          opts.Logger.With("component", "coordinator"),
		now:          opts.Clock,
		m:            m,
		proc:         opts.Process,
		incarnation:  cluster.NewIncarnationID(),
		startUnixMs:  opts.Clock().UnixMilli(),
		advertise:    advertise,
		kick:         make(chan struct{}, 1),
		conns:        map[*conn]struct{}{},
		subscribers:  map[*conn]struct{}{},
		newSinceView: map[cluster.Key]uint64{},
	}
	c.writeSlots = make(chan struct{}, c.opts.Limits.MaxInflightWrites)
	return c, nil
}

// Close releases a coordinator that will not be run: it closes the
// listener. Run closes it itself; do not call Close after Run.
func (c *Coordinator) Close() error { return c.opts.Listener.Close() }

// Addr returns the control listener's address.
func (c *Coordinator) Addr() net.Addr { return c.opts.Listener.Addr() }

// NodeID returns the coordinator's node ID.
func (c *Coordinator) NodeID() string { return c.opts.NodeID }

// ClusterID returns the coordinator's cluster ID.
func (c *Coordinator) ClusterID() string { return c.opts.ClusterID }

// Backend names the state backend.
func (c *Coordinator) Backend() string { return c.opts.Store.Backend() }

// Timing returns the heartbeat timing the coordinator applies.
func (c *Coordinator) Timing() cluster.Timing { return c.opts.Timing }

// Run serves until ctx ends, then drains and returns. It returns an error
// only when the coordinator could not serve at all.
func (c *Coordinator) Run(ctx context.Context) error {
	base, stopBase := context.WithCancel(context.WithoutCancel(ctx))
	c.views.Store(&batcher{fetch: c.fetch, base: base, timeout: c.opts.RequestTimeout, wg: &c.bg})

	hbCtx, stopHeartbeats := context.WithCancel(base)
	hbDone := make(chan struct{})
	go func() { defer close(hbDone); c.heartbeatLoop(hbCtx) }()
	c.bg.Add(2)
	go func() { defer c.bg.Done(); c.refreshLoop(base) }()
	go func() { defer c.bg.Done(); c.watchLoop(base) }()
	c.connWG.Add(1)
	go func() { defer c.connWG.Done(); c.acceptLoop() }()
	c.log.Info("coordinator listening; waiting for the store before serving", "control", c.advertise, "node", c.opts.NodeID, "cluster", c.opts.ClusterID, "backend", c.opts.Store.Backend())

	<-ctx.Done()
	c.shutdown(func() { stopHeartbeats(); <-hbDone })
	stopBase()
	c.bg.Wait()
	return nil
}

// shutdown drains: unready, serve for DrainDelay, stop accepting, wait for
// in-flight requests up to ShutdownTimeout, close connections, stop
// heartbeats and deregister.
func (c *Coordinator) shutdown(stopHeartbeats func()) {
	c.mu.Lock()
	c.draining = true
	c.mu.Unlock()
	c.updateReadyMetric()
	c.log.Info("draining: reporting unready and serving for the drain delay", "drain_delay", c.opts.DrainDelay)
	time.Sleep(c.opts.DrainDelay)

	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	_ = c.opts.Listener.Close()
	done := make(chan struct{})
	go func() { c.inflight.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(c.opts.ShutdownTimeout):
		c.log.Warn("shutdown timeout passed with requests in flight; closing connections", "shutdown_timeout", c.opts.ShutdownTimeout)
	}
	c.mu.Lock()
	for cn := range c.conns {
		_ = cn.nc.Close()
	}
	c.mu.Unlock()
	c.connWG.Wait()
	<-done

	// No heartbeat may follow the removal, or it would re-create the record.
	stopHeartbeats()
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.RequestTimeout)
	defer cancel()
	key := cluster.Key{ClusterID: c.opts.ClusterID, Role: cluster.RoleCoordinator, NodeID: c.opts.NodeID}
	if _, err := c.opts.Store.RemoveNode(ctx, key, c.incarnation); err != nil {
		c.log.Warn("could not remove own record; it expires with its lease", "error", err)
	}
	c.log.Info("coordinator stopped")
}

// View returns a consistent view read after the call began. When the
// store cannot be read within the request timeout, or Run has not started,
// it returns an error wrapping ErrNotReady (and the store's error).
func (c *Coordinator) View(ctx context.Context) (*View, error) {
	b := c.views.Load()
	if b == nil {
		return nil, fmt.Errorf("%w: the coordinator is not running yet", ErrNotReady)
	}
	v, err := b.get(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotReady, err)
	}
	return v, nil
}

// LastGood returns the last view successfully read, for diagnostics only:
// it may be stale, and callers must mark it so with its ObservedAt. It is
// nil before the first successful read.
func (c *Coordinator) LastGood() *View {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastGood
}

// LastError returns the last store error seen, nil once the store answers again.
func (c *Coordinator) LastError() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastErr
}

// current reports whether the last snapshot read succeeded.
func (c *Coordinator) current() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.storeOK && c.synced
}

// Readiness reports whether the coordinator should receive traffic.
func (c *Coordinator) Readiness() Readiness {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.readinessLocked()
}

func (c *Coordinator) readinessLocked() Readiness {
	var reasons []string
	if c.draining {
		reasons = append(reasons, "draining: shutting down")
	}
	if !c.storeOK {
		if c.lastErr != nil {
			reasons = append(reasons, "store unreachable: "+c.lastErr.Error())
		} else {
			reasons = append(reasons, "warming up: the store has not answered yet")
		}
	}
	if !c.synced {
		reasons = append(reasons, "warming up: no cluster snapshot yet")
	}
	switch {
	case c.refusal != "":
		reasons = append(reasons, "own record refused: "+c.refusal)
	case !c.registered:
		reasons = append(reasons, "warming up: own record not yet accepted by the store")
	}
	return Readiness{Ready: len(reasons) == 0, Reasons: reasons}
}

func (c *Coordinator) updateReadyMetric() { c.proc.SetReady(c.Readiness().Ready) }

// Lookup answers a placement lookup from a fresh view.
func (c *Coordinator) Lookup(ctx context.Context, key string, replicas int) ([]placement.Owner, placement.Version, error) {
	start := c.now()
	c.lookups.Add(1)
	owners, version, err := c.lookup(ctx, key, replicas)
	c.m.placementDur.Observe(c.now().Sub(start).Seconds())
	if err != nil {
		c.lookupErrors.Add(1)
		c.m.placementErrs.WithLabelValues(wireCode(err).String()).Inc()
	}
	return owners, version, err
}

func (c *Coordinator) lookup(ctx context.Context, key string, replicas int) ([]placement.Owner, placement.Version, error) {
	if replicas < 1 || replicas > protocol.MaxReplicas {
		return nil, 0, protocol.NewError(protocol.CodeInvalidArgument, "replicas %d: must be from 1 to %d", replicas, protocol.MaxReplicas)
	}
	v, err := c.View(ctx)
	if err != nil {
		return nil, 0, protocol.NewError(protocol.CodeNotReady, "no current cluster view (the shared store could not be read in time); retry")
	}
	owners := v.Table.Lookup(key, replicas)
	if len(owners) == 0 {
		return nil, v.Version(), protocol.NewError(protocol.CodeNoWorkers, "no healthy, ready worker in cluster %s", c.opts.ClusterID)
	}
	return owners, v.Version(), nil
}

// fetch reads a snapshot and builds a view; it is the batcher's read.
func (c *Coordinator) fetch(ctx context.Context, seq uint64) (*View, error) {
	start := c.now()
	snap, err := c.opts.Store.Snapshot(ctx, c.opts.ClusterID)
	c.m.storeDuration.WithLabelValues("snapshot").Observe(c.now().Sub(start).Seconds())
	if err != nil {
		if c.applyRead(seq) {
			c.noteStoreError("snapshot", err)
		} else {
			c.m.storeErrors.WithLabelValues("snapshot", state.Code(err)).Inc()
		}
		return nil, err
	}
	if !c.applyRead(seq) {
		// A read that started later was applied already: its view is at
		// least as new. This one still answers its callers, who asked
		// before it began.
		prev := c.LastGood()
		if prev != nil && prev.Snapshot.Revision == snap.Revision {
			return prev, nil
		}
		eligible, excluded := placement.Eligible(snap.Records)
		table, err := placement.New(eligible)
		if err != nil {
			return nil, fmt.Errorf("build placement: %w", err)
		}
		return &View{Snapshot: snap, Table: table, Excluded: excluded, ObservedAt: c.now(),
			stableUntilUnixMs: nextTransition(snap.Records, snap.ObservedAtUnixMs, c.opts.Timing)}, nil
	}
	prev := c.LastGood()
	if held := c.holdAfterOutage(prev, snap); held != nil {
		c.noteView(held, true, seq)
		return held, nil
	}
	if prev != nil && prev.Snapshot.Revision == snap.Revision && snap.ObservedAtUnixMs < prev.stableUntilUnixMs {
		// Same records, and no record has crossed a health or lease
		// threshold since: the placement is the same. This is the common
		// case under a burst of lookups, and it skips the O(n) work.
		v := &View{Snapshot: snap, Table: prev.Table, Excluded: prev.Excluded, ObservedAt: c.now(), stableUntilUnixMs: prev.stableUntilUnixMs}
		c.noteView(v, false, seq)
		return v, nil
	}
	eligible, excluded := placement.Eligible(snap.Records)
	var table *placement.Table
	if prev != nil && slices.Equal(prev.Table.Nodes(), eligible) {
		table = prev.Table // same membership: reuse the pre-hashed table
	} else if table, err = placement.New(eligible); err != nil {
		return nil, fmt.Errorf("build placement: %w", err)
	}
	v := &View{Snapshot: snap, Table: table, Excluded: excluded, ObservedAt: c.now(),
		stableUntilUnixMs: nextTransition(snap.Records, snap.ObservedAtUnixMs, c.opts.Timing)}
	c.noteView(v, true, seq)
	return v, nil
}

// holdAfterOutage returns a view of snap that keeps prev's placement,
// when snap is the first read after a store outage (or within the
// recovery grace that read started) and lacks workers prev placed on;
// otherwise nil. See Options.RecoveryGrace.
func (c *Coordinator) holdAfterOutage(prev *View, snap *state.Snapshot) *View {
	grace := c.opts.RecoveryGrace
	if grace == 0 {
		grace = 2 * c.opts.Timing.HeartbeatInterval
	}
	if grace < 0 || prev == nil {
		return nil
	}
	now := c.now()
	c.mu.Lock()
	opened := false
	if !c.storeOK && c.synced {
		// The first answer after an outage opens the grace window.
		c.graceUntil, opened = now.Add(grace), true
	}
	within := now.Before(c.graceUntil)
	c.mu.Unlock()
	if !within {
		return nil
	}
	eligible, excluded := placement.Eligible(snap.Records)
	have := make(map[string]bool, len(eligible))
	for _, n := range eligible {
		have[n.ID] = true
	}
	missing := 0
	for _, n := range prev.Table.Nodes() {
		if !have[n.ID] {
			missing++
		}
	}
	if missing == 0 {
		c.mu.Lock()
		c.graceUntil = time.Time{} // everyone is back: the grace ends
		c.mu.Unlock()
		return nil
	}
	if opened {
		c.log.Info("store back after an outage: holding the last placement while workers re-register", "missing_workers", missing, "grace", grace)
	}
	return &View{Snapshot: snap, Table: prev.Table, Excluded: excluded, ObservedAt: now,
		stableUntilUnixMs: snap.ObservedAtUnixMs} // re-evaluated on the next read
}

// applyRead reports whether the outcome of snapshot read seq may update
// the coordinator's state, and claims it: false when a read that started
// later was applied first (pipelined reads can finish out of order).
func (c *Coordinator) applyRead(seq uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if seq < c.appliedRead {
		return false
	}
	c.appliedRead = seq
	return true
}

// nextTransition returns the earliest time after now at which a record
// turns unhealthy or expires by age alone: until then, the same records
// give the same placement.
func nextTransition(records []*cluster.Record, nowUnixMs int64, t cluster.Timing) int64 {
	next := int64(math.MaxInt64)
	for _, r := range records {
		for _, d := range [2]time.Duration{t.UnhealthyAfter, t.LeaseTTL} {
			if at := r.UpdatedAtUnixMs + d.Milliseconds(); at > nowUnixMs && at < next {
				next = at
			}
		}
	}
	return next
}

// noteView records a successful read: readiness, metrics and, when the
// placement version changed, a push to subscribers. recount says whether
// the records may have changed (node gauges are recomputed only then).
func (c *Coordinator) noteView(v *View, recount bool, seq uint64) {
	c.mu.Lock()
	if seq < c.appliedRead {
		// A later-started read was applied meanwhile: keep its newer view.
		c.mu.Unlock()
		return
	}
	wasOK, first, prev := c.storeOK, !c.synced, c.lastGood
	oldVersion, hadVersion := c.pushed, c.havePushed
	c.lastGood, c.lastErr, c.storeOK, c.synced = v, nil, true, true
	for k, started := range c.newSinceView {
		if started < seq { // read seq began after k was registered
			delete(c.newSinceView, k)
		}
	}
	changed := !c.havePushed || c.pushed != v.Version()
	c.pushed, c.havePushed = v.Version(), true
	var subs []*conn
	if changed {
		for s := range c.subscribers {
			subs = append(subs, s)
		}
	}
	c.mu.Unlock()
	switch {
	case first:
		c.log.Info("coordinator serving: the store answered", "control", c.advertise, "backend", c.opts.Store.Backend(),
			"records", len(v.Snapshot.Records), "revision", v.Snapshot.Revision.String(), "placement_version", v.Version().String())
	case !wasOK:
		c.log.Info("store answered: cluster view is current", "revision", v.Snapshot.Revision.String(), "placement_version", v.Version().String())
	}
	c.updateReadyMetric()
	c.m.snapshotAge.Set(0)
	if recount {
		c.countNodes(v)
		if prev != nil {
			c.logMembership(prev, v)
		}
	}
	if changed {
		if hadVersion {
			c.log.Info("placement version changed", "old", oldVersion.String(), "new", v.Version().String(), "eligible_workers", v.Table.Len())
		}
		c.m.versionChanges.Inc()
		for _, s := range subs {
			s.offer(uint64(v.Version()))
		}
	}
}

// maxMembershipEvents bounds the node events one view logs; the rest are
// summed up in one line (a mass expiry must not flood the log).
const maxMembershipEvents = 20

// logMembership logs, one structured line each, the nodes that joined,
// changed health, or expired or were removed between prev and v.
func (c *Coordinator) logMembership(prev, v *View) {
	health := func(view *View) map[cluster.Key]cluster.Health {
		m := make(map[cluster.Key]cluster.Health, len(view.Snapshot.Records))
		for _, r := range view.Snapshot.Records {
			m[r.Key()] = r.EffectiveHealth()
		}
		return m
	}
	before, after := health(prev), health(v)
	logged, dropped := 0, 0
	event := func(level slog.Level, msg string, k cluster.Key, args ...any) {
		if logged >= maxMembershipEvents {
			dropped++
			return
		}
		logged++
		c.log.Log(context.Background(), level, msg, append([]any{"role", string(k.Role), "node", k.NodeID}, args...)...)
	}
	for k, h := range after {
		old, ok := before[k]
		switch {
		case !ok:
			addr := ""
			if r := v.record(k); r != nil {
				addr = r.Address
			}
			event(slog.LevelInfo, "node joined", k, "health", string(h), "address", addr)
		case old != h && h == cluster.HealthHealthy:
			event(slog.LevelInfo, "node recovered", k, "was", string(old))
		case old != h:
			event(slog.LevelWarn, "node health changed", k, "was", string(old), "now", string(h))
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			event(slog.LevelWarn, "node expired or removed", k)
		}
	}
	if dropped > 0 {
		c.log.Warn("more membership changes not logged one by one", "count", dropped)
	}
}

// countNodes sets the live-node gauges and the eligible-worker gauge from
// v. The eligible count is v's placement table, not a recount of the
// records: after a store outage a held view keeps the previous placement
// (holdAfterOutage), and the gauge says what lookups actually use.
func (c *Coordinator) countNodes(v *View) {
	c.m.eligible.Set(float64(v.Table.Len()))
	under := 0.0
	if v.Table.Len() < c.opts.PlacementReplicas {
		under = 1
	}
	c.m.underRepl.Set(under)
	counts := map[[2]string]int{}
	for _, r := range v.Snapshot.Records {
		counts[[2]string{string(r.Role), string(r.EffectiveHealth())}]++
	}
	for _, r := range cluster.Roles() {
		for _, h := range cluster.HealthStates() {
			c.m.nodes.WithLabelValues(string(r), string(h)).Set(float64(counts[[2]string{string(r), string(h)}]))
		}
	}
}

// noteStoreError records a failed store operation. Only a failed snapshot
// read makes the coordinator fail closed (unready): a lost write race, an
// invalid record or a broken watch say nothing about whether the
// coordinator can answer from a current view.
func (c *Coordinator) noteStoreError(op string, err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	c.storeErrors.Add(1)
	c.m.storeErrors.WithLabelValues(op, state.Code(err)).Inc()
	if op != "snapshot" {
		c.log.Debug("store operation failed", "operation", op, "error", err)
		return
	}
	c.mu.Lock()
	wasOK := c.storeOK
	c.storeOK, c.lastErr = false, err
	lastGood := c.lastGood
	c.mu.Unlock()
	if wasOK {
		c.log.Warn("store unreachable: failing closed (unready, lookups refused)", "operation", op, "error", err)
	}
	if lastGood != nil {
		c.m.snapshotAge.Set(c.now().Sub(lastGood.ObservedAt).Seconds())
	}
	c.updateReadyMetric()
}

// selfRecord builds this coordinator's own status record.
func (c *Coordinator) selfRecord(seq uint64) *cluster.Record {
	rd := c.Readiness()
	c.mu.Lock()
	storeOK := c.storeOK
	c.mu.Unlock()
	health := cluster.HealthHealthy
	if !storeOK {
		health = cluster.HealthDegraded
	}
	return &cluster.Record{
		ClusterID:       c.opts.ClusterID,
		NodeID:          c.opts.NodeID,
		Role:            cluster.RoleCoordinator,
		IncarnationID:   c.incarnation,
		Address:         c.advertise,
		AdminAddress:    c.opts.AdminAddress,
		Version:         buildinfo.Version,
		StartTimeUnixMs: c.startUnixMs,
		HeartbeatSeq:    seq,
		Health:          health,
		Ready:           rd.Ready,
		Capacity:        cluster.Capacity{StoreHealthy: storeOK},
		Counters: cluster.Counters{
			RequestsTotal:         c.requests.Load(),
			ErrorsTotal:           c.requestErrors.Load(),
			PlacementLookupsTotal: c.lookups.Load(),
			PlacementErrorsTotal:  c.lookupErrors.Load(),
			StoreErrorsTotal:      c.storeErrors.Load(),
		},
		Labels: c.opts.Labels,
	}
}

// heartbeatLoop keeps this coordinator's own record fresh: it registers
// until the store accepts, then heartbeats. Every attempt consumes a
// sequence number, so a write that timed out but landed is never followed
// by different content under the same sequence. A refusal turns the
// coordinator unready with the reason (another live process with this
// node ID, or a record that is gone) until a registration is accepted.
func (c *Coordinator) heartbeatLoop(ctx context.Context) {
	var seq uint64
	register := true
	interval := c.opts.Timing.HeartbeatInterval
	// retry is the wait after a failed write: a store that sheds load
	// (state.ErrUnavailable) or times out is tried again soon, not a whole
	// interval later, so a coordinator starting under saturation registers
	// (and turns ready) within a few backoffs. It doubles up to the interval.
	const firstRetry = 100 * time.Millisecond
	retry := firstRetry
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		var opts []state.UpsertOption
		if !register {
			opts = append(opts, state.Heartbeat())
		}
		rec := c.selfRecord(seq)
		seq++
		wctx, cancel := context.WithTimeout(ctx, c.opts.RequestTimeout)
		start := c.now()
		res, err := c.opts.Store.UpsertNode(wctx, rec, c.opts.Timing.LeaseTTL, opts...)
		cancel()
		c.m.storeDuration.WithLabelValues("upsert").Observe(c.now().Sub(start).Seconds())
		wait := interval
		switch {
		case err != nil:
			c.noteStoreError("upsert", err)
			wait = min(retry, interval)
			retry = min(2*retry, interval)
		case res.Outcome == state.OutcomeAccepted || res.Outcome == state.OutcomeDuplicate:
			retry = firstRetry
			register = false
			c.setRefusal("")
			c.mu.Lock()
			first := !c.registered
			c.registered = true
			c.mu.Unlock()
			if first {
				c.log.Info("own record accepted", "outcome", res.Outcome.String(), "revision", res.Revision.String(), "generation", res.Record.Generation)
			}
			c.updateReadyMetric()
			c.requestRefresh()
		default:
			c.m.selfRefusals.WithLabelValues(res.Outcome.String()).Inc()
			reason := "the record is gone from the store; registering again"
			if res.Outcome == state.OutcomeStale {
				reason = fmt.Sprintf("duplicate node ID: node %q is held by another live process (incarnation %s); this process (incarnation %s) was superseded",
					c.opts.NodeID, res.Record.IncarnationID, c.incarnation)
			}
			c.setRefusal(reason)
			register = true
		}
		t.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// setRefusal records why the store refuses this coordinator's own record
// ("" when it accepts), logging at error level once per change.
func (c *Coordinator) setRefusal(reason string) {
	c.mu.Lock()
	changed := c.refusal != reason
	c.refusal = reason
	c.mu.Unlock()
	if !changed {
		return
	}
	if reason != "" {
		c.log.Error("store refuses this coordinator's own record; not ready", "reason", reason)
	} else {
		c.log.Info("store accepts this coordinator's own record again")
	}
	c.updateReadyMetric()
}

// requestRefresh asks the refresh loop for a new view without waiting.
func (c *Coordinator) requestRefresh() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// refreshLoop reads the view periodically and on request, so readiness,
// metrics and placement-version pushes follow the store even when no
// lookup arrives, including health changes that come only from time
// passing (a worker going silent).
func (c *Coordinator) refreshLoop(ctx context.Context) {
	every := min(c.opts.Timing.HeartbeatInterval, time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		_, _ = c.views.Load().get(ctx)
		// A minimum gap keeps a burst of membership changes from turning
		// into back-to-back store reads (a full LIST on Kubernetes).
		if !sleepCtx(ctx, minRefreshGap) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-c.kick:
		}
	}
}

// minRefreshGap is the least time between two background view reads.
const minRefreshGap = 200 * time.Millisecond

// watchLoop follows the store's change stream to push placement changes
// promptly. It recovers from compaction by re-reading and re-watching.
func (c *Coordinator) watchLoop(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		v, err := c.views.Load().get(ctx)
		if err != nil {
			if !sleepCtx(ctx, backoff) {
				return
			}
			backoff = min(2*backoff, c.opts.Timing.HeartbeatInterval)
			continue
		}
		wctx, cancel := context.WithCancel(ctx)
		for batch := range c.opts.Store.Watch(wctx, c.opts.ClusterID, v.Snapshot.Revision) {
			if batch.Err != nil {
				if errors.Is(batch.Err, state.ErrCompacted) {
					c.log.Info("watch revision compacted; re-reading the cluster", "revision", v.Snapshot.Revision.String())
				} else if ctx.Err() == nil {
					c.noteStoreError("watch", batch.Err)
				}
				break
			}
			backoff = 100 * time.Millisecond
			if c.placementRelevant(batch.Events) {
				c.requestRefresh()
			}
		}
		cancel()
		if !sleepCtx(ctx, backoff) {
			return
		}
	}
}

// placementRelevant reports whether any event may change placement or
// the node counts: a removal, a new node, or a change of incarnation,
// address, readiness or reported health. Plain heartbeats (only the
// sequence and counters move) do not need a new view; time-driven changes
// are caught by the periodic refresh.
func (c *Coordinator) placementRelevant(events []state.Event) bool {
	last := c.LastGood()
	if last == nil {
		return true
	}
	for _, ev := range events {
		if ev.Type != state.EventPut || ev.Record == nil {
			return true
		}
		old := last.record(ev.Key)
		r := ev.Record
		if old == nil || old.IncarnationID != r.IncarnationID || old.Address != r.Address || old.Ready != r.Ready || old.Health != r.Health {
			return true
		}
	}
	return false
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
