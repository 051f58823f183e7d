package testenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// EtcdRootUser is the etcd user that StartEtcd creates when auth is on.
const EtcdRootUser = "root"

// Start-up bounds. They are generous because CI runs on two cores, possibly
// beside other test binaries; a healthy etcd is ready in well under a second.
const (
	etcdStartTimeout = 60 * time.Second
	startAttempts    = 3 // new ports after "address already in use"
	opTimeout        = 10 * time.Second
)

// EtcdOptions configures StartEtcd. The zero value is a plain-HTTP etcd
// without authentication.
type EtcdOptions struct {
	// TLS serves the client port over TLS with a CA, server certificate and
	// client certificate generated for this server (see Etcd.TLSFiles).
	TLS bool
	// ClientCertAuth makes etcd reject clients without a certificate signed
	// by its CA. It implies TLS.
	ClientCertAuth bool
	// Auth enables etcd authentication: StartEtcd creates EtcdRootUser with
	// RootPassword, grants it the root role and turns auth on.
	Auth bool
	// RootPassword is the root user's password when Auth is set; empty means
	// a random one (see Etcd.RootPassword).
	RootPassword string
	// Fsync keeps etcd's fsyncs. By default etcd runs with
	// --unsafe-no-fsync, which is much faster on slow disks and still keeps
	// every write across Stop, Kill and restart (only a machine crash loses
	// data).
	Fsync bool
	// ExtraArgs are appended to etcd's command line.
	ExtraArgs []string
}

// Etcd is a single-member etcd server on loopback, started by StartEtcd and
// killed by a cleanup of the test that started it. See the package comment
// for which methods may be called from other goroutines.
type Etcd struct {
	t            testing.TB
	opts         EtcdOptions
	dir          string
	dataDir      string
	clusterToken string
	rootPassword string
	tlsFiles     TLSFiles
	tlsConf      *tls.Config // nil without TLS; cloned before use

	// clientURL and peerURL are set before the first successful start and
	// never change after it.
	clientURL string
	peerURL   string

	p *proc
}

// StartEtcd starts an etcd server for the test, waits until it reports
// healthy (and, with Auth, until auth is enabled), and registers a cleanup
// that kills it. Its data dir, certificates and log live in a temporary
// directory that the testing package removes afterwards.
func StartEtcd(t testing.TB, opts EtcdOptions) *Etcd {
	t.Helper()
	bin := EtcdBinary(t)
	if opts.ClientCertAuth {
		opts.TLS = true
	}
	dir := t.TempDir() // removed after the kill cleanup below: cleanups run last-in first-out
	e := &Etcd{
		t:            t,
		opts:         opts,
		dir:          dir,
		dataDir:      filepath.Join(dir, "data"),
		clusterToken: "talon-test-" + randomToken()[:12],
		rootPassword: opts.RootPassword,
		p: &proc{
			name:    "etcd",
			bin:     bin,
			logPath: filepath.Join(dir, "etcd.log"),
			env:     childEnv(),
		},
	}
	if opts.Auth && e.rootPassword == "" {
		e.rootPassword = randomToken()
	}
	if opts.TLS {
		if err := e.writeCerts(); err != nil {
			t.Fatalf("testenv: etcd certificates: %v", err)
		}
	}
	t.Cleanup(e.cleanup)

	for attempt := 1; ; attempt++ {
		ports, err := freePorts(2)
		if err != nil {
			t.Fatalf("testenv: etcd: %v", err)
		}
		scheme := "http"
		if opts.TLS {
			scheme = "https"
		}
		e.clientURL = fmt.Sprintf("%s://127.0.0.1:%d", scheme, ports[0])
		e.peerURL = fmt.Sprintf("http://127.0.0.1:%d", ports[1])
		e.p.mu.Lock()
		e.p.args = e.args()
		e.p.mu.Unlock()
		err = e.startAndWait()
		if err == nil {
			break
		}
		logTail := e.p.logTail()
		if stopErr := e.p.stop(0); stopErr != nil {
			t.Errorf("testenv: %v", stopErr)
		}
		if attempt < startAttempts && strings.Contains(logTail, "address already in use") {
			// Another process took a port between freePorts and etcd's
			// bind. The data dir remembers the old peer URL; start over.
			if err := os.RemoveAll(e.dataDir); err != nil {
				t.Fatalf("testenv: etcd: remove data dir for retry: %v", err)
			}
			continue
		}
		t.Fatalf("testenv: etcd did not become healthy: %v\n--- etcd log %s ---\n%s", err, e.p.logPath, logTail)
	}
	if opts.Auth {
		if err := e.enableAuth(); err != nil {
			t.Fatalf("testenv: enable etcd auth: %v\n--- etcd log %s ---\n%s", err, e.p.logPath, e.p.logTail())
		}
	}
	return e
}

func (e *Etcd) writeCerts() error {
	certDir := filepath.Join(e.dir, "tls")
	if err := os.Mkdir(certDir, 0o700); err != nil {
		return err
	}
	ca, err := newCA("talon-testenv-etcd-ca")
	if err != nil {
		return err
	}
	caFile := filepath.Join(certDir, "ca.crt")
	if err := os.WriteFile(caFile, ca.certPEM, 0o600); err != nil {
		return err
	}
	if _, _, err := ca.writeIssued(certDir, "server", "talon-testenv-etcd"); err != nil {
		return err
	}
	certFile, keyFile, err := ca.writeIssued(certDir, "client", "talon-testenv-client")
	if err != nil {
		return err
	}
	e.tlsFiles = TLSFiles{CAFile: caFile, CertFile: certFile, KeyFile: keyFile}

	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return err
	}
	e.tlsConf = &tls.Config{
		RootCAs:      pool,
		Certificates: []tls.Certificate{pair},
		MinVersion:   tls.VersionTLS12,
	}
	return nil
}

func (e *Etcd) args() []string {
	a := []string{
		"--name=talon-test",
		"--data-dir=" + e.dataDir,
		"--listen-client-urls=" + e.clientURL,
		"--advertise-client-urls=" + e.clientURL,
		"--listen-peer-urls=" + e.peerURL,
		"--initial-advertise-peer-urls=" + e.peerURL,
		"--initial-cluster=talon-test=" + e.peerURL,
		"--initial-cluster-state=new",
		"--initial-cluster-token=" + e.clusterToken,
		"--heartbeat-interval=50",
		"--election-timeout=500",
		"--auto-compaction-retention=0",
		"--auth-token=simple",
		"--bcrypt-cost=4", // the minimum: every authenticate costs microseconds, not ~100ms
		"--logger=zap",
		"--log-outputs=stderr",
		"--log-level=info",
	}
	if !e.opts.Fsync {
		a = append(a, "--unsafe-no-fsync")
	}
	if e.opts.TLS {
		dir := filepath.Join(e.dir, "tls")
		a = append(a,
			"--cert-file="+filepath.Join(dir, "server.crt"),
			"--key-file="+filepath.Join(dir, "server.key"),
		)
	}
	if e.opts.ClientCertAuth {
		a = append(a,
			"--client-cert-auth",
			"--trusted-ca-file="+e.tlsFiles.CAFile,
		)
	}
	return append(a, e.opts.ExtraArgs...)
}

// startAndWait starts the process and polls /health until it answers
// healthy, the process exits, or etcdStartTimeout passes.
func (e *Etcd) startAndWait() error {
	if err := e.p.start(); err != nil {
		return err
	}
	tr := &http.Transport{TLSClientConfig: e.TLSConfig(), DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 2 * time.Second}
	done := e.p.exited()
	deadline := time.Now().Add(etcdStartTimeout)
	var last error
	for {
		select {
		case <-done:
			return fmt.Errorf("etcd exited during start-up (%s)", e.p.exitStatus())
		default:
		}
		last = checkEtcdHealth(hc, e.clientURL+"/health")
		if last == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not healthy after %v: %w", etcdStartTimeout, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func checkEtcdHealth(hc *http.Client, url string) error {
	resp, err := hc.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"health":"true"`) {
		return fmt.Errorf("GET /health: %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// enableAuth creates the root user and role and turns authentication on.
func (e *Etcd) enableAuth() error {
	cli, err := clientv3.New(e.ClientConfig("", ""))
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if _, err := cli.UserAdd(ctx, EtcdRootUser, e.rootPassword); err != nil {
		return fmt.Errorf("add user %s: %w", EtcdRootUser, err)
	}
	if _, err := cli.RoleAdd(ctx, "root"); err != nil && !errors.Is(err, rpctypes.ErrRoleAlreadyExist) {
		return fmt.Errorf("add role root: %w", err)
	}
	if _, err := cli.UserGrantRole(ctx, EtcdRootUser, "root"); err != nil {
		return fmt.Errorf("grant role root to %s: %w", EtcdRootUser, err)
	}
	if _, err := cli.AuthEnable(ctx); err != nil {
		return fmt.Errorf("auth enable: %w", err)
	}
	return nil
}

func (e *Etcd) cleanup() {
	if err := e.p.stop(0); err != nil {
		e.t.Errorf("testenv: kill etcd: %v", err)
	}
	if e.t.Failed() {
		e.t.Logf("--- etcd log %s (tail) ---\n%s", e.p.logPath, e.p.logTail())
	}
}

// Endpoints returns the client URLs, for clientv3.Config.Endpoints. They stay
// the same across Stop and Start.
func (e *Etcd) Endpoints() []string { return []string{e.clientURL} }

// PID returns the etcd process's ID, or 0 while it is not running: the
// benchmarks read its CPU time from /proc.
func (e *Etcd) PID() int { return e.p.pid() }

// Watchers returns how many watchers etcd serves, its own
// etcd_debugging_mvcc_watcher_total gauge read from /metrics (over TLS
// with the client certificate when the server uses TLS).
func (e *Etcd) Watchers(t testing.TB) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: e.TLSConfig()}}
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.clientURL+"/metrics", nil)
	if err != nil {
		t.Fatalf("etcd metrics: %v", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("etcd metrics: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		t.Fatalf("etcd metrics: %v", err)
	}
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "etcd_debugging_mvcc_watcher_total "); ok {
			var n float64
			if _, err := fmt.Sscan(v, &n); err != nil {
				t.Fatalf("etcd_debugging_mvcc_watcher_total %q: %v", v, err)
			}
			return int(n)
		}
	}
	t.Fatal("etcd's /metrics has no etcd_debugging_mvcc_watcher_total")
	return 0
}

// DataDir returns etcd's data directory.
func (e *Etcd) DataDir() string { return e.dataDir }

// LogFile returns the path of the file that receives etcd's output.
func (e *Etcd) LogFile() string { return e.p.logPath }

// TLSFiles returns the CA, client certificate and client key files; all
// empty without TLS.
func (e *Etcd) TLSFiles() TLSFiles { return e.tlsFiles }

// TLSConfig returns a client TLS configuration that trusts the server and
// presents the client certificate, or nil without TLS. Each call returns a
// new copy.
func (e *Etcd) TLSConfig() *tls.Config {
	if e.tlsConf == nil {
		return nil
	}
	return e.tlsConf.Clone()
}

// RootPassword returns EtcdRootUser's password, or "" without Auth.
func (e *Etcd) RootPassword() string { return e.rootPassword }

// ClientConfig returns a clientv3 configuration for this server with the
// given credentials (empty for none), TLS when the server uses it, and a
// no-op logger so the client does not write to the test's output.
func (e *Etcd) ClientConfig(user, password string) clientv3.Config {
	return clientv3.Config{
		Endpoints:   e.Endpoints(),
		DialTimeout: 5 * time.Second,
		TLS:         e.TLSConfig(),
		Username:    user,
		Password:    password,
		Logger:      zap.NewNop(),
	}
}

// Client returns a client with full access: authenticated as EtcdRootUser
// when auth is on. It is closed by a cleanup of t.
func (e *Etcd) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	if e.opts.Auth {
		return e.NewClient(t, EtcdRootUser, e.rootPassword)
	}
	return e.NewClient(t, "", "")
}

// NewClient returns a client that authenticates as user (none when user is
// empty). It is closed by a cleanup of t. With auth on, a wrong password
// fails t here, because clientv3 authenticates while connecting.
func (e *Etcd) NewClient(t testing.TB, user, password string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(e.ClientConfig(user, password))
	if err != nil {
		t.Fatalf("testenv: etcd client for user %q: %v", user, err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// AddUser creates an etcd user with no roles.
func (e *Etcd) AddUser(t testing.TB, user, password string) {
	t.Helper()
	e.admin(t, fmt.Sprintf("add user %q", user), func(ctx context.Context, c *clientv3.Client) error {
		_, err := c.UserAdd(ctx, user, password)
		return err
	})
}

// AddRole creates an etcd role with no permissions.
func (e *Etcd) AddRole(t testing.TB, role string) {
	t.Helper()
	e.admin(t, fmt.Sprintf("add role %q", role), func(ctx context.Context, c *clientv3.Client) error {
		_, err := c.RoleAdd(ctx, role)
		return err
	})
}

// GrantPrefix gives role read and write access to every key that starts
// with prefix.
func (e *Etcd) GrantPrefix(t testing.TB, role, prefix string) {
	t.Helper()
	e.admin(t, fmt.Sprintf("grant role %q readwrite on prefix %q", role, prefix), func(ctx context.Context, c *clientv3.Client) error {
		_, err := c.RoleGrantPermission(ctx, role, prefix, clientv3.GetPrefixRangeEnd(prefix), clientv3.PermissionType(clientv3.PermReadWrite))
		return err
	})
}

// GrantRole gives role to user.
func (e *Etcd) GrantRole(t testing.TB, user, role string) {
	t.Helper()
	e.admin(t, fmt.Sprintf("grant role %q to user %q", role, user), func(ctx context.Context, c *clientv3.Client) error {
		_, err := c.UserGrantRole(ctx, user, role)
		return err
	})
}

// AddPrefixUser creates user with password and a role named user+"-rw" that
// may read and write keys under prefix and nothing else.
func (e *Etcd) AddPrefixUser(t testing.TB, user, password, prefix string) {
	t.Helper()
	e.AddUser(t, user, password)
	e.AddRole(t, user+"-rw")
	e.GrantPrefix(t, user+"-rw", prefix)
	e.GrantRole(t, user, user+"-rw")
}

// AddNoAccessUser creates user with password and a role named user+"-none"
// that has no permissions: the user authenticates but every key operation is
// denied.
func (e *Etcd) AddNoAccessUser(t testing.TB, user, password string) {
	t.Helper()
	e.AddUser(t, user, password)
	e.AddRole(t, user+"-none")
	e.GrantRole(t, user, user+"-none")
}

// Compact compacts the key-value history up to rev (the current revision
// when rev <= 0), physically, and returns the revision it compacted to.
func (e *Etcd) Compact(t testing.TB, rev int64) int64 {
	t.Helper()
	e.admin(t, "compact", func(ctx context.Context, c *clientv3.Client) error {
		if rev <= 0 {
			resp, err := c.Get(ctx, "\x00", clientv3.WithCountOnly())
			if err != nil {
				return err
			}
			rev = resp.Header.Revision
		}
		_, err := c.Compact(ctx, rev, clientv3.WithCompactPhysical())
		return err
	})
	return rev
}

// admin runs op with a short-lived full-access client.
func (e *Etcd) admin(t testing.TB, what string, op func(context.Context, *clientv3.Client) error) {
	t.Helper()
	user, password := "", ""
	if e.opts.Auth {
		user, password = EtcdRootUser, e.rootPassword
	}
	cli, err := clientv3.New(e.ClientConfig(user, password))
	if err != nil {
		t.Fatalf("testenv: etcd %s: connect: %v", what, err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := op(ctx, cli); err != nil {
		t.Fatalf("testenv: etcd %s: %v", what, err)
	}
}

// Stop stops etcd gracefully (SIGTERM, then SIGKILL after 10s) and waits for
// it to exit. The data dir and ports are kept for Start.
func (e *Etcd) Stop() {
	e.t.Helper()
	if err := e.p.stop(stopGrace); err != nil {
		e.t.Fatalf("testenv: stop etcd: %v", err)
	}
}

// Start restarts a stopped or killed etcd on the same ports and data dir and
// waits until it is healthy.
func (e *Etcd) Start() {
	e.t.Helper()
	if err := e.startAndWait(); err != nil {
		e.t.Fatalf("testenv: restart etcd: %v\n--- etcd log %s ---\n%s", err, e.p.logPath, e.p.logTail())
	}
}

// Kill sends SIGKILL and waits for etcd to exit, like a crash. The data dir
// and ports are kept for Start. Safe from any goroutine.
func (e *Etcd) Kill() {
	if err := e.p.stop(0); err != nil {
		e.t.Errorf("testenv: kill etcd: %v", err)
	}
}

// Pause freezes etcd with SIGSTOP: connections stay open but nothing is
// answered, as with a hung server or a partition. Safe from any goroutine.
func (e *Etcd) Pause() {
	if err := e.p.setPaused(true); err != nil {
		e.t.Errorf("testenv: pause etcd: %v", err)
	}
}

// Resume continues a paused etcd with SIGCONT. Safe from any goroutine.
func (e *Etcd) Resume() {
	if err := e.p.setPaused(false); err != nil {
		e.t.Errorf("testenv: resume etcd: %v", err)
	}
}
