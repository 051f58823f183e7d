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
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

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
	Workers int
	// Coordinators is how many coordinators run, over the one memory
	// store (active-active in one process: the demo of failover and
	// agreement); 0 means 1.
	Coordinators int
	BaseDir      string
	DemoLoad     bool
	// ListenHost is the loopback host every process binds.
	ListenHost string
	// AllowNonLoopback lets ListenHost be an address other hosts reach
	// (--allow-non-loopback): the admin listeners then serve the cluster
	// to them, without a token unless AdminAuth.
	AllowNonLoopback bool
	// AdminAuth requires a generated bearer token with every scope on the
	// admin listeners (printed, written to <dir>/admin-token and named by
	// the talonctl context in <dir>/talonctl.yaml); `talon dev` sets it
	// unless --admin-auth=false.
	AdminAuth bool
	// BlobStore, if set, is the workers' blob store URL (an s3:// bucket,
	// say) instead of the sample directory <dir>/blobs.
	BlobStore string
}

// MaxWorkers is the most workers a dev cluster runs.
const MaxWorkers = 32

// MaxCoordinators is the most coordinators a dev cluster runs.
const MaxCoordinators = 5

// Validate checks the options, naming the flag at fault.
func (o Options) Validate() error {
	if o.Workers < 1 || o.Workers > MaxWorkers {
		return fmt.Errorf("--workers %d: must be from 1 to %d", o.Workers, MaxWorkers)
	}
	if o.Coordinators < 0 || o.Coordinators > MaxCoordinators {
		return fmt.Errorf("--coordinators %d: must be from 1 to %d", o.Coordinators, MaxCoordinators)
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
			c.Admin.Tokens = []config.AdminToken{{Name: "dev", Scopes: config.ScopeRead | config.ScopeOperate | config.ScopeMetrics | config.ScopeDebug, Token: config.Secret(d.adminToken)}}
		}
	})
	return cfg, errors.Join(credErr, err)
}

// Run runs opts.Coordinators coordinators (one by default) over one
// memory store and opts.Workers workers in this process on loopback until
// ctx ends, and prints on stdout the addresses to use. Every process logs
// warnings and errors only, through log's handler. With several
// coordinators, SIGUSR1 stops the next running one and SIGUSR2 starts the
// last stopped one again (as a new incarnation on the same addresses), so
// that talonctl top and the web UI show failover.
func Run(ctx context.Context, opts Options, roles Roles, stdout io.Writer, log *slog.Logger) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	opts.Coordinators = max(opts.Coordinators, 1)
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
	c := &running{dir: d, roles: roles, store: store, log: quiet}
	if err := c.buildCoordinators(ctx, stdout, log); err != nil {
		return err
	}
	workers, creds, err := d.build(c.controls(), roles, quiet)
	if err != nil {
		c.closeCoordinators()
		return err
	}
	c.workers = workers
	if c.contextFile, err = d.writeContext(c.admins()); err != nil {
		c.closeCoordinators()
		for _, w := range workers {
			_ = w.Close()
		}
		return err
	}
	return c.run(ctx, creds, stdout, log)
}

// devCoordinator is one coordinator of a dev cluster and what restarts it.
type devCoordinator struct {
	cfg  *config.Config // its addresses fixed to the ones it bound
	proc Coordinator
	stop context.CancelFunc // nil while not running
	done chan error         // receives Run's result
}

// buildCoordinators builds the coordinators on fixed, memorable ports when
// free (7400/7401, 7402/7403, ...), saying so loudly when one is taken.
func (c *running) buildCoordinators(ctx context.Context, stdout io.Writer, log *slog.Logger) error {
	d := c.dir
	for i := range d.opts.Coordinators {
		id := fmt.Sprintf("coordinator-%d", i+1)
		control, admin := d.port(stdout, log, id, "control", 7400+2*i), d.port(stdout, log, id, "admin", 7401+2*i)
		cfg, err := d.config(cluster.RoleCoordinator, id, func(cc *config.Config) { cc.Listen, cc.AdminListen = control, admin })
		if err != nil {
			c.closeCoordinators()
			return err
		}
		// One process shares one memory store among its coordinators: the
		// memory backend's single-coordinator rule is about processes.
		cfg.CoordinatorReplicas, cfg.HA = d.opts.Coordinators, d.opts.Coordinators > 1
		p, err := c.roles.Coordinator(ctx, cfg, c.store, c.log)
		if err != nil {
			c.closeCoordinators()
			return err
		}
		cfg.Listen, cfg.AdminListen = p.Coordinator().Addr().String(), p.AdminAddr().String()
		c.coords = append(c.coords, &devCoordinator{cfg: cfg, proc: p})
	}
	return nil
}

// port returns host:port when that port is free, else host:0, saying on
// stdout and in the log which listener moved (issue 38: it moved without a
// word).
func (d *devDir) port(stdout io.Writer, log *slog.Logger, id, listener string, port int) string {
	addr := freeOr(d.opts.ListenHost, port)
	if addr != net.JoinHostPort(d.opts.ListenHost, fmt.Sprint(port)) {
		fmt.Fprintf(stdout, "WARNING: port %d is taken: %s's %s listener uses a random port instead (see the addresses below)\n", port, id, listener)
		log.Warn("dev port taken; using a random one", "port", port, "node", id, "listener", listener)
	}
	return addr
}

// admins are the coordinators' admin URLs, in order.
func (c *running) admins() []string {
	var out []string
	for _, dc := range c.coords {
		out = append(out, "http://"+dc.cfg.AdminListen)
	}
	return out
}

// controls are the coordinators' control addresses.
func (c *running) controls() []string {
	out := make([]string, len(c.coords))
	for i, dc := range c.coords {
		out[i] = dc.cfg.Listen
	}
	return out
}

// closeCoordinators releases coordinators built and not run.
func (c *running) closeCoordinators() {
	for _, dc := range c.coords {
		dc.proc.Close()
	}
}

// build writes the control addresses into the directory, loads the
// client credential and builds the workers; on an error it closes those
// it built.
func (d *devDir) build(controls []string, roles Roles, log *slog.Logger) (workers []Worker, creds *pki.Source, err error) {
	defer func() {
		if err != nil {
			for _, w := range workers {
				w.Close()
			}
		}
	}()
	if err := os.WriteFile(filepath.Join(d.dir, CoordinatorsFile), []byte(strings.Join(controls, "\n")+"\n"), 0o644); err != nil {
		return nil, nil, err
	}
	if creds, err = pki.Load(d.clientFiles, pki.Options{}); err != nil {
		return nil, nil, err
	}
	for i := 1; i <= d.opts.Workers; i++ {
		wcfg, err := d.config(cluster.RoleWorker, fmt.Sprintf("worker-%d", i), func(c *config.Config) {
			c.Coordinators = controls
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
	roles   Roles
	store   state.Store
	log     *slog.Logger // the processes'
	coords  []*devCoordinator
	workers []Worker
	// contextFile is the talonctl configuration file of the cluster
	// (writeContext).
	contextFile string
	mu          sync.Mutex // guards coords' stop and done, and stopped
	stopped     []int      // coordinators stopped by SIGUSR1, last last
}

// run starts the processes, prints the banner and starts the demo load;
// when ctx ends or a process stops, it stops the workers and, after them,
// the coordinators.
func (c *running) run(ctx context.Context, creds *pki.Source, stdout io.Writer, log *slog.Logger) error {
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	errs := make(chan error, len(c.workers)+1)
	for i := range c.coords {
		c.startCoordinator(ctx, i, c.coords[i].proc)
	}
	for _, w := range c.workers {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- w.Run(runCtx) }()
	}
	c.banner(stdout)
	if c.dir.opts.DemoLoad {
		wg.Add(1)
		go func() { defer wg.Done(); demoLoad(runCtx, c.controls(), creds, log) }()
	}
	signals := c.signals(runCtx, stdout)
	var first error
	select {
	case <-ctx.Done():
	case first = <-errs:
		log.Error("a dev cluster process stopped; stopping the others", "error", first)
	}
	stop()
	<-signals
	wg.Wait()
	c.stopCoordinators()
	return first
}

// startCoordinator runs coordinator i's process p until stopCoordinator
// or the end of the cluster.
func (c *running) startCoordinator(ctx context.Context, i int, p Coordinator) {
	dc := c.coords[i]
	cctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	c.mu.Lock()
	dc.proc, dc.stop, dc.done = p, stop, done
	c.mu.Unlock()
	go func() { done <- p.Run(cctx) }()
}

// stopCoordinator stops coordinator i and waits for it.
func (c *running) stopCoordinator(i int) {
	c.mu.Lock()
	dc := c.coords[i]
	stop, done := dc.stop, dc.done
	dc.stop, dc.done = nil, nil
	c.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

// stopCoordinators stops every running coordinator.
func (c *running) stopCoordinators() {
	for i := range c.coords {
		c.stopCoordinator(i)
	}
}

// signals handles SIGUSR1 (stop the next running coordinator) and SIGUSR2
// (start the last stopped one again) until ctx ends; the channel closes
// then.
func (c *running) signals(ctx context.Context, stdout io.Writer) <-chan struct{} {
	done := make(chan struct{})
	sig := make(chan os.Signal, 4)
	if len(c.coords) > 1 {
		signal.Notify(sig, syscall.SIGUSR1, syscall.SIGUSR2)
	}
	go func() {
		defer close(done)
		defer signal.Stop(sig)
		for {
			select {
			case <-ctx.Done():
				return
			case s := <-sig:
				c.onSignal(ctx, s, stdout)
			}
		}
	}()
	return done
}

// onSignal stops or restarts a coordinator for signal s.
func (c *running) onSignal(ctx context.Context, s os.Signal, stdout io.Writer) {
	if s == syscall.SIGUSR1 {
		i := c.nextRunning()
		if i < 0 {
			fmt.Fprintln(stdout, "SIGUSR1: only one coordinator is running: it stays")
			return
		}
		c.stopCoordinator(i)
		c.mu.Lock()
		c.stopped = append(c.stopped, i)
		c.mu.Unlock()
		fmt.Fprintf(stdout, "SIGUSR1: stopped %s (its record expires within the lease TTL; SIGUSR2 starts it again)\n", c.coords[i].cfg.NodeID)
		return
	}
	c.mu.Lock()
	if len(c.stopped) == 0 {
		c.mu.Unlock()
		fmt.Fprintln(stdout, "SIGUSR2: no coordinator is stopped")
		return
	}
	i := c.stopped[len(c.stopped)-1]
	c.stopped = c.stopped[:len(c.stopped)-1]
	c.mu.Unlock()
	dc := c.coords[i]
	p, err := c.roles.Coordinator(ctx, dc.cfg, c.store, c.log)
	if err != nil {
		fmt.Fprintf(stdout, "SIGUSR2: %s could not start again: %v\n", dc.cfg.NodeID, err)
		return
	}
	c.startCoordinator(ctx, i, p)
	fmt.Fprintf(stdout, "SIGUSR2: started %s again\n", dc.cfg.NodeID)
}

// nextRunning is the running coordinator SIGUSR1 stops: the first one
// running (coordinator-1 first: the first server of the dev context, which
// talonctl and top ask first, so that top shows the failover), never the
// only one left.
func (c *running) nextRunning() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	running := -1
	n := 0
	for i, dc := range c.coords {
		if dc.stop != nil {
			if running < 0 {
				running = i
			}
			n++
		}
	}
	if n < 2 {
		return -1
	}
	return running
}

// banner prints the addresses of the cluster and commands to try.
func (c *running) banner(stdout io.Writer) {
	d, host := c.dir, c.dir.opts.ListenHost
	first := "http://" + c.coords[0].cfg.AdminListen
	fmt.Fprintf(stdout, "Talon dev cluster %q is running (memory backend). Ctrl-C stops it.\n\n", ClusterID)
	fmt.Fprintf(stdout, "  web UI and /api/v1   %s/\n", first)
	fmt.Fprintf(stdout, "  metrics              %s/metrics\n", first)
	for _, dc := range c.coords {
		fmt.Fprintf(stdout, "  %-20s control %s  admin http://%s\n", dc.cfg.NodeID, dc.cfg.Listen, dc.cfg.AdminListen)
	}
	for _, w := range c.workers {
		fmt.Fprintf(stdout, "  %-20s data %s  admin http://%s\n", w.Worker().NodeID(), w.Worker().DataAddress(), w.AdminAddr())
	}
	fmt.Fprintf(stdout, "  blobs                %s\n", cmp.Or(config.RedactURL(d.opts.BlobStore), d.blobs))
	fmt.Fprintf(stdout, "  credentials          %s (throwaway CA; control and data ports use mutual TLS)\n", filepath.Join(d.dir, TLSDir))
	if d.adminToken != "" {
		fmt.Fprintf(stdout, "  admin token          %s (every scope: reads, cordons and jobs, scrapes, debug; also in %s; the web UI asks for it)\n", d.adminToken, filepath.Join(d.dir, AdminTokenFile))
	}
	with := "every coordinator's admin URL"
	if d.adminToken != "" {
		with += " and the admin token"
	}
	fmt.Fprintf(stdout, "  talonctl context     %s in %s (%s)\n\n", ContextName, c.contextFile, with)
	fmt.Fprintf(stdout, "Try (from another terminal):\n  export TALONCTL_CONFIG=%s\n  bin/talonctl nodes list\n  bin/talonctl top\n  bin/talon get --dir %s %s -o /tmp/large.bin\n  bin/talon bench lookups --dir %s --duration 5s\n",
		c.contextFile, d.dir, samples[2].Name, d.dir)
	if len(c.coords) > 1 {
		fmt.Fprintf(stdout, "  bin/talonctl coordinators list\n  kill -USR1 %d   # stops %s, the coordinator talonctl and top ask first: top fails over, the others keep answering; kill -USR2 %d starts it again\n",
			os.Getpid(), c.coords[0].cfg.NodeID, os.Getpid())
	}
	fmt.Fprintf(stdout, "  bin/talon worker --dev-dir %s --cluster-id %s --node-id worker-%d --coordinators %s --blob-store '%s' --cache-dir %s --listen %s --admin-listen %s\n\n",
		d.dir, ClusterID, d.opts.Workers+1, strings.Join(c.controls(), ","), cmp.Or(config.RedactURL(d.opts.BlobStore), "file://"+d.blobs), filepath.Join(d.dir, fmt.Sprintf("cache-worker-%d", d.opts.Workers+1)),
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
