package testenv

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// Users in the token file of every StartKubeAPIServer server.
const (
	// KubeAdminUser is in group system:masters: allowed everything.
	KubeAdminUser = "talon-admin"
	// KubeRestrictedUser has no groups beyond system:authenticated and no
	// RBAC bindings: authenticated, but forbidden from every resource.
	KubeRestrictedUser = "talon-restricted"
	// KubeServiceAccountIssuer is the --service-account-issuer.
	KubeServiceAccountIssuer = "https://talon.test"
)

// kubeStartTimeout bounds start-up. A kube-apiserver is ready in about two
// seconds on an idle machine; two cores shared with other test binaries can
// make that much longer.
const kubeStartTimeout = 120 * time.Second

// KubeOptions configures StartKubeAPIServer. The zero value starts a new
// plain etcd for the server.
type KubeOptions struct {
	// Etcd is the etcd to store in; nil starts a new one with
	// EtcdOptions{}. kube-apiserver cannot log in to etcd with a password, so
	// an etcd started with Auth is refused. Each server uses its own etcd key
	// prefix, so several may share one etcd.
	Etcd *Etcd
	// Users adds token-file users beside KubeAdminUser and
	// KubeRestrictedUser. Each needs a Name and a Token.
	Users []KubeUser
	// NoWatchCache starts the server with --watch-cache=false: lists and
	// watches read etcd directly. The zero value keeps the watch cache on,
	// the API server's (and production's) default.
	NoWatchCache bool
	// ExtraArgs are appended to kube-apiserver's command line; a flag given
	// here overrides the same flag set by default.
	ExtraArgs []string
}

// KubeUser is a line of the static token file.
type KubeUser struct {
	Name   string
	Token  string
	Groups []string
}

// KubeAPIServer is a kube-apiserver on loopback backed by a real etcd,
// started by StartKubeAPIServer and killed by a cleanup of the test that
// started it. It authenticates bearer tokens from a static token file and
// authorizes with RBAC. See the package comment for which methods may be
// called from other goroutines.
type KubeAPIServer struct {
	t               testing.TB
	etcd            *Etcd
	etcdPrefix      string
	dir             string
	host            string // https://127.0.0.1:<port>; fixed after the first start
	caPEM           []byte
	caFile          string
	adminToken      string
	restrictedToken string
	p               *proc
}

// StartKubeAPIServer starts a kube-apiserver for the test, waits until
// /readyz answers ok, and registers a cleanup that kills it (and the etcd it
// started, if it started one).
func StartKubeAPIServer(t testing.TB, opts KubeOptions) *KubeAPIServer {
	t.Helper()
	bin := KubeAPIServerBinary(t)
	etcd := opts.Etcd
	if etcd == nil {
		etcd = StartEtcd(t, EtcdOptions{})
	} else if etcd.opts.Auth {
		t.Fatalf("testenv: KubeOptions.Etcd: kube-apiserver cannot use an etcd started with Auth (it has no etcd password support)")
	}
	dir := t.TempDir() // removed after the kill cleanup below
	k := &KubeAPIServer{
		t:               t,
		etcd:            etcd,
		etcdPrefix:      "/talon-kube-" + randomToken()[:12],
		dir:             dir,
		adminToken:      randomToken(),
		restrictedToken: randomToken(),
		p: &proc{
			name:    "kube-apiserver",
			bin:     bin,
			logPath: filepath.Join(dir, "kube-apiserver.log"),
			env:     childEnv(),
		},
	}
	if err := k.writeFiles(opts.Users); err != nil {
		t.Fatalf("testenv: kube-apiserver files: %v", err)
	}
	t.Cleanup(k.cleanup)

	for attempt := 1; ; attempt++ {
		ports, err := freePorts(1)
		if err != nil {
			t.Fatalf("testenv: kube-apiserver: %v", err)
		}
		k.host = fmt.Sprintf("https://127.0.0.1:%d", ports[0])
		k.p.mu.Lock()
		args := k.args(ports[0])
		if opts.NoWatchCache {
			args = append(args, "--watch-cache=false")
		}
		k.p.args = append(args, opts.ExtraArgs...)
		k.p.mu.Unlock()
		err = k.startAndWait()
		if err == nil {
			return k
		}
		logTail := k.p.logTail()
		if stopErr := k.p.stop(0); stopErr != nil {
			t.Errorf("testenv: %v", stopErr)
		}
		if attempt < startAttempts && strings.Contains(logTail, "address already in use") {
			continue
		}
		t.Fatalf("testenv: kube-apiserver did not become ready: %v\n--- kube-apiserver log %s ---\n%s", err, k.p.logPath, logTail)
	}
}

// writeFiles writes the serving certificate and its CA, the service-account
// key and the token file.
func (k *KubeAPIServer) writeFiles(users []KubeUser) error {
	if err := os.Mkdir(filepath.Join(k.dir, "certs"), 0o700); err != nil {
		return err
	}
	ca, err := newCA("talon-testenv-kube-ca")
	if err != nil {
		return err
	}
	k.caPEM = ca.certPEM
	k.caFile = filepath.Join(k.dir, "ca.crt")
	if err := os.WriteFile(k.caFile, ca.certPEM, 0o600); err != nil {
		return err
	}
	if _, _, err := ca.writeIssued(k.dir, "serving", "talon-testenv-kube-apiserver"); err != nil {
		return err
	}
	if err := writeRSAKey(filepath.Join(k.dir, "sa.key")); err != nil {
		return err
	}

	var b strings.Builder
	// token,user,uid,"group1,group2"
	fmt.Fprintf(&b, "%s,%s,%s,\"system:masters\"\n", k.adminToken, KubeAdminUser, KubeAdminUser)
	fmt.Fprintf(&b, "%s,%s,%s\n", k.restrictedToken, KubeRestrictedUser, KubeRestrictedUser)
	for i, u := range users {
		if u.Name == "" || u.Token == "" {
			return fmt.Errorf("KubeOptions.Users[%d]: name %q and token must both be set", i, u.Name)
		}
		if strings.ContainsAny(u.Name+u.Token+strings.Join(u.Groups, ""), ",\"\n") {
			return fmt.Errorf("KubeOptions.Users[%d] %q: name, token and groups must not contain commas, quotes or newlines", i, u.Name)
		}
		fmt.Fprintf(&b, "%s,%s,%s", u.Token, u.Name, u.Name)
		if len(u.Groups) > 0 {
			fmt.Fprintf(&b, ",\"%s\"", strings.Join(u.Groups, ","))
		}
		b.WriteString("\n")
	}
	return os.WriteFile(filepath.Join(k.dir, "tokens.csv"), []byte(b.String()), 0o600)
}

func (k *KubeAPIServer) args(port int) []string {
	a := []string{
		"--etcd-servers=" + strings.Join(k.etcd.Endpoints(), ","),
		"--etcd-prefix=" + k.etcdPrefix,
		// Compaction of a shared etcd is the tests' business, not the
		// apiserver's.
		"--etcd-compaction-interval=0",
		fmt.Sprintf("--secure-port=%d", port),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--cert-dir=" + filepath.Join(k.dir, "certs"),
		"--tls-cert-file=" + filepath.Join(k.dir, "serving.crt"),
		"--tls-private-key-file=" + filepath.Join(k.dir, "serving.key"),
		"--service-account-key-file=" + filepath.Join(k.dir, "sa.key"),
		"--service-account-signing-key-file=" + filepath.Join(k.dir, "sa.key"),
		"--service-account-issuer=" + KubeServiceAccountIssuer,
		"--token-auth-file=" + filepath.Join(k.dir, "tokens.csv"),
		"--authorization-mode=RBAC",
		"--disable-admission-plugins=ServiceAccount",
		"--service-cluster-ip-range=10.0.0.0/24",
		"--allow-privileged=true",
		// Less start-up work: no flow-control bootstrap objects, no
		// endpoint reconciler for the kubernetes service, no profiling.
		"--enable-priority-and-fairness=false",
		"--endpoint-reconciler-type=none",
		"--profiling=false",
	}
	if files := k.etcd.TLSFiles(); files.CAFile != "" {
		a = append(a,
			"--etcd-cafile="+files.CAFile,
			"--etcd-certfile="+files.CertFile,
			"--etcd-keyfile="+files.KeyFile,
		)
	}
	return a
}

// startAndWait starts the process and polls /readyz as the admin until it
// answers 200, the process exits, or kubeStartTimeout passes.
func (k *KubeAPIServer) startAndWait() error {
	if err := k.p.start(); err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(k.caPEM)
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		DisableKeepAlives: true,
	}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	done := k.p.exited()
	deadline := time.Now().Add(kubeStartTimeout)
	for {
		select {
		case <-done:
			return fmt.Errorf("kube-apiserver exited during start-up (%s)", k.p.exitStatus())
		default:
		}
		last := k.checkReady(hc)
		if last == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %v: %w", kubeStartTimeout, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (k *KubeAPIServer) checkReady(hc *http.Client) error {
	req, err := http.NewRequest(http.MethodGet, k.host+"/readyz", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+k.adminToken)
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8192))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /readyz: %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

func (k *KubeAPIServer) cleanup() {
	if err := k.p.stop(0); err != nil {
		k.t.Errorf("testenv: kill kube-apiserver: %v", err)
	}
	if k.t.Failed() {
		k.t.Logf("--- kube-apiserver log %s (tail) ---\n%s", k.p.logPath, k.p.logTail())
	}
}

// Host returns the server's base URL, https://127.0.0.1:<port>. It stays the
// same across Stop and Start.
func (k *KubeAPIServer) Host() string { return k.host }

// PID returns the kube-apiserver process's ID, or 0 while it is not
// running: the benchmarks read its CPU time from /proc.
func (k *KubeAPIServer) PID() int { return k.p.pid() }

// CAData returns the PEM CA certificate that signed the serving certificate.
func (k *KubeAPIServer) CAData() []byte { return append([]byte(nil), k.caPEM...) }

// CAFile returns the path of a file holding CAData.
func (k *KubeAPIServer) CAFile() string { return k.caFile }

// AdminToken returns the bearer token of KubeAdminUser (system:masters).
func (k *KubeAPIServer) AdminToken() string { return k.adminToken }

// RestrictedToken returns the bearer token of KubeRestrictedUser, which is
// authenticated but has no RBAC permissions.
func (k *KubeAPIServer) RestrictedToken() string { return k.restrictedToken }

// Etcd returns the etcd the server stores in.
func (k *KubeAPIServer) Etcd() *Etcd { return k.etcd }

// EtcdPrefix returns the server's --etcd-prefix.
func (k *KubeAPIServer) EtcdPrefix() string { return k.etcdPrefix }

// LogFile returns the path of the file that receives the server's output.
func (k *KubeAPIServer) LogFile() string { return k.p.logPath }

// RestConfig returns a client-go configuration that reaches the server with
// the given bearer token (any string; one not in the token file gets 401)
// and verifies the serving certificate. Client-side rate limiting is raised
// far above client-go's default of 5 requests/s so it does not slow tests.
func (k *KubeAPIServer) RestConfig(token string) *rest.Config {
	return &rest.Config{
		Host:            k.host,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: k.CAData()},
		QPS:             1000,
		Burst:           2000,
	}
}

// WriteKubeconfig writes a kubeconfig for the server and token into a
// temporary directory of t and returns its path. Its single context,
// "talon-test", is the current one.
func (k *KubeAPIServer) WriteKubeconfig(t testing.TB, token string) string {
	t.Helper()
	const kubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: talon-test
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: talon-test
  user:
    token: %q
contexts:
- name: talon-test
  context:
    cluster: talon-test
    user: talon-test
current-context: talon-test
`
	path := filepath.Join(t.TempDir(), "kubeconfig")
	content := fmt.Sprintf(kubeconfig, k.host, base64.StdEncoding.EncodeToString(k.caPEM), token)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatalf("testenv: write kubeconfig: %v", err)
	}
	return path
}

// Stop stops the server gracefully (SIGTERM, then SIGKILL after 10s) and
// waits for it to exit. Its etcd keeps running; Start brings the server
// back on the same port.
func (k *KubeAPIServer) Stop() {
	k.t.Helper()
	if err := k.p.stop(stopGrace); err != nil {
		k.t.Fatalf("testenv: stop kube-apiserver: %v", err)
	}
}

// Start restarts a stopped or killed server on the same port, etcd and
// prefix, and waits until it is ready.
func (k *KubeAPIServer) Start() {
	k.t.Helper()
	if err := k.startAndWait(); err != nil {
		k.t.Fatalf("testenv: restart kube-apiserver: %v\n--- kube-apiserver log %s ---\n%s", err, k.p.logPath, k.p.logTail())
	}
}

// Kill sends SIGKILL and waits for the server to exit. Safe from any
// goroutine.
func (k *KubeAPIServer) Kill() {
	if err := k.p.stop(0); err != nil {
		k.t.Errorf("testenv: kill kube-apiserver: %v", err)
	}
}

// Pause freezes the server with SIGSTOP: its connections stay open and
// nothing is answered, as with a hung host; its etcd keeps running. Safe
// from any goroutine.
func (k *KubeAPIServer) Pause() {
	if err := k.p.setPaused(true); err != nil {
		k.t.Errorf("testenv: pause kube-apiserver: %v", err)
	}
}

// Resume continues a paused server with SIGCONT. Safe from any goroutine.
func (k *KubeAPIServer) Resume() {
	if err := k.p.setPaused(false); err != nil {
		k.t.Errorf("testenv: resume kube-apiserver: %v", err)
	}
}
