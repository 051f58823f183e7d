package devcluster

import (
	"cmp"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/coordinator"
	"github.com/talonhq/talon/internal/pki"
	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/state/memory"
	"github.com/talonhq/talon/internal/worker"
)

// Options configures Run: the flags of `talon dev`.
type Options struct {
	Workers  int
	BaseDir  string
	DemoLoad bool
	// ListenHost is the loopback host every process binds.
	ListenHost string
	// AllowNonLoopback lets ListenHost be an address other hosts reach
	// (--allow-non-loopback): the admin listeners then serve the cluster
	// to them, without a token unless AdminAuth.
	AllowNonLoopback bool
	// AdminAuth requires a generated bearer token on the admin listeners
	// (written to <dir>/admin-token).
	AdminAuth bool
	// BlobStore, if set, is the workers' blob store URL (an s3:// bucket,
	// say) instead of the sample directory <dir>/blobs.
	BlobStore string
}

// MaxWorkers is the most workers a dev cluster runs.
const MaxWorkers = 32

// Validate checks the options, naming the flag at fault.
func (o Options) Validate() error {
	if o.Workers < 1 || o.Workers > MaxWorkers {
		return fmt.Errorf("--workers %d: must be from 1 to %d", o.Workers, MaxWorkers)
	}
	if !o.AllowNonLoopback && !IsLoopbackHost(o.ListenHost) {
		return fmt.Errorf("--host %q: must be a loopback address (127.0.0.0/8, ::1 or localhost); a dev cluster bound elsewhere serves its admin listeners to other hosts: add --allow-non-loopback to mean it", o.ListenHost)
	}
	return nil
}

// IsLoopbackHost reports whether host is "localhost" or a loopback IP
// address. Any other name may resolve anywhere, so it is not.
func IsLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil && a.Unmap().IsLoopback()
}

// Roles builds the processes of a dev cluster from their configurations.
// Package app supplies it: a dev cluster's processes are wired exactly as
// standalone ones.
type Roles struct {
	// Coordinator builds a coordinator process on store.
	Coordinator func(ctx context.Context, cfg *config.Config, store state.Store, log *slog.Logger) (Coordinator, error)
	// Worker builds a worker process.
	Worker func(cfg *config.Config, log *slog.Logger) (Worker, error)
}

// Coordinator is a built coordinator process.
type Coordinator interface {
	Coordinator() *coordinator.Coordinator
	AdminAddr() net.Addr
	// Run serves until ctx ends and drains.
	Run(ctx context.Context) error
	// Close releases a process that will not be run.
	Close() error
}

// Worker is a built worker process.
type Worker interface {
	Worker() *worker.Worker
	AdminAddr() net.Addr
	// Run serves until ctx ends and drains.
	Run(ctx context.Context) error
	// Close releases a process that will not be run.
	Close() error
}

// devDir is one run's directory and the credentials every process of it
// is configured with.
type devDir struct {
	opts        Options
	dir         string
	blobs       string
	ca          *pki.CA
	clientFiles pki.Files
	adminToken  string // "" without AdminAuth
}

// prepare writes the samples, the CA, the client credential and (with
// AdminAuth) the admin token into dir.
func prepare(dir string, opts Options) (*devDir, error) {
	d := &devDir{opts: opts, dir: dir, blobs: filepath.Join(dir, "blobs")}
	if err := writeSamples(d.blobs); err != nil {
		return nil, fmt.Errorf("sample blobs: %w", err)
	}
	// A throwaway CA and a credential per process: the dev cluster runs
	// with mutual TLS like production. Clients find theirs with --dir.
	var err error
	if d.ca, err = loadCA(dir); err != nil {
		return nil, err
	}
	if d.clientFiles, err = credential(d.ca, dir, pki.Identity{Role: pki.RoleClient, NodeID: ClientID, Cluster: ClusterID}, nil); err != nil {
		return nil, err
	}
	if opts.AdminAuth {
		b := make([]byte, 24)
		if _, err := crand.Read(b); err != nil {
			return nil, err
		}
		d.adminToken = hex.EncodeToString(b)
		if err := os.WriteFile(filepath.Join(dir, AdminTokenFile), []byte(d.adminToken+"\n"), 0o600); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// config returns the validated configuration of a process of the cluster:
// Config with mutate, then its credential and the admin token.
func (d *devDir) config(role cluster.Role, nodeID string, mutate func(c *config.Config)) (*config.Config, error) {
	var credErr error
	cfg, err := Config(role, nodeID, d.opts.ListenHost, func(c *config.Config) {
		mutate(c)
		f, err := credential(d.ca, d.dir, pki.Identity{Role: pki.Role(c.Role), NodeID: c.NodeID, Cluster: c.ClusterID}, []string{d.opts.ListenHost, "localhost"})
		c.TLS = config.TLSConfig{CAFile: f.CAFile, CertFile: f.CertFile, KeyFile: f.KeyFile}
		c.InsecureControlPlane = false
		credErr = err
		if d.adminToken != "" {
			// The dev cluster's one token does everything: talonctl's
			// reads, its cordons, and scrapes.
			c.Admin.Tokens = []config.AdminToken{{Name: "dev", Scopes: config.ScopeRead | config.ScopeOperate | config.ScopeMetrics, Token: config.Secret(d.adminToken)}}
		}
	})
	return cfg, errors.Join(credErr, err)
}

// Run runs a coordinator and opts.Workers workers in this process on
// loopback with the memory backend until ctx ends, and prints on stdout
// the addresses to use. Every process logs warnings and errors only,
// through log's handler.
func Run(ctx context.Context, opts Options, roles Roles, stdout io.Writer, log *slog.Logger) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	dir := opts.BaseDir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "talon-dev-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	d, err := prepare(dir, opts)
	if err != nil {
		return err
	}
	quiet := slog.New(minLevel{Handler: log.Handler(), min: slog.LevelWarn})
	store := memory.New(memory.Options{})
	defer store.Close()
	ccfg, err := d.config(cluster.RoleCoordinator, "coordinator-1", func(c *config.Config) {
		// Fixed, memorable ports when free.
		c.Listen, c.AdminListen = freeOr(opts.ListenHost, 7400), freeOr(opts.ListenHost, 7401)
	})
	if err != nil {
		return err
	}
	coord, err := roles.Coordinator(ctx, ccfg, store, quiet)
	if err != nil {
		return err
	}
	workers, creds, err := d.build(coord, roles, quiet)
	if err != nil {
		coord.Close()
		return err
	}
	c := &running{dir: d, cfg: ccfg, coord: coord, workers: workers}
	return c.run(ctx, creds, stdout, log)
}

// build writes the control address into the directory, loads the client
// credential and builds the workers; on an error it closes those it built.
func (d *devDir) build(coord Coordinator, roles Roles, log *slog.Logger) (workers []Worker, creds *pki.Source, err error) {
	defer func() {
		if err != nil {
			for _, w := range workers {
				w.Close()
			}
		}
	}()
	control := coord.Coordinator().Addr().String()
	if err := os.WriteFile(filepath.Join(d.dir, CoordinatorsFile), []byte(control+"\n"), 0o644); err != nil {
		return nil, nil, err
	}
	if creds, err = pki.Load(d.clientFiles, pki.Options{}); err != nil {
		return nil, nil, err
	}
	for i := 1; i <= d.opts.Workers; i++ {
		wcfg, err := d.config(cluster.RoleWorker, fmt.Sprintf("worker-%d", i), func(c *config.Config) {
			c.Coordinators = []string{control}
			c.BlobStore = cmp.Or(d.opts.BlobStore, "file://"+d.blobs)
			c.CacheDir = filepath.Join(d.dir, fmt.Sprintf("cache-worker-%d", i))
			c.CacheCapacity = 64 << 20
			c.Labels = map[string]string{"zone": fmt.Sprintf("dev-%c", 'a'+rune((i-1)%3))}
		})
		if err != nil {
			return workers, nil, err
		}
		w, err := roles.Worker(wcfg, log)
		if err != nil {
			return workers, nil, err
		}
		workers = append(workers, w)
	}
	return workers, creds, nil
}

// running is a built dev cluster.
type running struct {
	dir     *devDir
	cfg     *config.Config // the coordinator's
	coord   Coordinator
	workers []Worker
}

// run starts the processes, prints the banner and starts the demo load;
// when ctx ends or a process stops, it stops the workers and, after them,
// the coordinator.
func (c *running) run(ctx context.Context, creds *pki.Source, stdout io.Writer, log *slog.Logger) error {
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	coordCtx, stopCoord := context.WithCancel(context.WithoutCancel(ctx))
	defer stopCoord()
	var coordWG sync.WaitGroup
	var wg sync.WaitGroup
	errs := make(chan error, len(c.workers)+2)
	coordWG.Add(1)
	go func() { defer coordWG.Done(); errs <- c.coord.Run(coordCtx) }()
	for _, w := range c.workers {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- w.Run(runCtx) }()
	}
	c.banner(stdout)
	if c.dir.opts.DemoLoad {
		control := c.coord.Coordinator().Addr().String()
		wg.Add(1)
		go func() { defer wg.Done(); demoLoad(runCtx, control, creds, log) }()
	}
	var first error
	select {
	case <-ctx.Done():
	case first = <-errs:
		log.Error("a dev cluster process stopped; stopping the others", "error", first)
	}
	stop()
	wg.Wait()
	stopCoord()
	coordWG.Wait()
	return first
}

// banner prints the addresses of the cluster and commands to try.
func (c *running) banner(stdout io.Writer) {
	d, host := c.dir, c.dir.opts.ListenHost
	control := c.coord.Coordinator().Addr().String()
	adminURL := "http://" + c.coord.AdminAddr().String()
	fmt.Fprintf(stdout, "Talon dev cluster %q is running (memory backend). Ctrl-C stops it.\n\n", c.cfg.ClusterID)
	fmt.Fprintf(stdout, "  web UI and /api/v1   %s/\n", adminURL)
	fmt.Fprintf(stdout, "  metrics              %s/metrics\n", adminURL)
	fmt.Fprintf(stdout, "  control address      %s\n", control)
	for _, w := range c.workers {
		fmt.Fprintf(stdout, "  %-20s data %s  admin http://%s\n", w.Worker().NodeID(), w.Worker().DataAddress(), w.AdminAddr())
	}
	fmt.Fprintf(stdout, "  blobs                %s\n", cmp.Or(config.RedactURL(d.opts.BlobStore), d.blobs))
	fmt.Fprintf(stdout, "  credentials          %s (throwaway CA; control and data ports use mutual TLS)\n\n", filepath.Join(d.dir, TLSDir))
	ctl := "bin/talonctl --server " + adminURL
	if d.adminToken != "" {
		ctl += " --token-file " + filepath.Join(d.dir, AdminTokenFile)
	}
	fmt.Fprintf(stdout, "Try:\n  %s nodes list\n  %s top\n  bin/talon get --dir %s %s -o /tmp/large.bin\n  bin/talon bench lookups --dir %s --duration 5s\n",
		ctl, ctl, d.dir, samples[2].Name, d.dir)
	fmt.Fprintf(stdout, "  bin/talon worker --dev-dir %s --cluster-id %s --node-id worker-%d --coordinators %s --blob-store '%s' --cache-dir %s --listen %s --admin-listen %s\n\n",
		d.dir, c.cfg.ClusterID, d.opts.Workers+1, control, cmp.Or(config.RedactURL(d.opts.BlobStore), "file://"+d.blobs), filepath.Join(d.dir, fmt.Sprintf("cache-worker-%d", d.opts.Workers+1)),
		net.JoinHostPort(host, "0"), net.JoinHostPort(host, "0"))
}

// freeOr returns host:port when that port is free, else host:0.
func freeOr(host string, port int) string {
	addr := net.JoinHostPort(host, fmt.Sprint(port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return net.JoinHostPort(host, "0")
	}
	ln.Close()
	return addr
}

// minLevel passes on records at min or above.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(a []slog.Attr) slog.Handler {
	return minLevel{Handler: h.Handler.WithAttrs(a), min: h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{Handler: h.Handler.WithGroup(name), min: h.min}
}
