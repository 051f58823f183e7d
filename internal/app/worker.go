package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/talonhq/talon/internal/admin"
	"github.com/talonhq/talon/internal/blob"
	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/devcluster"
	"github.com/talonhq/talon/internal/metrics"
	"github.com/talonhq/talon/internal/worker"
	"github.com/talonhq/talon/internal/worker/cache"
	"github.com/talonhq/talon/internal/worker/dataserver"
	"github.com/talonhq/talon/internal/worker/stats"
)

// WorkerProcess is a worker process wired from configuration: the worker
// runtime, its cache and stats, its two placement clients and its admin
// listener.
type WorkerProcess struct {
	process
	worker    *worker.Worker
	Stats     *stats.Stats
	cache     *cache.Cache
	client    *client.Client // heartbeats
	ownClient *client.Client // ownership checks and version pushes

	// Set by bindWorker for open: the admin listener's view of the
	// runtime, the bound data listener and what the runtime is wired with.
	late  *lateWorker
	ln    net.Listener
	reg   *prometheus.Registry
	proc  *metrics.Process
	ptls  planeTLS
	fds   budgets
	early *adminRun // the admin listener RunWorker started before open; nil otherwise
	// tracers receives the worker's spans (heartbeats, block loads, blob
	// fetches); nil means none.
	tracers trace.TracerProvider
}

// NewWorker builds (binds, opens the cache) a worker process from cfg.
func NewWorker(cfg *config.Config, log *slog.Logger) (*WorkerProcess, error) {
	p, err := bindWorker(cfg, log)
	if err != nil {
		return nil, err
	}
	if err := p.open(cfg, log); err != nil {
		p.closeAdmin()
		return nil, err
	}
	return p, nil
}

// bindWorker is the first half of NewWorker: it binds both listeners and
// builds the admin server, whose view of the worker (lateWorker) is not
// ready until open has built the runtime. It scans and dials nothing, so
// RunWorker can serve /healthz and /readyz during the cache scan.
func bindWorker(cfg *config.Config, log *slog.Logger) (*WorkerProcess, error) {
	if cfg.DevDir != "" {
		if err := devcluster.Join(cfg); err != nil {
			return nil, err
		}
	}
	if err := preflight(cfg); err != nil {
		return nil, err
	}
	ptls, err := loadPlaneTLS(cfg, log)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	if err := ptls.registerDenials(reg); err != nil {
		return nil, err
	}
	fds := descriptorBudgets(cfg.Limits.MaxConnections, log)
	proc, err := metrics.NewNodeProcess(reg, metrics.Identity{Role: "worker", ClusterID: cfg.ClusterID, NodeID: cfg.NodeID})
	if err != nil {
		return nil, err
	}
	p := &WorkerProcess{Stats: stats.New(), late: &lateWorker{nodeID: cfg.NodeID}, reg: reg, proc: proc, ptls: ptls, fds: fds}
	if err := p.Stats.Register(reg); err != nil {
		return nil, err
	}
	if p.ln, p.adminLn, err = listeners(cfg); err != nil {
		return nil, err
	}
	err = p.newAdmin(cfg, admin.Options{Worker: p.late, WorkerUsage: p.Stats, Gatherer: reg, Registerer: reg, Process: proc, Logger: log, MaxConnections: fds.Admin})
	if err != nil {
		p.ln.Close()
		p.closeAdmin()
		return nil, err
	}
	return p, nil
}

// Read-ahead follows the blocks a worker is first owner of.
var _ dataserver.FirstOwnership = (*worker.Ownership)(nil)

// open is the second half of NewWorker: it opens (scans) the cache, builds
// the clients, the data server and the runtime, and hands the runtime to
// the admin server's view. On error it closes the data listener and what
// it opened; the admin listener stays the caller's.
func (p *WorkerProcess) open(cfg *config.Config, log *slog.Logger) (err error) {
	defer func() {
		if err != nil {
			p.ln.Close()
		}
	}()
	if p.cache, err = openCache(cfg, p.Stats, log, p.tracers); err != nil {
		return err
	}
	if err := p.openClients(cfg, p.ptls, log); err != nil {
		p.cache.Close()
		return err
	}
	// The data server answers only while the worker is serving, and the
	// worker runtime serves the data server: the gate is built first and
	// given the runtime once it exists.
	gate := &servingGate{}
	own := worker.NewOwnership(p.ownClient, cfg.NodeID, cfg.PlacementReplicas, cfg.RequestTimeout)
	ds, err := dataserver.New(dataserver.Config{
		Cache: p.cache, Ownership: own, Stats: p.Stats,
		Logger: log.With("component", "data"), Ready: gate.Ready, Observe: p.proc.Observe,
		StoreReadRate: float64(cfg.Limits.StoreReadsPerClient), ReadAhead: readAhead(cfg.ReadAhead),
		WarmupRate: warmupRate(cfg.WarmupRate), WarmupPeriod: cfg.WarmupPeriod, WarmupRefuse: cfg.PlacementReplicas >= 2,
	})
	if err != nil {
		p.closeClientsAndCache()
		return err
	}
	adminAddr := adminAdvertise(cfg.AdminAdvertise, p.adminLn, log)
	p.worker, err = worker.New(worker.Options{
		ClusterID: cfg.ClusterID, NodeID: cfg.NodeID, Labels: cfg.Labels,
		Advertise: advertise(cfg.Advertise, p.ln.Addr(), log, "advertise"), AdminAddress: adminAddr,
		Coordinators: cfg.Coordinators, Timing: cfg.Timing(), RequestTimeout: cfg.RequestTimeout,
		DrainDelay: cfg.DrainDelay, ShutdownTimeout: cfg.ShutdownTimeout,
		DataListener: p.ln, DataHandler: denyGuard(ds, p.ptls.revoked()), Status: p.Stats, Client: p.client, Logger: log, Clock: time.Now, Registerer: p.reg, Process: p.proc, Tracers: p.tracers,
		DiskErrors: p.Stats.DiskErrors, DiskProbe: p.cache.Probe, DataTLS: p.ptls.server(),
		CordonFile: filepath.Join(cfg.CacheDir, "cordon"),
		Jobs:       &worker.JobOptions{Cache: p.cache, Owns: own.Owns, Rate: float64(cfg.WarmupRate)},
		DataLimits: worker.DataLimits{
			MaxConnections: p.fds.Main, IdleTimeout: cfg.Limits.IdleTimeout,
			FrameTimeout: cfg.Limits.FrameTimeout, WriteTimeout: cfg.Limits.WriteTimeout,
		},
	})
	if err != nil {
		p.closeClientsAndCache()
		return err
	}
	gate.set(p.worker)
	p.late.set(p.worker)
	return nil
}

// lateWorker is the admin listener's view of a worker runtime built after
// the listener (RunWorker serves it during the cache scan): until set it
// reports not ready, with no incarnation, data address or record.
type lateWorker struct {
	nodeID string
	w      atomic.Pointer[worker.Worker]
}

func (l *lateWorker) set(w *worker.Worker) { l.w.Store(w) }

// NodeID returns the configured node ID.
func (l *lateWorker) NodeID() string { return l.nodeID }

// Incarnation returns the runtime's incarnation, "" before it exists.
func (l *lateWorker) Incarnation() string {
	if w := l.w.Load(); w != nil {
		return w.Incarnation()
	}
	return ""
}

// DataAddress returns the runtime's advertised data address, "" before it
// exists.
func (l *lateWorker) DataAddress() string {
	if w := l.w.Load(); w != nil {
		return w.DataAddress()
	}
	return ""
}

// Readiness is the runtime's, or not ready while the cache is opened.
func (l *lateWorker) Readiness() worker.Readiness {
	if w := l.w.Load(); w != nil {
		return w.Readiness()
	}
	return worker.Readiness{Reasons: []string{"starting: opening the cache directory (scanning its blocks)"}}
}

// LastAccepted is the runtime's last accepted record, none before it
// exists.
func (l *lateWorker) LastAccepted() (*cluster.Record, string) {
	if w := l.w.Load(); w != nil {
		return w.LastAccepted()
	}
	return nil, ""
}

// openCache opens the blob store and the cache in front of it. A file://
// blob store must be an existing directory (a usage error otherwise).
func openCache(cfg *config.Config, st *stats.Stats, log *slog.Logger, tp trace.TracerProvider) (*cache.Cache, error) {
	if err := checkBlobStore(cfg.BlobStore); err != nil {
		return nil, err
	}
	bs, err := openBlobStore(cfg.BlobStore)
	if errors.Is(err, blob.ErrInvalidURL) {
		return nil, &usageError{fmt.Errorf("blob-store: %w", err)}
	}
	if err != nil {
		return nil, fmt.Errorf("blob-store: %w", err)
	}
	c, err := cache.Open(cache.Config{Dir: cfg.CacheDir, Capacity: cfg.CacheCapacity, BlockSize: cfg.BlockSize, Source: blob.Traced(bs, tp), Stats: st, Logger: log.With("component", "cache"), Tracers: tp, MaxPrefetches: cfg.ReadAheadLoads})
	if err != nil {
		return nil, fmt.Errorf("cache-dir %s: %w", cfg.CacheDir, err)
	}
	return c, nil
}

// openClients builds the worker's two placement clients. Heartbeats retry
// with backoff inside their request timeout; ownership checks sit on the
// data path, so their client never retries (a failure fails open, see
// worker.Ownership) and keeps a placement cache that version pushes (Run's
// Watch) invalidate.
func (p *WorkerProcess) openClients(cfg *config.Config, ptls planeTLS, log *slog.Logger) error {
	hb, err := client.New(client.Options{Coordinators: cfg.Coordinators, Logger: log, TLS: ptls.toCoordinators(),
		OnConnect: workerAttest(cfg.Attestation.TokenFile, log.With("component", "attest"))})
	if err != nil {
		return err
	}
	own, err := client.New(client.Options{Coordinators: cfg.Coordinators, CacheTTL: 30 * time.Second, Retries: -1, Logger: log, TLS: ptls.toCoordinators()})
	if err != nil {
		hb.Close()
		return err
	}
	p.client, p.ownClient = hb, own
	return nil
}

// servingGate answers the data server's readiness from the worker
// runtime, which is built after the data server (the runtime serves it).
// Until set it answers false: a worker that is not built serves nothing.
type servingGate struct {
	w atomic.Pointer[worker.Worker]
}

func (g *servingGate) set(w *worker.Worker) { g.w.Store(w) }

// Ready reports whether the worker serves data (worker.Worker.Serving).
func (g *servingGate) Ready() bool {
	w := g.w.Load()
	return w != nil && w.Serving()
}

// Worker returns the worker runtime.
func (p *WorkerProcess) Worker() *worker.Worker { return p.worker }

// close releases what NewWorker acquired besides the runtime: the admin
// listener, the clients and the cache.
func (p *WorkerProcess) close() {
	p.closeAdmin()
	p.closeClientsAndCache()
}

func (p *WorkerProcess) closeClientsAndCache() {
	p.client.Close()
	p.ownClient.Close()
	p.cache.Close()
}

// Close releases a process that will not be run: its listeners, clients
// and cache. Run releases them itself; do not call Close after Run.
func (p *WorkerProcess) Close() error {
	p.close()
	return p.worker.Close()
}

// Run serves until ctx ends and drains.
func (p *WorkerProcess) Run(ctx context.Context) error {
	defer p.client.Close()
	defer p.ownClient.Close()
	defer p.cache.Close()
	watchCtx, stopWatch := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	// Placement-version pushes keep the ownership checks current.
	go func() { defer wg.Done(); p.ownClient.Watch(watchCtx, nil) }()
	defer func() { stopWatch(); wg.Wait() }()
	if p.early != nil {
		err := p.worker.Run(ctx)
		return errors.Join(err, p.early.stop())
	}
	return runWithAdmin(ctx, p.worker.Run, p.Admin, p.adminLn)
}

// RunWorker runs a worker process from cfg until ctx ends. Its admin
// listener serves from before the cache scan: /healthz answers 200 and
// /readyz 503 ("starting") while a large cache is scanned, so probes and
// scrapes see a live process, not a refused connection.
func RunWorker(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
	if err := setMemoryLimit(log, os.Getenv, memlimit.FromCgroup); err != nil {
		return err
	}
	tp, err := startTracing(ctx, cfg, "worker", log)
	if err != nil {
		return err
	}
	defer stopTracing(tp, log)
	p, err := bindWorker(cfg, log)
	if err != nil {
		return err
	}
	p.tracers = tp.Tracers()
	if p.Admin != nil {
		p.early = startAdmin(ctx, p.Admin, p.adminLn)
	}
	if err := p.open(cfg, log); err != nil {
		if p.early != nil {
			return errors.Join(err, p.early.stop())
		}
		p.closeAdmin()
		return err
	}
	return runNotifying(ctx, p.Run, p.late.ready, log)
}

// ready reports whether the runtime exists and is ready (what /readyz
// answers 200 for).
func (l *lateWorker) ready() bool { return l.Readiness().Ready }

// Cordoned reports the runtime's cordon, none before it exists.
func (l *lateWorker) Cordoned() (cordoned, persisted bool) {
	if w := l.w.Load(); w != nil {
		return w.Cordoned()
	}
	return false, false
}

// InflightRequests is the runtime's, 0 before it exists.
func (l *lateWorker) InflightRequests() int64 {
	if w := l.w.Load(); w != nil {
		return w.InflightRequests()
	}
	return 0
}

// readAhead maps read-ahead (0: off) to dataserver.Config.ReadAhead
// (negative: off, 0: the default).
func readAhead(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// warmupRate maps warmup-rate (0: no bound) to
// dataserver.Config.WarmupRate (negative: no bound, 0: the default).
func warmupRate(n int) float64 {
	if n == 0 {
		return -1
	}
	return float64(n)
}
