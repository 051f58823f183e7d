package app

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/pki"
	"github.com/talonhq/talon/internal/state/memory"
)

var errDevUnavailable = errors.New("talon dev is not available in this build")

// devObjects are the sample objects talon dev writes: name and size.
var devObjects = []struct {
	name string
	size int64
}{
	{"samples/small.bin", 100 << 10},
	{"samples/medium.bin", 3 << 20},
	{"samples/large.bin", 18 << 20},
	{"samples/huge.bin", 40 << 20},
	{"logs/2026/11/30/app.log", 9<<20 + 123},
	{"datasets/train-00001.parquet", 25 << 20},
}

// devConfig returns a validated configuration of role for the dev cluster:
// without TLS unless mutate configures it (see devTLS).
func devConfig(role cluster.Role, nodeID, host string, mutate func(c *config.Config)) (*config.Config, error) {
	l, err := config.Load(role, config.Options{Environ: []string{"TALON_INSECURE_CONTROL_PLANE=true"}})
	if err != nil {
		return nil, err
	}
	c := l.Config
	c.ClusterID = "dev"
	c.NodeID = nodeID
	c.Listen = net.JoinHostPort(host, "0")
	c.AdminListen = net.JoinHostPort(host, "0")
	c.HeartbeatInterval, c.UnhealthyAfter, c.LeaseTTL = time.Second, 3*time.Second, 6*time.Second
	c.RequestTimeout = time.Second
	c.DrainDelay = 0
	c.ShutdownTimeout = 5 * time.Second
	c.LogLevel = "warn"
	mutate(c)
	return c, c.Validate()
}

// RunDev runs a coordinator and workers in this process on loopback with
// the memory backend until ctx ends.
func RunDev(ctx context.Context, opts DevOptions, stdout io.Writer, log *slog.Logger) error {
	if opts.Workers < 1 || opts.Workers > 32 {
		return &usageError{fmt.Errorf("--workers %d: must be from 1 to 32", opts.Workers)}
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
	blobs := filepath.Join(dir, "blobs")
	if err := writeSamples(blobs); err != nil {
		return fmt.Errorf("sample blobs: %w", err)
	}
	// A throwaway CA and a credential per process: the dev cluster runs
	// with mutual TLS like production. Clients find theirs with --dir.
	ca, err := devPKI(dir)
	if err != nil {
		return err
	}
	hosts := []string{opts.ListenHost, "localhost"}
	devTLS := func(c *config.Config) error {
		f, err := devCredential(ca, dir, pki.Identity{Role: pki.Role(c.Role), NodeID: c.NodeID}, hosts)
		c.TLS = config.TLSConfig{CAFile: f.CAFile, CertFile: f.CertFile, KeyFile: f.KeyFile}
		c.InsecureControlPlane = false
		return err
	}
	clientFiles, err := devCredential(ca, dir, pki.Identity{Role: pki.RoleClient, NodeID: devClientID}, nil)
	if err != nil {
		return err
	}
	var tlsErr error
	var adminToken string
	if opts.AdminAuth {
		b := make([]byte, 24)
		if _, err := crand.Read(b); err != nil {
			return err
		}
		adminToken = hex.EncodeToString(b)
		if err := os.WriteFile(filepath.Join(dir, devAdminTokenFile), []byte(adminToken+"\n"), 0o600); err != nil {
			return err
		}
	}
	withToken := func(c *config.Config) {
		if adminToken != "" {
			c.Admin.Tokens = []config.Secret{config.Secret(adminToken)}
		}
	}

	// The processes log warnings and errors only, through log's handler.
	quiet := slog.New(minLevel{Handler: log.Handler(), min: slog.LevelWarn})
	store := memory.New(memory.Options{})
	defer store.Close()
	ccfg, err := devConfig(cluster.RoleCoordinator, "coordinator-1", opts.ListenHost, func(c *config.Config) {
		// Fixed, memorable ports when free.
		c.Listen, c.AdminListen = freeOr(opts.ListenHost, 7400), freeOr(opts.ListenHost, 7401)
		tlsErr = devTLS(c)
		withToken(c)
	})
	if err = errors.Join(tlsErr, err); err != nil {
		return err
	}
	coord, err := NewCoordinator(ctx, ccfg, store, uiHandler(), quiet)
	if err != nil {
		return err
	}
	// Processes built but not run yet are released if a later one fails.
	started := false
	var workers []*WorkerProcess
	defer func() {
		if !started {
			coord.Close()
			for _, w := range workers {
				w.Close()
			}
		}
	}()
	control := coord.Coordinator().Addr().String()
	adminURL := "http://" + coord.AdminAddr().String()
	if err := os.WriteFile(filepath.Join(dir, devCoordinatorsFile), []byte(control+"\n"), 0o644); err != nil {
		return err
	}
	creds, err := pki.Load(clientFiles, pki.Options{})
	if err != nil {
		return err
	}

	for i := 1; i <= opts.Workers; i++ {
		wcfg, err := devConfig(cluster.RoleWorker, fmt.Sprintf("worker-%d", i), opts.ListenHost, func(c *config.Config) {
			c.Coordinators = []string{control}
			c.BlobStore = "file://" + blobs
			c.CacheDir = filepath.Join(dir, fmt.Sprintf("cache-worker-%d", i))
			c.CacheCapacity = 64 << 20
			c.Labels = map[string]string{"zone": fmt.Sprintf("dev-%c", 'a'+rune((i-1)%3))}
			tlsErr = devTLS(c)
			withToken(c)
		})
		if err = errors.Join(tlsErr, err); err != nil {
			return err
		}
		w, err := NewWorker(wcfg, quiet)
		if err != nil {
			return err
		}
		workers = append(workers, w)
	}

	started = true
	// Workers stop first, so they deregister while the coordinator still
	// answers; then the coordinator.
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	coordCtx, stopCoord := context.WithCancel(context.WithoutCancel(ctx))
	defer stopCoord()
	var coordWG sync.WaitGroup
	var wg sync.WaitGroup
	errs := make(chan error, len(workers)+2)
	coordWG.Add(1)
	go func() { defer coordWG.Done(); errs <- coord.Run(coordCtx) }()
	for _, w := range workers {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- w.Run(runCtx) }()
	}

	fmt.Fprintf(stdout, "Talon dev cluster %q is running (memory backend). Ctrl-C stops it.\n\n", ccfg.ClusterID)
	fmt.Fprintf(stdout, "  web UI and /api/v1   %s/\n", adminURL)
	fmt.Fprintf(stdout, "  metrics              %s/metrics\n", adminURL)
	fmt.Fprintf(stdout, "  control address      %s\n", control)
	for _, w := range workers {
		fmt.Fprintf(stdout, "  %-20s data %s  admin http://%s\n", w.Worker().NodeID(), w.Worker().DataAddress(), w.AdminAddr())
	}
	fmt.Fprintf(stdout, "  blobs                %s\n", blobs)
	fmt.Fprintf(stdout, "  credentials          %s (throwaway CA; control and data ports use mutual TLS)\n\n", filepath.Join(dir, devTLSDir))
	ctl := "bin/talonctl --server " + adminURL
	if adminToken != "" {
		ctl += " --token-file " + filepath.Join(dir, devAdminTokenFile)
	}
	fmt.Fprintf(stdout, "Try:\n  %s nodes list\n  %s top\n  bin/talon get --dir %s %s -o /tmp/large.bin\n  bin/talon bench lookups --dir %s --duration 5s\n",
		ctl, ctl, dir, devObjects[2].name, dir)
	fmt.Fprintf(stdout, "  bin/talon worker --dev-dir %s --cluster-id %s --node-id worker-%d --coordinators %s --blob-store file://%s --cache-dir %s --listen %s --admin-listen %s\n\n",
		dir, ccfg.ClusterID, opts.Workers+1, control, blobs, filepath.Join(dir, fmt.Sprintf("cache-worker-%d", opts.Workers+1)),
		net.JoinHostPort(opts.ListenHost, "0"), net.JoinHostPort(opts.ListenHost, "0"))

	if opts.DemoLoad {
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

// writeSamples writes the sample objects with deterministic content,
// keeping files that already have the right size.
func writeSamples(dir string) error {
	for i, o := range devObjects {
		p := filepath.Join(dir, filepath.FromSlash(o.name))
		if fi, err := os.Stat(p); err == nil && fi.Size() == o.size {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		r := rand.New(rand.NewPCG(uint64(i), 42))
		buf := make([]byte, o.size+7)
		for j := 0; j < len(buf)-7; j += 8 {
			binary.LittleEndian.PutUint64(buf[j:], r.Uint64())
		}
		buf = buf[:o.size]
		if err := os.WriteFile(p, buf, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// demoLoad reads sample objects through the cluster at a gentle pace so
// the views show traffic.
func demoLoad(ctx context.Context, control string, creds *pki.Source, log *slog.Logger) {
	cl, err := client.New(client.Options{Coordinators: []string{control}, CacheTTL: 5 * time.Second,
		TLS: creds.ClientConfig(pki.Expect{Roles: []pki.Role{pki.RoleCoordinator}})})
	if err != nil {
		return
	}
	defer cl.Close()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = creds.ClientConfig(pki.Expect{Roles: []pki.Role{pki.RoleWorker}})
	defer tr.CloseIdleConnections()
	r := &client.ObjectReader{Client: cl, HTTP: &http.Client{Timeout: 10 * time.Second, Transport: tr}, BlockSize: 4 << 20, Replicas: 2, TLS: true, Verify: true}
	t := time.NewTicker(700 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		o := devObjects[rand.N(len(devObjects))]
		if _, err := r.ReadObject(ctx, o.name, io.Discard); err != nil && ctx.Err() == nil {
			log.Debug("demo read failed", "object", o.name, "error", err)
		}
	}
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
