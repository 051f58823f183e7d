package app

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/talonhq/talon/internal/admin"
	"github.com/talonhq/talon/internal/blob"
	"github.com/talonhq/talon/internal/client"
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
}

// NewWorker builds (binds, opens the cache) a worker process from cfg.
func NewWorker(cfg *config.Config, log *slog.Logger) (*WorkerProcess, error) {
	if cfg.DevDir != "" {
		if err := devcluster.Join(cfg); err != nil {
			return nil, err
		}
	}
	ptls, err := loadPlaneTLS(cfg, log)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	proc, err := metrics.NewNodeProcess(reg, metrics.Identity{Role: "worker", ClusterID: cfg.ClusterID, NodeID: cfg.NodeID})
	if err != nil {
		return nil, err
	}
	p := &WorkerProcess{Stats: stats.New()}
	if err := p.Stats.Register(reg); err != nil {
		return nil, err
	}
	if p.cache, err = openCache(cfg, p.Stats, log); err != nil {
		return nil, err
	}
	if err := p.openClients(cfg, ptls, log); err != nil {
		p.cache.Close()
		return nil, err
	}
	// The data server answers only while the worker is serving, and the
	// worker runtime serves the data server: the gate is built first and
	// given the runtime once it exists.
	gate := &servingGate{}
	ds, err := dataserver.New(dataserver.Config{
		Cache: p.cache, Ownership: worker.NewOwnership(p.ownClient, cfg.NodeID, cfg.RequestTimeout), Stats: p.Stats,
		Logger: log.With("component", "data"), Ready: gate.Ready, Observe: proc.Observe,
	})
	if err != nil {
		p.close()
		return nil, err
	}
	ln, adminLn, err := listeners(cfg)
	if err != nil {
		p.close()
		return nil, err
	}
	p.adminLn = adminLn
	adminAddr := adminAdvertise(cfg.AdminAdvertise, adminLn, log)
	p.worker, err = worker.New(worker.Options{
		ClusterID: cfg.ClusterID, NodeID: cfg.NodeID, Labels: cfg.Labels,
		Advertise: advertise(cfg.Advertise, ln.Addr(), log, "advertise"), AdminAddress: adminAddr,
		Coordinators: cfg.Coordinators, Timing: cfg.Timing(), RequestTimeout: cfg.RequestTimeout,
		DrainDelay: cfg.DrainDelay, ShutdownTimeout: cfg.ShutdownTimeout,
		DataListener: ln, DataHandler: ds, Status: p.Stats, Client: p.client, Logger: log, Clock: time.Now, Registerer: reg, Process: proc,
		DiskErrors: p.Stats.DiskErrors, DiskProbe: p.cache.Probe, DataTLS: ptls.server(),
		DataLimits: worker.DataLimits{
			MaxConnections: cfg.Limits.MaxConnections, IdleTimeout: cfg.Limits.IdleTimeout,
			FrameTimeout: cfg.Limits.FrameTimeout, WriteTimeout: cfg.Limits.WriteTimeout,
		},
	})
	if err != nil {
		ln.Close()
		p.close()
		return nil, err
	}
	gate.set(p.worker)
	err = p.newAdmin(cfg, admin.Options{Worker: p.worker, WorkerUsage: p.Stats, Gatherer: reg, Registerer: reg, Process: proc, Logger: log})
	if err != nil {
		ln.Close()
		p.close()
		return nil, err
	}
	return p, nil
}

// openCache opens the blob store and the cache in front of it. A file://
// blob store must be an existing directory (a usage error otherwise).
func openCache(cfg *config.Config, st *stats.Stats, log *slog.Logger) (*cache.Cache, error) {
	if u, err := url.Parse(cfg.BlobStore); err == nil && u.Scheme == "file" {
		if fi, err := os.Stat(u.Path); err != nil || !fi.IsDir() {
			return nil, &usageError{fmt.Errorf("blob-store %q: directory %s does not exist or is not a directory: create it, or point blob-store at the directory that holds the objects", cfg.BlobStore, u.Path)}
		}
	}
	bs, err := blob.Open(cfg.BlobStore, blob.Options{})
	if err != nil {
		return nil, fmt.Errorf("blob-store: %w", err)
	}
	c, err := cache.Open(cache.Config{Dir: cfg.CacheDir, Capacity: cfg.CacheCapacity, BlockSize: cfg.BlockSize, Source: bs, Stats: st, Logger: log.With("component", "cache")})
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
	hb, err := client.New(client.Options{Coordinators: cfg.Coordinators, Logger: log, TLS: ptls.toCoordinators()})
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
	return runWithAdmin(ctx, p.worker.Run, p.Admin, p.adminLn)
}

// RunWorker runs a worker process from cfg until ctx ends.
func RunWorker(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
	p, err := NewWorker(cfg, log)
	if err != nil {
		return err
	}
	return runNotifying(ctx, p.Run, func() bool { return p.worker.Readiness().Ready }, log)
}
