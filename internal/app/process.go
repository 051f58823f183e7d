package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/talonhq/talon/internal/admin"
	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/state/etcd"
	"github.com/talonhq/talon/internal/state/kube"
	"github.com/talonhq/talon/internal/state/memory"
	"github.com/talonhq/talon/internal/ui"
)

func defaultRunners() Runners {
	return Runners{Coordinator: RunCoordinator, Worker: RunWorker, Dev: runDev}
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
		return etcd.New(ctx, etcdOptions(cfg, log, reg))
	case config.BackendKubernetes:
		return kube.New(ctx, kubeOptions(cfg, log, reg))
	}
	return nil, fmt.Errorf("state-backend %q: must be memory, etcd or kubernetes", cfg.StateBackend)
}

// kubeOptions are the Kubernetes store's options of the configuration.
func kubeOptions(cfg *config.Config, log *slog.Logger, reg prometheus.Registerer) kube.Options {
	return kube.Options{
		Kubeconfig: cfg.Kube.Kubeconfig, Namespace: cfg.Kube.Namespace, RequestTimeout: cfg.RequestTimeout,
		QPS: float32(cfg.Kube.QPS), Burst: cfg.Kube.Burst,
		MaxInflightWrites: cfg.Kube.MaxInflightWrites, AdmissionWait: cfg.Kube.AdmissionWait,
		CacheSnapshots: true, Identity: cfg.NodeID,
		Registerer: reg, Logger: log,
	}
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
	a := startAdmin(ctx, srv, adminLn)
	err := run(ctx)
	return errors.Join(err, a.stop())
}

// adminRun is an admin listener serving in the background.
type adminRun struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error // set before done is closed
}

// startAdmin serves srv on ln until stop; ctx's end does not stop it (the
// listener outlives the role's drain), only its values are kept.
func startAdmin(ctx context.Context, srv *admin.Server, ln net.Listener) *adminRun {
	adminCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	a := &adminRun{cancel: cancel, done: make(chan struct{})}
	go func() { defer close(a.done); a.err = srv.Serve(adminCtx, ln) }()
	return a
}

// stop ends the listener (in-flight requests get srv's shutdown timeout)
// and returns Serve's error.
func (a *adminRun) stop() error {
	a.cancel()
	<-a.done
	return a.err
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
	opts.EffectiveConfig = cfg.Effective
	var err error
	p.Admin, err = admin.New(opts)
	return err
}

func (p *process) closeAdmin() {
	if p.adminLn != nil {
		p.adminLn.Close()
	}
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
func uiHandler(cfg *config.Config) http.Handler {
	return ui.HandlerWith(ui.Options{DashboardURL: cfg.Admin.UIDashboardURL})
}

// adminAdvertise is the advertised admin address: the admin-advertise
// setting, else the admin listener's address; "" without an admin listener.
func adminAdvertise(configured string, adminLn net.Listener, log *slog.Logger) string {
	if adminLn == nil {
		return ""
	}
	return advertise(configured, adminLn.Addr(), log, "admin-advertise")
}

// etcdOptions are the etcd store's options of cfg.
func etcdOptions(cfg *config.Config, log *slog.Logger, reg prometheus.Registerer) etcd.Options {
	o := etcd.DefaultOptions()
	o.Endpoints = cfg.Etcd.Endpoints
	o.Username = cfg.Etcd.Username
	o.Password = cfg.Etcd.Password.Reveal()
	o.TLS = etcd.TLSOptions{CAFile: cfg.Etcd.CAFile, CertFile: cfg.Etcd.CertFile, KeyFile: cfg.Etcd.KeyFile}
	o.DialTimeout = cfg.Etcd.DialTimeout
	o.RequestTimeout = cfg.RequestTimeout
	o.Prefix = cfg.Etcd.Prefix
	// Only coordinators open a store (workers never do): they compact
	// its history and watch its capacity.
	o.CompactionInterval = cfg.Etcd.CompactionInterval
	o.CapacityInterval = etcd.DefaultCapacityInterval
	o.Logger = log
	o.Registerer = reg
	return o
}
