package coordinator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/netlimit"
	"github.com/talonhq/talon/internal/readiness"
	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/tracing"
)

// The coordinator's life: New wires its parts together, Run starts them
// and drains on shutdown. The parts live in files of their own and know
// nothing of this one.

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
	}
	c.ready = c.newReadiness()
	c.departed = newDepartures(max(c.opts.Limits.MaxRecords, 1))
	c.proc.ReadyFrom(c.ready.Ready)
	c.jobs = newJobBoard(c)
	c.proposer = newProposer(c)
	c.cordons = newCordons(c)
	c.refresh = newRefresher(c)
	c.members = &membershipLog{clusterID: opts.ClusterID, log: c.log, departed: c.departed, mono: c.mono, add: c.addEvent}
	if err := c.registerPresence(opts.Registerer); err != nil {
		return nil, fmt.Errorf("coordinator metrics: %w", err)
	}
	if err := c.openSharedEvents(); err != nil {
		return nil, err
	}
	lim := netlimit.Defaults(c.opts.Limits.MaxConnections)
	if opts.TLS == nil {
		// No credentials to wait for: nothing is ever pending.
		lim.MaxPending, lim.MaxPendingPerAddress = 0, 0
	}
	c.ctl = &controlServer{
		h: newHandler(c), log: c.log, nodeID: opts.NodeID, m: m, proc: c.proc, tracer: c.tracer, now: c.now,
		opts:  controlOptions{Limits: c.opts.Limits, TLS: opts.TLS, Revoked: opts.Revoked, RequestTimeout: opts.RequestTimeout},
		ln:    netlimit.Wrap(opts.Listener, lim, func(reason string) { m.limitRefusals.WithLabelValues(reason).Inc() }),
		subs:  newSubscribers(),
		conns: map[*conn]struct{}{},
	}
	if c.self, err = newOwnRecord(c); err != nil {
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
	go func() { defer close(selfDone); c.self.loop.Run(selfCtx) }()
	c.bg.Add(3)
	if c.shared != nil {
		c.bg.Add(1)
		go func() { defer c.bg.Done(); c.shared.run(base) }()
	}
	go func() { defer c.bg.Done(); c.refresh.run(base) }()
	go func() { defer c.bg.Done(); c.refresh.watch(base) }()
	go func() { defer c.bg.Done(); c.proposer.run(base) }()
	c.bg.Add(1)
	go func() { defer c.bg.Done(); c.jobs.run(base, c.opts.Timing.HeartbeatInterval) }()
	if r := newRenewalPublisher(c); r != nil {
		c.evidence.shareRenewals()
		c.bg.Add(1)
		go func() { defer c.bg.Done(); r.run(base) }()
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

// registerPresence exports the cache jobs running (registerJobs), the coordinators expected (coordinator-replicas)
// and the ones with a live record in the last good view, so an alert can
// fire when one is missing (max(present) < max(expected) over the
// coordinators).
func (c *Coordinator) registerPresence(reg prometheus.Registerer) error {
	if err := c.jobs.registerJobs(reg); err != nil {
		return err
	}
	if err := reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "talon_coordinators_expected",
		Help: "Coordinators the cluster is configured to run (coordinator-replicas).",
	}, func() float64 { return float64(c.ExpectedCoordinators()) })); err != nil {
		return err
	}
	if err := reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "talon_coordinators_present",
		Help: "Coordinators with a live record in this coordinator's last good view (0 before any).",
	}, func() float64 {
		v := c.LastGood()
		if v == nil {
			return 0
		}
		n := 0
		for _, r := range v.Snapshot.Records {
			if r != nil && r.Role == cluster.RoleCoordinator {
				n++
			}
		}
		return float64(n)
	})); err != nil {
		return err
	}
	return registerUpgradeMetrics(reg, c.LastGood)
}
