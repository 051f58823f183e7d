package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/talonhq/talon/internal/admin"
	"github.com/talonhq/talon/internal/blob"
	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/coordinator"
	"github.com/talonhq/talon/internal/metrics"
	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/state/etcd"
	"github.com/talonhq/talon/internal/state/kube"
	"github.com/talonhq/talon/internal/state/memory"
	"github.com/talonhq/talon/internal/ui"
	"github.com/talonhq/talon/internal/worker"
	"github.com/talonhq/talon/internal/worker/cache"
	"github.com/talonhq/talon/internal/worker/dataserver"
	"github.com/talonhq/talon/internal/worker/stats"
)

func defaultRunners() Runners {
	return Runners{Coordinator: RunCoordinator, Worker: RunWorker, Dev: RunDev}
}

// OpenStore connects to the configured state backend, registering no
// backend metrics.
func OpenStore(ctx context.Context, cfg *config.Config, log *slog.Logger) (state.Store, error) {
	return openStore(ctx, cfg, log, nil)
}

// openStore is OpenStore with a registry: reg receives the backend's own
// metrics, if it has any; nil registers none.
func openStore(ctx context.Context, cfg *config.Config, log *slog.Logger, reg prometheus.Registerer) (state.Store, error) {
	switch cfg.StateBackend {
	case config.BackendMemory:
		log.Warn("using the memory state backend: development and single-coordinator mode only; state is lost on restart")
		return memory.New(memory.Options{Logger: log}), nil
	case config.BackendEtcd:
		o := etcd.DefaultOptions()
		o.Endpoints = cfg.Etcd.Endpoints
		o.Username = cfg.Etcd.Username
		o.Password = cfg.Etcd.Password.Reveal()
		o.TLS = etcd.TLSOptions{CAFile: cfg.Etcd.CAFile, CertFile: cfg.Etcd.CertFile, KeyFile: cfg.Etcd.KeyFile}
		o.DialTimeout = cfg.Etcd.DialTimeout
		o.RequestTimeout = cfg.RequestTimeout
		o.Prefix = cfg.Etcd.Prefix
		o.Logger = log
		o.Registerer = reg
		return etcd.New(ctx, o)
	case config.BackendKubernetes:
		return kube.New(ctx, kube.Options{
			Kubeconfig: cfg.Kube.Kubeconfig, Namespace: cfg.Kube.Namespace, RequestTimeout: cfg.RequestTimeout,
			QPS: float32(cfg.Kube.QPS), Burst: cfg.Kube.Burst,
			MaxInflightWrites: cfg.Kube.MaxInflightWrites, AdmissionWait: cfg.Kube.AdmissionWait,
			Registerer: reg, Logger: log,
		})
	}
	return nil, fmt.Errorf("state-backend %q: must be memory, etcd or kubernetes", cfg.StateBackend)
}

// listeners binds a role's main and admin listeners (admin may be disabled).
func listeners(cfg *config.Config) (main, adminLn net.Listener, err error) {
	main, err = net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, nil, fmt.Errorf("listen %s: %w", cfg.Listen, err)
	}
	if cfg.AdminListen != "" {
		adminLn, err = net.Listen("tcp", cfg.AdminListen)
		if err != nil {
			main.Close()
			return nil, nil, fmt.Errorf("admin-listen %s: %w", cfg.AdminListen, err)
		}
	}
	return main, adminLn, nil
}

// runWithAdmin runs a role's component and its admin listener: the admin
// listener starts first and stops after the component has drained, so
// /readyz reports the drain while it happens.
func runWithAdmin(ctx context.Context, run func(context.Context) error, srv *admin.Server, adminLn net.Listener) error {
	if srv == nil {
		return run(ctx)
	}
	adminCtx, stopAdmin := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	var adminErr error
	wg.Add(1)
	go func() { defer wg.Done(); adminErr = srv.Serve(adminCtx, adminLn) }()
	err := run(ctx)
	stopAdmin()
	wg.Wait()
	return errors.Join(err, adminErr)
}

// process is what both roles share: the admin listener and its server.
type process struct {
	Admin   *admin.Server
	adminLn net.Listener
}

// AdminAddr returns the admin listener's address, or nil when disabled.
func (p *process) AdminAddr() net.Addr {
	if p.adminLn == nil {
		return nil
	}
	return p.adminLn.Addr()
}

// newAdmin builds the admin server when the listener is enabled; opts
// names the role's component, the rest comes from cfg.
func (p *process) newAdmin(cfg *config.Config, opts admin.Options) error {
	if p.adminLn == nil {
		return nil
	}
	opts.Config, opts.Clock, opts.ShutdownTimeout = cfg.Admin, time.Now, cfg.ShutdownTimeout
	var err error
	p.Admin, err = admin.New(opts)
	return err
}

func (p *process) closeAdmin() {
	if p.adminLn != nil {
		p.adminLn.Close()
	}
}

// Coordinator is a coordinator process wired from configuration.
type Coordinator struct {
	process
	C     *coordinator.Coordinator
	store state.Store
}

// NewCoordinator builds (binds, connects) a coordinator process from cfg.
// store may be nil to open the configured one; a given store is not closed.
func NewCoordinator(ctx context.Context, cfg *config.Config, store state.Store, ui http.Handler, log *slog.Logger) (*Coordinator, error) {
	p := &Coordinator{}
	ptls, err := loadPlaneTLS(cfg, log)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
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
	proc, err := metrics.NewProcess(reg, "coordinator")
	if err != nil {
		ln.Close()
		p.close()
		return nil, err
	}
	adminAddr := ""
	if adminLn != nil {
		adminAddr = advertise(cfg.AdminAdvertise, adminLn.Addr(), log, "admin-advertise")
	}
	p.C, err = coordinator.New(coordinator.Options{
		ClusterID: cfg.ClusterID, NodeID: cfg.NodeID, Labels: cfg.Labels,
		Advertise: advertise(cfg.Advertise, ln.Addr(), log, "advertise"), AdminAddress: adminAddr,
		Timing: cfg.Timing(), RequestTimeout: cfg.RequestTimeout, DrainDelay: cfg.DrainDelay, ShutdownTimeout: cfg.ShutdownTimeout,
		Store: store, Listener: ln, Logger: log, Clock: time.Now, Registerer: reg, Process: proc,
		Limits: coordinator.Limits{
			MaxConnections: cfg.Limits.MaxConnections, IdleTimeout: cfg.Limits.IdleTimeout,
			FrameTimeout: cfg.Limits.FrameTimeout, MaxRecords: cfg.Limits.MaxRecords,
			MaxInflightWrites: cfg.Limits.MaxInflightWrites,
		},
		TLS: ptls.server(), PlacementReplicas: cfg.PlacementReplicas,
	})
	if err != nil {
		ln.Close()
		p.close()
		return nil, err
	}
	err = p.newAdmin(cfg, admin.Options{Coordinator: p.C, UI: ui, Gatherer: reg, Registerer: reg, Process: proc, Logger: log})
	if err != nil {
		ln.Close()
		p.close()
		return nil, err
	}
	return p, nil
}

func (p *Coordinator) close() {
	p.closeAdmin()
	if p.store != nil {
		p.store.Close()
	}
}

// Run serves until ctx ends and drains.
func (p *Coordinator) Run(ctx context.Context) error {
	defer func() {
		if p.store != nil {
			p.store.Close()
		}
	}()
	return runWithAdmin(ctx, p.C.Run, p.Admin, p.adminLn)
}

// RunCoordinator runs a coordinator process from cfg until ctx ends.
func RunCoordinator(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
	p, err := NewCoordinator(ctx, cfg, nil, uiHandler(), log)
	if err != nil {
		return err
	}
	return p.Run(ctx)
}

// Worker is a worker process wired from configuration.
type Worker struct {
	process
	W         *worker.Worker
	Stats     *stats.Stats
	cache     *cache.Cache
	client    *client.Client // heartbeats
	ownClient *client.Client // ownership checks and version pushes
}

// NewWorker builds (binds, opens the cache) a worker process from cfg.
func NewWorker(cfg *config.Config, log *slog.Logger) (*Worker, error) {
	if cfg.DevDir != "" {
		if err := joinDev(cfg); err != nil {
			return nil, err
		}
	}
	ptls, err := loadPlaneTLS(cfg, log)
	if err != nil {
		return nil, err
	}
	if u, err := url.Parse(cfg.BlobStore); err == nil && u.Scheme == "file" {
		if fi, err := os.Stat(u.Path); err != nil || !fi.IsDir() {
			return nil, &usageError{fmt.Errorf("blob-store %q: directory %s does not exist or is not a directory: create it, or point blob-store at the directory that holds the objects", cfg.BlobStore, u.Path)}
		}
	}
	bs, err := blob.Open(cfg.BlobStore, blob.Options{})
	if err != nil {
		return nil, fmt.Errorf("blob-store: %w", err)
	}
	reg := prometheus.NewRegistry()
	proc, err := metrics.NewProcess(reg, "worker")
	if err != nil {
		return nil, err
	}
	st := stats.New()
	if err := st.Register(reg); err != nil {
		return nil, err
	}
	c, err := cache.Open(cache.Config{Dir: cfg.CacheDir, Capacity: cfg.CacheCapacity, BlockSize: cfg.BlockSize, Source: bs, Stats: st, Logger: log.With("component", "cache")})
	if err != nil {
		return nil, fmt.Errorf("cache-dir %s: %w", cfg.CacheDir, err)
	}
	// Heartbeats retry with backoff inside their request timeout; ownership
	// checks sit on the data path, so their client never retries (a
	// failure fails open, see worker.Ownership) and keeps a placement
	// cache that version pushes (Run's Watch) invalidate.
	hbClient, err := client.New(client.Options{Coordinators: cfg.Coordinators, Logger: log, TLS: ptls.toCoordinators()})
	if err != nil {
		c.Close()
		return nil, err
	}
	ownClient, err := client.New(client.Options{Coordinators: cfg.Coordinators, CacheTTL: 30 * time.Second, Retries: -1, Logger: log, TLS: ptls.toCoordinators()})
	if err != nil {
		c.Close()
		hbClient.Close()
		return nil, err
	}
	p := &Worker{Stats: st, cache: c, client: hbClient, ownClient: ownClient}
	var w *worker.Worker
	ds, err := dataserver.New(dataserver.Config{
		Cache: c, Ownership: worker.NewOwnership(ownClient, cfg.NodeID, cfg.RequestTimeout), Stats: st,
		Logger: log.With("component", "data"), Ready: func() bool { return w != nil && w.Serving() },
		Observe: proc.Observe,
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
	adminAddr := ""
	if adminLn != nil {
		adminAddr = advertise(cfg.AdminAdvertise, adminLn.Addr(), log, "admin-advertise")
	}
	w, err = worker.New(worker.Options{
		ClusterID: cfg.ClusterID, NodeID: cfg.NodeID, Labels: cfg.Labels,
		Advertise: advertise(cfg.Advertise, ln.Addr(), log, "advertise"), AdminAddress: adminAddr,
		Coordinators: cfg.Coordinators, Timing: cfg.Timing(), RequestTimeout: cfg.RequestTimeout,
		DrainDelay: cfg.DrainDelay, ShutdownTimeout: cfg.ShutdownTimeout,
		DataListener: ln, DataHandler: ds, Status: st, Client: hbClient, Logger: log, Clock: time.Now, Registerer: reg, Process: proc,
		DiskErrors: st.DiskErrors, DiskProbe: c.Probe, DataTLS: ptls.server(), ControlTLS: ptls.toCoordinators(),
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
	p.W = w
	err = p.newAdmin(cfg, admin.Options{Worker: w, WorkerUsage: st, Gatherer: reg, Registerer: reg, Process: proc, Logger: log})
	if err != nil {
		ln.Close()
		p.close()
		return nil, err
	}
	return p, nil
}

func (p *Worker) close() {
	p.closeAdmin()
	p.client.Close()
	p.ownClient.Close()
	p.cache.Close()
}

// Run serves until ctx ends and drains.
func (p *Worker) Run(ctx context.Context) error {
	defer p.client.Close()
	defer p.ownClient.Close()
	defer p.cache.Close()
	watchCtx, stopWatch := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	// Placement-version pushes keep the ownership checks current.
	go func() { defer wg.Done(); p.ownClient.Watch(watchCtx, nil) }()
	defer func() { stopWatch(); wg.Wait() }()
	return runWithAdmin(ctx, p.W.Run, p.Admin, p.adminLn)
}

// RunWorker runs a worker process from cfg until ctx ends.
func RunWorker(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
	p, err := NewWorker(cfg, log)
	if err != nil {
		return err
	}
	return p.Run(ctx)
}

// advertise returns the configured advertised address, or one derived
// from the bound address. A wildcard bind is advertised as loopback, with a
// warning: set the advertise setting on any real deployment.
func advertise(configured string, bound net.Addr, log *slog.Logger, setting string) string {
	if configured != "" {
		return configured
	}
	tcp, ok := bound.(*net.TCPAddr)
	if !ok {
		return bound.String()
	}
	if tcp.IP.IsUnspecified() {
		addr := net.JoinHostPort("127.0.0.1", fmt.Sprint(tcp.Port))
		log.Warn("listening on every interface without an advertised address; advertising loopback, which only this host can reach", "setting", setting, "advertised", addr)
		return addr
	}
	return tcp.String()
}

// uiHandler returns the embedded web UI.
func uiHandler() http.Handler { return ui.Handler() }
