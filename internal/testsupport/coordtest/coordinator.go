package coordtest

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/talonhq/talon/internal/admin"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/coordinator"
	"github.com/talonhq/talon/internal/metrics"
	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/state/memory"
	"github.com/talonhq/talon/internal/testsupport"
)

// ReadyTimeout bounds WaitReady. It is generous: under -race on a small
// machine a coordinator's first snapshot and heartbeat can take seconds.
const ReadyTimeout = 15 * time.Second

// Options says how Start runs a coordinator. The zero value is valid: a
// coordinator "coord-a" of cluster "test" over a new memory store on the
// wall clock, with no admin server.
type Options struct {
	// ClusterID and NodeID name the coordinator; defaults "test" and
	// "coord-a".
	ClusterID string
	NodeID    string
	// Advertise is the control address written to the coordinator's
	// record; empty means the loopback listener's address.
	Advertise string
	Labels    map[string]string

	// Timing defaults to heartbeats every 100ms, unhealthy after 400ms, a
	// lease of 800ms.
	Timing cluster.Timing
	// RequestTimeout defaults to 200ms, ShutdownTimeout to 1s; DrainDelay
	// to none.
	RequestTimeout  time.Duration
	ShutdownTimeout time.Duration
	DrainDelay      time.Duration
	// Limits are the coordinator's (defaults when zero).
	Limits coordinator.Limits

	// Store is the coordinator's store, owned by the caller. Nil: Start
	// creates a memory store on StoreClock (default the wall clock) and
	// closes it when the test ends.
	Store      state.Store
	StoreClock func() time.Time
	// Clock is the coordinator's and the admin server's clock; default
	// time.Now.
	Clock func() time.Time
	// LivenessClock is the coordinator's liveness clock (coordinator
	// Options.LivenessClock); default the monotonic wall clock. FrozenLiveness
	// is a shorthand for one that stands still: the coordinator then never
	// proposes a record late or expired, so seeded records stay as seeded
	// and a test marks them itself (Store.ProposeTransition).
	LivenessClock  func() time.Time
	FrozenLiveness bool
	// Logger defaults to one that discards.
	Logger *slog.Logger
	// Registry receives the coordinator's, the process's and the admin
	// server's metrics; default a new registry.
	Registry *prometheus.Registry

	// WaitReady makes Start return only once WaitReady would.
	WaitReady bool

	// Admin, when set, serves an admin server for the coordinator with
	// this configuration (exposure toggles, tokens) on an httptest server.
	Admin *config.AdminConfig
	// UI is the admin server's web UI handler (admin.Options.UI).
	UI http.Handler
	// TLS is the control listener's mutual TLS (coordinator.Options.TLS).
	TLS *tls.Config
	// Attest is the coordinator's attestation verifier
	// (coordinator.Options.Attest); nil leaves attestation off.
	Attest func(ctx context.Context, token []byte) (coordinator.Attestation, error)
	// Listener, when set, is the control listener (a test restarting a
	// coordinator on the same address listens there again); nil listens on
	// 127.0.0.1:0. The coordinator owns it.
	Listener net.Listener
}

// Coordinator is a coordinator that Start runs until the test ends.
type Coordinator struct {
	*coordinator.Coordinator

	// ControlAddr is the control listener's address (host:port).
	ControlAddr string
	// Store is the coordinator's store; Memory is the same store when
	// Start created it (nil when Options.Store was given).
	Store  state.Store
	Memory *memory.Store
	// Registry and Process are the coordinator's metrics.
	Registry *prometheus.Registry
	Process  *metrics.Process
	// AdminServer and AdminURL (no trailing slash) are the admin server's,
	// when Options.Admin was set.
	AdminServer *httptest.Server
	AdminURL    string

	clusterID string
	nodeID    string
	stop      func()
}

// Start runs a coordinator on 127.0.0.1 with o until t ends, and fails t
// when it cannot.
func Start(t testing.TB, o Options) *Coordinator {
	t.Helper()
	if o.ClusterID == "" {
		o.ClusterID = "test"
	}
	if o.NodeID == "" {
		o.NodeID = "coord-a"
	}
	if o.Timing == (cluster.Timing{}) {
		o.Timing = cluster.Timing{HeartbeatInterval: 100 * time.Millisecond, UnhealthyAfter: 400 * time.Millisecond, LeaseTTL: 800 * time.Millisecond}
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = 200 * time.Millisecond
	}
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = time.Second
	}
	if o.FrozenLiveness && o.LivenessClock == nil {
		frozen := time.Now()
		o.LivenessClock = func() time.Time { return frozen }
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
	}
	c := &Coordinator{Store: o.Store, Registry: o.Registry, clusterID: o.ClusterID, nodeID: o.NodeID}
	if c.Store == nil {
		c.Memory = memory.New(memory.Options{Clock: o.StoreClock})
		c.Store = c.Memory
		t.Cleanup(func() { _ = c.Memory.Close() })
	}
	var err error
	if c.Process, err = metrics.NewProcess(o.Registry, "coordinator"); err != nil {
		t.Fatal(err)
	}
	ln := o.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	c.ControlAddr = ln.Addr().String()
	c.Coordinator, err = coordinator.New(coordinator.Options{
		ClusterID: o.ClusterID, NodeID: o.NodeID, Advertise: o.Advertise, Labels: o.Labels,
		Timing: o.Timing, RequestTimeout: o.RequestTimeout, ShutdownTimeout: o.ShutdownTimeout, DrainDelay: o.DrainDelay, Limits: o.Limits,
		Store: c.Store, Listener: ln, Logger: o.Logger, Clock: o.Clock, LivenessClock: o.LivenessClock, Registerer: o.Registry, Process: c.Process,
		TLS: o.TLS, Attest: o.Attest,
	})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	c.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("coordinator %s: Run: %v", o.NodeID, err)
			}
		})
	}
	t.Cleanup(c.stop)
	if o.WaitReady {
		c.WaitReady(t)
	}
	if o.Admin != nil {
		srv, err := admin.New(admin.Options{
			Config: *o.Admin, Coordinator: c.Coordinator, Jobs: c.Coordinator.Jobs(), UI: o.UI,
			Gatherer: o.Registry, Registerer: o.Registry, Process: c.Process, Logger: o.Logger, Clock: o.Clock,
		})
		if err != nil {
			t.Fatal(err)
		}
		c.AdminServer = httptest.NewServer(srv.Handler())
		t.Cleanup(c.AdminServer.Close)
		c.AdminURL = c.AdminServer.URL
	}
	return c
}

// Stop ends the coordinator now instead of when the test ends: it drains,
// removes its own record and returns. Calling it again does nothing.
func (c *Coordinator) Stop() { c.stop() }

// WaitReady waits until the coordinator reports ready and its own record in
// the store says ready and healthy (the first record it writes, before its
// first snapshot, does not), for at most ReadyTimeout.
func (c *Coordinator) WaitReady(t testing.TB) {
	t.Helper()
	testsupport.WaitFor(t, ReadyTimeout, "coordinator "+c.nodeID+" ready", func() bool {
		if !c.Readiness().Ready {
			return false
		}
		r := c.Record()
		return r != nil && r.Ready && r.Health == cluster.HealthHealthy
	})
}

// Record returns the coordinator's own record as the store holds it now,
// or nil when there is none or the store cannot be read.
func (c *Coordinator) Record() *cluster.Record {
	snap, err := c.Store.Snapshot(context.Background(), c.clusterID)
	if err != nil {
		return nil
	}
	return snap.Find(cluster.Key{ClusterID: c.clusterID, Role: cluster.RoleCoordinator, NodeID: c.nodeID})
}
