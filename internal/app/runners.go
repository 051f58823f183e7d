package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/coordinator"
	"github.com/talonhq/talon/internal/metrics"
	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/state/etcd"
	"github.com/talonhq/talon/internal/state/kube"
	"github.com/talonhq/talon/internal/state/memory"
)

var errDevUnavailable = errors.New("talon dev needs the worker data path, which is not in this build yet")

func defaultRunners() Runners {
	return Runners{Coordinator: RunCoordinator}
}

// OpenStore connects to the configured state backend.
func OpenStore(ctx context.Context, cfg *config.Config, log *slog.Logger) (state.Store, error) {
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
		return etcd.New(ctx, o)
	case config.BackendKubernetes:
		return kube.New(ctx, kube.Options{
			Kubeconfig: cfg.Kube.Kubeconfig, Namespace: cfg.Kube.Namespace, RequestTimeout: cfg.RequestTimeout,
			QPS: float32(cfg.Kube.QPS), Burst: cfg.Kube.Burst, Logger: log,
		})
	}
	return nil, fmt.Errorf("state-backend %q: must be memory, etcd or kubernetes", cfg.StateBackend)
}

// RunCoordinator runs a coordinator process from cfg until ctx ends.
func RunCoordinator(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
	start := time.Now()
	store, err := OpenStore(ctx, cfg, log.With("component", "store"))
	if err != nil {
		return fmt.Errorf("state backend %s: %w", cfg.StateBackend, err)
	}
	defer store.Close()
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.Listen, err)
	}
	reg := prometheus.NewRegistry()
	proc, err := metrics.NewProcess(reg, "coordinator", start, time.Now)
	if err != nil {
		return err
	}
	c, err := coordinator.New(coordinator.Options{
		ClusterID: cfg.ClusterID, NodeID: cfg.NodeID, Labels: cfg.Labels,
		Advertise: advertise(cfg.Advertise, ln.Addr()), AdminAddress: cfg.AdminAdvertise,
		Timing: cfg.Timing(), RequestTimeout: cfg.RequestTimeout, DrainDelay: cfg.DrainDelay, ShutdownTimeout: cfg.ShutdownTimeout,
		Store: store, Listener: ln, Logger: log, Clock: time.Now, Registerer: reg, Process: proc,
	})
	if err != nil {
		ln.Close()
		return err
	}
	return c.Run(ctx)
}

// advertise returns the configured advertised address, or one derived from
// the bound address: a wildcard host is replaced by the loopback address
// only when nothing better is known, so set --advertise in real deployments.
func advertise(configured string, bound net.Addr) string {
	if configured != "" {
		return configured
	}
	tcp, ok := bound.(*net.TCPAddr)
	if !ok {
		return bound.String()
	}
	if tcp.IP.IsUnspecified() {
		return net.JoinHostPort("127.0.0.1", fmt.Sprint(tcp.Port))
	}
	return tcp.String()
}
