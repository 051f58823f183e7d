package worker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/talonhq/talon/internal/buildinfo"
	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/membership"
	"github.com/talonhq/talon/internal/metrics"
	"github.com/talonhq/talon/internal/netlimit"
	"github.com/talonhq/talon/internal/protocol"
	"github.com/talonhq/talon/internal/readiness"
	"github.com/talonhq/talon/internal/tracing"
)

// StatusSource supplies the capacity, inventory and counters a heartbeat
// carries (the worker's stats).
type StatusSource interface {
	Status() (cluster.Capacity, cluster.Counters)
}

// Options configures a Worker.
type Options struct {
	ClusterID string
	NodeID    string
	Labels    map[string]string
	// Advertise is the data address in the record; empty means the data
	// listener's address.
	Advertise    string
	AdminAddress string
	Coordinators []string
	// Rotate sends each heartbeat to the next coordinator in turn first,
	// as a load balancer spreading connections would (used by tests and by
	// deployments without a service address); Client fails over from it.
	Rotate bool

	Timing          cluster.Timing
	RequestTimeout  time.Duration
	DrainDelay      time.Duration
	ShutdownTimeout time.Duration

	DataListener net.Listener
	DataHandler  http.Handler
	Status       StatusSource
	// Client is the placement client (shared with the data handler's
	// ownership checks); the worker uses it for heartbeats too.
	Client *client.Client
	Logger *slog.Logger
	Clock  func() time.Time
	// Registerer receives the worker's metrics (heartbeat outcomes, data
	// connections refused by the cap, data timeouts); Process holds the
	// process-wide ones.
	Registerer prometheus.Registerer
	Process    *metrics.Process
	// Tracers, when set, receives a span for each registration and
	// heartbeat; nil means none.
	Tracers trace.TracerProvider
	// DataLimits bound the data listener; zero fields take the defaults.
	DataLimits DataLimits
	// DiskErrors, if set, returns the cache directory failures counted so
	// far: new ones make the next record degraded, and DiskErrorStreak
	// heartbeats in a row with new ones make the worker unready (placement
	// moves away) until a heartbeat interval passes without one. The data
	// listener keeps serving meanwhile (the cache reads through to the
	// blob store).
	DiskErrors func() uint64
	// DiskProbe, if set, checks that the cache directory takes writes; an
	// unready worker turns ready again only once it passes (no traffic is
	// not proof of a repaired disk).
	DiskProbe func() error
	// DataTLS, when set, serves the data listener over mutual TLS (see
	// package pki); nil serves plain HTTP (insecure-control-plane).
	DataTLS *tls.Config
	// CordonFile is where a persisted cordon is kept (cordon.go); empty
	// refuses persisted cordons. A worker that finds it starts cordoned.
	CordonFile string
	// Jobs, when set, lets the worker run the operator's cache jobs
	// (jobs.go); nil runs none.
	Jobs *JobOptions
}

// DiskErrorStreak is how many accepted heartbeats in a row with new cache
// disk errors make a worker unready.
const DiskErrorStreak = 3

// Readiness is the worker's readiness with reasons, in the order of
// readinessOrder.
type Readiness = readiness.Report

// Worker is the worker runtime.
type Worker struct {
	opts        Options
	log         *slog.Logger
	incarnation string
	startUnixMs int64
	advertise   string
	metrics     *workerMetrics
	server      *http.Server
	dataLn      net.Listener  // DataListener behind the connection cap
	next        atomic.Uint64 // rotation index

	hb       *membership.Loop // registration and heartbeats
	cordon   *cordon          // an operator's out-of-service request
	inflight *inflight        // data requests being served
	ready    *readiness.Tracker
	jobs     *jobRunner // the operator's cache jobs; nil without Options.Jobs

	mu         sync.Mutex // guards the fields below
	draining   bool
	last       *cluster.Record // last record sent and accepted
	lastRev    string          // store revision in last's acknowledgement
	lastBE     uint64          // backend errors in the last accepted record
	sentDE     uint64          // disk errors when the last record was built
	lastDE     uint64          // disk errors when the last accepted record was built
	diskStreak int             // accepted records in a row with new disk errors
}

// New returns a worker; nothing starts until Run.
func New(opts Options) (*Worker, error) {
	if err := opts.Timing.Validate(); err != nil {
		return nil, err
	}
	switch {
	case opts.DataListener == nil, opts.DataHandler == nil:
		return nil, errors.New("worker: DataListener and DataHandler are required")
	case opts.Client == nil, opts.Logger == nil, opts.Clock == nil, opts.Registerer == nil, opts.Process == nil:
		return nil, errors.New("worker: Client, Logger, Clock, Registerer and Process are required")
	case len(opts.Coordinators) == 0:
		return nil, errors.New("worker: at least one coordinator address is required")
	}
	if err := cluster.ValidateID("cluster-id", opts.ClusterID); err != nil {
		return nil, err
	}
	if err := cluster.ValidateID("node-id", opts.NodeID); err != nil {
		return nil, err
	}
	m, err := newWorkerMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	w := &Worker{
		opts:        opts,
		metrics:     m,
		log:         opts.Logger.With("component", "worker"),
		incarnation: cluster.NewIncarnationID(),
		startUnixMs: opts.Clock().UnixMilli(),
		advertise:   opts.Advertise,
	}
	if w.advertise == "" {
		w.advertise = opts.DataListener.Addr().String()
	}
	hb, err := w.newHeartbeatLoop()
	if err != nil {
		return nil, err
	}
	w.hb = hb
	if w.cordon, err = loadCordon(opts.CordonFile); err != nil {
		return nil, err
	}
	w.ready = w.newReadiness()
	opts.Process.ReadyFrom(w.ready.Ready)
	if on, _ := w.cordon.state(); on {
		w.log.Info("starting cordoned: a persisted cordon was found (talonctl nodes uncordon lifts it)", "file", opts.CordonFile)
	}
	w.inflight = &inflight{h: opts.DataHandler}
	w.jobs = w.newJobs()
	lim := opts.DataLimits.withDefaults()
	// Within MaxConnections, half from one address and a quarter before
	// a first request (after the TLS handshake): connections without a
	// credential cannot take the slots of readers that have one.
	nl := netlimit.Defaults(lim.MaxConnections)
	nl.MaxPerIdentity = lim.MaxPerCredential
	limited := netlimit.Wrap(opts.DataListener, nl, m.refusedConn)
	w.dataLn = &limitListener{Listener: limited, timeout: m.timeout}
	if opts.DataTLS != nil {
		// Outside the cap, so http.Server sees *tls.Conn: it bounds the
		// handshake by the header timeout and fills Request.TLS.
		w.dataLn = tls.NewListener(w.dataLn, opts.DataTLS)
	}
	w.server = &http.Server{
		// The first request of a connection admits it (datalimits.go):
		// no worker credentials, MaxPerCredential per client credential.
		Handler:     &admission{next: w.inflight, perCred: lim.MaxPerCredential, refused: m.refusedConn, insecure: opts.DataTLS == nil},
		ConnContext: withConn,
		// A new connection gets FrameTimeout for its request headers, an
		// idle keep-alive one IdleTimeout for the next request, and a
		// response WriteTimeout: a slow reader cannot pin an open block
		// file (or an evicted one) for longer.
		ReadHeaderTimeout: lim.FrameTimeout,
		IdleTimeout:       lim.IdleTimeout,
		WriteTimeout:      lim.WriteTimeout,
		MaxHeaderBytes:    16 << 10,
		ConnState: func(c net.Conn, s http.ConnState) {
			switch s {
			case http.StateNew:
				opts.Process.ConnOpened("data")
			case http.StateClosed, http.StateHijacked:
				opts.Process.ConnClosed("data")
			}
		},
	}
	return w, nil
}

// Close releases a worker that will not be run: it closes the data
// listener. Run closes it itself; do not call Close after Run.
func (w *Worker) Close() error { return w.opts.DataListener.Close() }

// NodeID returns the worker's node ID.
func (w *Worker) NodeID() string { return w.opts.NodeID }

// Incarnation returns this process's incarnation ID.
func (w *Worker) Incarnation() string { return w.incarnation }

// DataAddress returns the advertised data address.
func (w *Worker) DataAddress() string { return w.advertise }

// Readiness reports whether the worker should receive traffic: the
// report of its one readiness tracker (readiness.go).
func (w *Worker) Readiness() Readiness { return w.ready.Report() }

// Serving reports whether the data listener should answer: once registered,
// through the drain delay (unready but still serving, so requests routed
// here while load balancers catch up are answered), until shutdown.
func (w *Worker) Serving() bool { return w.hb.Status().Registered }

// Record returns the last status record a coordinator accepted, or nil.
func (w *Worker) Record() *cluster.Record {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last.Clone()
}

// LastAccepted returns a copy of the last status record a coordinator
// accepted together with the store revision its acknowledgement carried
// (opaque), read atomically; nil and "" before the first acceptance. The
// admin listener's /api/v1/status serves it.
func (w *Worker) LastAccepted() (*cluster.Record, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last.Clone(), w.lastRev
}

// Run serves until ctx ends, then drains and returns.
func (w *Worker) Run(ctx context.Context) error {
	serveErr := make(chan error, 1)
	go func() { serveErr <- w.server.Serve(w.dataLn) }()

	hbCtx, stopHB := context.WithCancel(context.WithoutCancel(ctx))
	hbDone := make(chan struct{})
	go func() { defer close(hbDone); w.hb.Run(hbCtx) }()
	w.log.Info("worker serving", "data", w.advertise, "node", w.opts.NodeID, "incarnation", w.incarnation)

	var err error
	select {
	case <-ctx.Done():
	case err = <-serveErr:
		err = fmt.Errorf("data listener: %w", err)
	}

	w.mu.Lock()
	w.draining = true
	w.mu.Unlock()
	w.ready.Set(readiness.Draining, readiness.DrainingReason)
	// Tell the coordinators right away that this worker leaves service.
	w.hb.Beat(hbCtx)
	if err == nil {
		w.log.Info("draining: unready, serving data for the drain delay", "drain_delay", w.opts.DrainDelay)
		time.Sleep(w.opts.DrainDelay)
		sctx, cancel := context.WithTimeout(context.Background(), w.opts.ShutdownTimeout)
		if serr := w.server.Shutdown(sctx); serr != nil {
			w.log.Warn("shutdown timeout passed with data requests in flight", "error", serr)
			_ = w.server.Close()
		}
		cancel()
		<-serveErr
	}
	stopHB()
	<-hbDone
	if w.jobs != nil {
		w.jobs.close()
	}
	w.deregister()
	w.log.Info("worker stopped")
	return err
}

// recordLocked builds the status record with sequence seq. Called with mu held.
func (w *Worker) recordLocked(seq uint64) *cluster.Record {
	var capy cluster.Capacity
	var counters cluster.Counters
	if w.opts.Status != nil {
		capy, counters = w.opts.Status.Status()
	}
	health := cluster.HealthHealthy
	if counters.BackendErrorsTotal > w.lastBE {
		// The blob store failed since the last accepted record; lastBE
		// moves only when a record carrying this signal is accepted, so a
		// failed heartbeat does not swallow it.
		health = cluster.HealthDegraded
	}
	if w.opts.DiskErrors != nil {
		w.sentDE = w.opts.DiskErrors()
		if w.sentDE > w.lastDE || w.diskStreak >= DiskErrorStreak {
			health = cluster.HealthDegraded // the cache directory failed (or still fails its probe)
		}
	}
	ready, reason := w.recordReadinessLocked()
	rec := &cluster.Record{
		ClusterID:       w.opts.ClusterID,
		NodeID:          w.opts.NodeID,
		Role:            cluster.RoleWorker,
		IncarnationID:   w.incarnation,
		Address:         w.advertise,
		AdminAddress:    w.opts.AdminAddress,
		Version:         buildinfo.Version,
		StartTimeUnixMs: w.startUnixMs,
		HeartbeatSeq:    seq,
		Health:          health,
		Ready:           ready,
		NotReadyReason:  reason,
		Capacity:        capy,
		Counters:        counters,
		Labels:          w.opts.Labels,
		FeatureLevel:    cluster.BuildLevel,
	}
	w.markRecordLocked(rec)
	return rec
}

// newHeartbeatLoop builds the worker's registration and heartbeat loop
// (package membership): it follows the interval and lease TTL that the
// coordinators send in every Ack, whatever the worker was started with.
func (w *Worker) newHeartbeatLoop() (*membership.Loop, error) {
	return membership.New(membership.Options{
		Role:        string(cluster.RoleWorker),
		NodeID:      w.opts.NodeID,
		Incarnation: w.incarnation,
		Write:       w.writeRecord,
		Interval:    w.opts.Timing.HeartbeatInterval,
		// The bound of one write; call narrows it to the heartbeat budget
		// of the interval in effect (which the cluster may set).
		RequestTimeout: w.opts.RequestTimeout,
		RetryInitial:   min(250*time.Millisecond, w.opts.Timing.HeartbeatInterval),
		Adopt:          true,
		Logger:         w.log,
		Now:            w.opts.Clock,
		OnAttempt:      func(membership.Report) { w.ready.Report() },
		Tracer:         tracing.Tracer(w.opts.Tracers, "worker"),
	})
}

// writeRecord sends one Register or Heartbeat carrying sequence a.Seq.
func (w *Worker) writeRecord(ctx context.Context, a membership.Attempt) (membership.Answer, error) {
	w.mu.Lock()
	rec := w.recordLocked(a.Seq)
	w.mu.Unlock()
	op := "heartbeat"
	var msg protocol.Message
	var err error
	if a.Register {
		op = "register"
		msg, err = protocol.NewRegister(rec)
	} else {
		msg, err = protocol.NewHeartbeat(rec)
	}
	if err != nil {
		w.log.Error("status record is invalid", "error", err)
		return membership.Answer{}, err
	}
	resp, err := w.call(ctx, msg)
	outcome := "ok"
	defer func() { w.metrics.heartbeat(op, outcome) }()
	if err != nil {
		outcome = protocol.CodeOf(err).String()
		return membership.Answer{}, err
	}
	ack, ok := resp.(*protocol.Ack)
	if !ok {
		outcome = "internal"
		return membership.Answer{}, fmt.Errorf("coordinator answered %s with %T, not an Ack", op, resp)
	}
	outcome = ack.Outcome.String()
	ans := membership.Answer{HeartbeatInterval: ack.HeartbeatInterval(), LeaseTTL: ack.LeaseTTL()}
	switch ack.Outcome {
	case protocol.OutcomeAccepted, protocol.OutcomeDuplicate:
		ans.Outcome = membership.Accepted
		w.accepted(rec, ack)
		if !a.Register {
			w.askInstructions(ctx) // a registration is not in any view yet
			w.askJobs()
		}
	case protocol.OutcomeNotFound:
		ans.Outcome = membership.NotFound
	default:
		ans.Outcome = membership.Superseded
	}
	return ans, nil
}

// minHeartbeatBudget is the least heartbeatBudget gives, request-timeout
// permitting: two attempts at the client's attempt floor.
const minHeartbeatBudget = 2 * client.DefaultMinAttemptTimeout

// heartbeatBudget is the deadline of one registration or heartbeat write:
// min(request-timeout, interval/2), but at least minHeartbeatBudget when
// request-timeout allows. Within it each of two attempts (one coordinator,
// then the next) gets half, so a hung or dying coordinator costs half the
// budget and the next one still answers within the same interval: the
// heartbeat lands at most interval/2 late and is never lost. Never past
// request-timeout, which unhealthy-after already allows for (unhealthy-after
// >= 2 x heartbeat-interval + request-timeout).
func heartbeatBudget(requestTimeout, interval time.Duration) time.Duration {
	return min(requestTimeout, max(interval/2, minHeartbeatBudget))
}

// call sends msg through the failover client within the heartbeat budget
// of the interval in effect, each attempt at one coordinator bounded by
// half of it; with Rotate the pass starts at the next coordinator in turn.
func (w *Worker) call(ctx context.Context, msg protocol.Message) (protocol.Message, error) {
	budget := heartbeatBudget(w.opts.RequestTimeout, w.hb.Status().Interval)
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	o := client.CallOptions{AttemptTimeout: budget / 2}
	if w.opts.Rotate {
		o.First = w.opts.Coordinators[w.next.Add(1)%uint64(len(w.opts.Coordinators))]
	}
	return w.opts.Client.CallWith(ctx, msg, o)
}

// accepted applies an accepted record: the degradation signals it carried
// are consumed, and it becomes the last accepted record.
func (w *Worker) accepted(rec *cluster.Record, ack *protocol.Ack) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lastBE = max(w.lastBE, rec.Counters.BackendErrorsTotal)
	if w.opts.DiskErrors != nil {
		w.diskAcceptedLocked()
	}
	rec.UpdatedAtUnixMs = ack.UpdatedAtUnixMs
	if w.last == nil || rec.HeartbeatSeq > w.last.HeartbeatSeq {
		w.last = rec
	}
	w.lastRev = ack.Revision
}

// diskAcceptedLocked moves the disk-error streak after an accepted record.
func (w *Worker) diskAcceptedLocked() {
	switch {
	case w.sentDE > w.lastDE:
		w.diskStreak++
		if w.diskStreak == DiskErrorStreak {
			w.log.Error("cache directory keeps failing: unready, so placement moves away; reads are served from the blob store", "disk_errors", w.sentDE)
		}
	case w.diskStreak >= DiskErrorStreak && w.opts.DiskProbe != nil:
		if err := w.opts.DiskProbe(); err == nil {
			w.log.Info("cache directory working again: ready")
			w.diskStreak = 0
		}
	case w.diskStreak > 0:
		w.diskStreak = 0
	}
	w.lastDE = w.sentDE
}

// deregister removes the worker's record (best effort: it also expires).
func (w *Worker) deregister() {
	ctx, cancel := context.WithTimeout(context.Background(), w.opts.RequestTimeout)
	defer cancel()
	_, err := w.opts.Client.Call(ctx, &protocol.Deregister{
		ClusterID: w.opts.ClusterID, Role: cluster.RoleWorker, NodeID: w.opts.NodeID, IncarnationID: w.incarnation,
	})
	if err != nil {
		w.log.Warn("could not deregister; the record expires with its lease", "error", err)
	}
}
