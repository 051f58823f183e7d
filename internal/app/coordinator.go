package app

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/talonhq/talon/internal/admin"
	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/coordinator"
	"github.com/talonhq/talon/internal/metrics"
	"github.com/talonhq/talon/internal/state"
)

// CoordinatorProcess is a coordinator process wired from configuration:
// the coordinator runtime, the store it opened (if it opened one) and its
// admin listener.
type CoordinatorProcess struct {
	process
	coord *coordinator.Coordinator
	store state.Store // opened by NewCoordinator and closed with it; nil when given
}

// NewCoordinator builds (binds, connects) a coordinator process from cfg.
// store may be nil to open the configured one; a given store is not closed.
//
// tracers, at most one, receives the coordinator's spans; none means no
// spans.
func NewCoordinator(ctx context.Context, cfg *config.Config, store state.Store, ui http.Handler, log *slog.Logger, tracers ...trace.TracerProvider) (*CoordinatorProcess, error) {
	if err := preflight(cfg); err != nil {
		return nil, err
	}
	p := &CoordinatorProcess{}
	ptls, err := loadPlaneTLS(cfg, log)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	if err := ptls.registerDenials(reg); err != nil {
		return nil, err
	}
	if store == nil {
		s, err := openStore(ctx, cfg, log.With("component", "store"), reg)
		if err != nil {
			return nil, fmt.Errorf("state backend %s: %w", cfg.StateBackend, err)
		}
		p.store, store = s, s
	}
	ln, adminLn, err := listeners(cfg)
	if err != nil {
		p.close()
		return nil, err
	}
	p.adminLn = adminLn
	proc, err := metrics.NewNodeProcess(reg, metrics.Identity{Role: "coordinator", ClusterID: cfg.ClusterID, NodeID: cfg.NodeID})
	if err != nil {
		ln.Close()
		p.close()
		return nil, err
	}
	adminAddr := adminAdvertise(cfg.AdminAdvertise, adminLn, log)
	fds := descriptorBudgets(cfg.Limits.MaxConnections, log)
	attestFn, err := coordinatorAttest(cfg, log.With("component", "attest"))
	if err != nil {
		ln.Close()
		p.close()
		return nil, err
	}
	p.coord, err = coordinator.New(coordinator.Options{
		ClusterID: cfg.ClusterID, NodeID: cfg.NodeID, Labels: cfg.Labels, ExpectedCoordinators: cfg.CoordinatorReplicas,
		Advertise: advertise(cfg.Advertise, ln.Addr(), log, "advertise"), AdminAddress: adminAddr,
		Timing: cfg.Timing(), RequestTimeout: cfg.RequestTimeout, DrainDelay: cfg.DrainDelay, ShutdownTimeout: cfg.ShutdownTimeout,
		Store: store, Listener: ln, Logger: log, Clock: time.Now, Registerer: reg, Process: proc, Tracers: firstTracers(tracers),
		Limits: coordinator.Limits{
			MaxConnections: fds.Main, IdleTimeout: cfg.Limits.IdleTimeout,
			FrameTimeout: cfg.Limits.FrameTimeout, MaxRecords: cfg.Limits.MaxRecords,
			MaxInflightWrites: cfg.Limits.MaxInflightWrites, NodeWritesPerInterval: nodeWrites(cfg.Limits.NodeWritesPerInterval),
		},
		TLS: ptls.server(), Revoked: ptls.revoked(), DenyRecord: ptls.denyRecord(), PlacementReplicas: cfg.PlacementReplicas,
		Attest: attestFn, EventCapacity: cfg.Limits.MaxEvents, EventMaxAge: cfg.Limits.MaxEventAge,
	})
	if err != nil {
		ln.Close()
		p.close()
		return nil, err
	}
	err = p.newAdmin(cfg, admin.Options{Coordinator: p.coord, Jobs: p.coord.Jobs(), UI: ui, Gatherer: reg, Registerer: reg, Process: proc, Logger: log, MaxConnections: fds.Admin})
	if err != nil {
		ln.Close()
		p.close()
		return nil, err
	}
	return p, nil
}

// Coordinator returns the coordinator runtime.
func (p *CoordinatorProcess) Coordinator() *coordinator.Coordinator { return p.coord }

// close releases what NewCoordinator acquired besides the runtime: the
// admin listener and the store it opened.
func (p *CoordinatorProcess) close() {
	p.closeAdmin()
	if p.store != nil {
		p.store.Close()
	}
}

// Close releases a process that will not be run: its listeners and the
// store it opened. Run releases them itself; do not call Close after Run.
func (p *CoordinatorProcess) Close() error {
	p.close()
	return p.coord.Close()
}

// Run serves until ctx ends and drains.
func (p *CoordinatorProcess) Run(ctx context.Context) error {
	defer func() {
		if p.store != nil {
			p.store.Close()
		}
	}()
	return runWithAdmin(ctx, p.coord.Run, p.Admin, p.adminLn)
}

// RunCoordinator runs a coordinator process from cfg until ctx ends.
func RunCoordinator(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
	if err := setMemoryLimit(log, os.Getenv, memlimit.FromCgroup); err != nil {
		return err
	}
	tp, err := startTracing(ctx, cfg, "coordinator", log)
	if err != nil {
		return err
	}
	defer stopTracing(tp, log)
	p, err := NewCoordinator(ctx, cfg, nil, uiHandler(cfg), log, tp.Tracers())
	if err != nil {
		return err
	}
	return runNotifying(ctx, p.Run, func() bool { return p.coord.Readiness().Ready }, log)
}

// nodeWrites maps max-node-writes-per-interval (0: off) to
// coordinator.Limits (negative: off, 0: the default).
func nodeWrites(n int) int {
	if n == 0 {
		return -1
	}
	return n
}
