package testenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// DefaultEtcdClusterHost is the loopback address StartEtcdCluster binds
// when EtcdClusterOptions.Host is empty. It is not 127.0.0.1 so that a
// cluster of this package is easy to tell from other servers on a shared
// machine (ss -ltnp src 127.0.0.5).
const DefaultEtcdClusterHost = "127.0.0.5"

// Raft timing of every StartEtcdCluster member, in milliseconds. Loopback
// round trips are well under a millisecond, so a 50 ms heartbeat and a
// 500 ms election timeout (etcd's recommended ratio of 10) elect a leader
// within about a second of start and after a leader kill, instead of the
// 1 to 2 s of etcd's defaults (100/1000). Shorter would be faster still but
// start spurious elections when two cores are shared with other test
// binaries and a member misses heartbeats while descheduled.
const (
	etcdClusterHeartbeatMs = 50
	etcdClusterElectionMs  = 500
)

// memberProbeTimeout bounds one health or status probe of one member. A
// paused member never answers; the probe of the next must not wait for it.
const memberProbeTimeout = 2 * time.Second

// EtcdClusterOptions configures StartEtcdCluster. The zero value is a
// three-member cluster on DefaultEtcdClusterHost.
type EtcdClusterOptions struct {
	// Members is the number of members; zero means 3.
	Members int
	// Host is the loopback address every member binds; empty means
	// DefaultEtcdClusterHost.
	Host string
	// Fsync keeps etcd's fsyncs (see EtcdOptions.Fsync).
	Fsync bool
	// ExtraArgs are appended to every member's command line.
	ExtraArgs []string
}

// EtcdCluster is a multi-member etcd cluster on loopback with mutual TLS
// everywhere: clients must present a certificate signed by the cluster's CA
// (--client-cert-auth), and so must members to each other
// (--peer-client-cert-auth). It is started by StartEtcdCluster and killed by
// a cleanup of the test that started it.
//
// Members are numbered from 0. Kill, Pause and Resume only send signals and
// may be called from any goroutine; the methods that take a testing.TB, and
// Restart, must run on the test's goroutine (see the package comment).
type EtcdCluster struct {
	t        testing.TB
	opts     EtcdClusterOptions
	dir      string
	token    string
	tlsFiles TLSFiles
	tlsConf  *tls.Config
	members  []*etcdMember // fixed after StartEtcdCluster returns
}

// etcdMember is one member. Its URLs are fixed after the first successful
// start; id is learnt from the first Status answer and guarded by mu.
type etcdMember struct {
	name      string
	dataDir   string
	clientURL string
	peerURL   string
	p         *proc

	mu sync.Mutex
	id uint64 // guarded by mu; 0 until known
}

// StartEtcdCluster starts opts.Members etcd members that form one cluster,
// waits until every member reports healthy (which needs an elected leader),
// and registers a cleanup that kills them all.
func StartEtcdCluster(t testing.TB, opts EtcdClusterOptions) *EtcdCluster {
	t.Helper()
	bin := EtcdBinary(t)
	if opts.Members == 0 {
		opts.Members = 3
	}
	if opts.Members < 1 {
		t.Fatalf("testenv: EtcdClusterOptions.Members %d: must be at least 1", opts.Members)
	}
	if opts.Host == "" {
		opts.Host = DefaultEtcdClusterHost
	}
	ip := net.ParseIP(opts.Host)
	if ip == nil || !ip.IsLoopback() {
		t.Fatalf("testenv: EtcdClusterOptions.Host %q: must be a loopback IP address", opts.Host)
	}
	dir := t.TempDir()
	c := &EtcdCluster{t: t, opts: opts, dir: dir, token: "talon-cluster-" + randomToken()[:12]}
	if err := c.writeCerts(ip); err != nil {
		t.Fatalf("testenv: etcd cluster certificates: %v", err)
	}
	for i := range opts.Members {
		name := fmt.Sprintf("m%d", i)
		c.members = append(c.members, &etcdMember{
			name:    name,
			dataDir: filepath.Join(dir, name),
			p: &proc{
				name:    "etcd " + name,
				bin:     bin,
				logPath: filepath.Join(dir, name+".log"),
				env:     childEnv(),
			},
		})
	}
	t.Cleanup(c.cleanup)

	for attempt := 1; ; attempt++ {
		err := c.startAll()
		if err == nil {
			return c
		}
		var tails strings.Builder
		retry := false
		for _, m := range c.members {
			tail := m.p.logTail()
			retry = retry || strings.Contains(tail, "address already in use")
			fmt.Fprintf(&tails, "--- etcd log %s ---\n%s\n", m.p.logPath, tail)
			if stopErr := m.p.stop(0); stopErr != nil {
				t.Errorf("testenv: %v", stopErr)
			}
		}
		if attempt < startAttempts && retry {
			// A port was taken between freePortsOn and a bind; the data
			// dirs remember the old peer URLs, so start over.
			for _, m := range c.members {
				if err := os.RemoveAll(m.dataDir); err != nil {
					t.Fatalf("testenv: etcd cluster: remove data dir for retry: %v", err)
				}
			}
			continue
		}
		t.Fatalf("testenv: etcd cluster did not become healthy: %v\n%s", err, tails.String())
	}
}

// writeCerts writes one CA, a serving certificate per cluster (valid for
// ip, used by every member as server and as peer client) and the client
// certificate that TLSFiles names.
func (c *EtcdCluster) writeCerts(ip net.IP) error {
	certDir := filepath.Join(c.dir, "tls")
	if err := os.Mkdir(certDir, 0o700); err != nil {
		return err
	}
	ca, err := newCA("talon-testenv-etcd-cluster-ca")
	if err != nil {
		return err
	}
	caFile := filepath.Join(certDir, "ca.crt")
	if err := os.WriteFile(caFile, ca.certPEM, 0o600); err != nil {
		return err
	}
	if _, _, err := ca.writeIssued(certDir, "member", "talon-testenv-etcd-member", ip); err != nil {
		return err
	}
	certFile, keyFile, err := ca.writeIssued(certDir, "client", "talon-testenv-client", ip)
	if err != nil {
		return err
	}
	c.tlsFiles = TLSFiles{CAFile: caFile, CertFile: certFile, KeyFile: keyFile}
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return err
	}
	c.tlsConf = &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	return nil
}

// startAll picks ports, starts every member at once (a member of a new
// cluster waits for its peers) and waits until all are healthy.
func (c *EtcdCluster) startAll() error {
	ports, err := freePortsOn(c.opts.Host, 2*len(c.members))
	if err != nil {
		return err
	}
	var initial []string
	for i, m := range c.members {
		m.clientURL = fmt.Sprintf("https://%s:%d", c.opts.Host, ports[2*i])
		m.peerURL = fmt.Sprintf("https://%s:%d", c.opts.Host, ports[2*i+1])
		initial = append(initial, m.name+"="+m.peerURL)
	}
	for _, m := range c.members {
		m.p.mu.Lock()
		m.p.args = c.args(m, strings.Join(initial, ","))
		m.p.mu.Unlock()
		if err := m.p.start(); err != nil {
			return err
		}
	}
	for i := range c.members {
		if err := c.waitMemberHealthy(i, etcdStartTimeout); err != nil {
			return fmt.Errorf("member %d: %w", i, err)
		}
	}
	return nil
}

func (c *EtcdCluster) args(m *etcdMember, initialCluster string) []string {
	tlsDir := filepath.Join(c.dir, "tls")
	cert, key := filepath.Join(tlsDir, "member.crt"), filepath.Join(tlsDir, "member.key")
	a := []string{
		"--name=" + m.name,
		"--data-dir=" + m.dataDir,
		"--listen-client-urls=" + m.clientURL,
		"--advertise-client-urls=" + m.clientURL,
		"--listen-peer-urls=" + m.peerURL,
		"--initial-advertise-peer-urls=" + m.peerURL,
		"--initial-cluster=" + initialCluster,
		"--initial-cluster-state=new", // ignored once the data dir exists, so restarts rejoin
		"--initial-cluster-token=" + c.token,
		fmt.Sprintf("--heartbeat-interval=%d", etcdClusterHeartbeatMs),
		fmt.Sprintf("--election-timeout=%d", etcdClusterElectionMs),
		"--auto-compaction-retention=0",
		"--cert-file=" + cert,
		"--key-file=" + key,
		"--client-cert-auth",
		"--trusted-ca-file=" + c.tlsFiles.CAFile,
		"--peer-cert-file=" + cert,
		"--peer-key-file=" + key,
		"--peer-client-cert-auth",
		"--peer-trusted-ca-file=" + c.tlsFiles.CAFile,
		"--logger=zap",
		"--log-outputs=stderr",
		"--log-level=info",
	}
	if !c.opts.Fsync {
		a = append(a, "--unsafe-no-fsync")
	}
	return append(a, c.opts.ExtraArgs...)
}

// waitMemberHealthy polls member i's /health until it answers healthy (it
// is serving and has a leader), the process exits, or timeout passes.
func (c *EtcdCluster) waitMemberHealthy(i int, timeout time.Duration) error {
	m := c.members[i]
	tr := &http.Transport{TLSClientConfig: c.TLSConfig(), DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: memberProbeTimeout}
	done := m.p.exited()
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-done:
			return fmt.Errorf("etcd %s exited (%s)", m.name, m.p.exitStatus())
		default:
		}
		last := checkEtcdHealth(hc, m.clientURL+"/health")
		if last == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("etcd %s not healthy after %v: %w", m.name, timeout, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *EtcdCluster) cleanup() {
	for _, m := range c.members {
		if err := m.p.stop(0); err != nil {
			c.t.Errorf("testenv: kill etcd %s: %v", m.name, err)
		}
	}
	if c.t.Failed() {
		// A quarter of the single-server tail per member: a failing test
		// against three members is usually about the test, not etcd.
		for _, m := range c.members {
			tail := m.p.logTail()
			if len(tail) > logTailBytes/4 {
				tail = "...\n" + tail[len(tail)-logTailBytes/4:]
			}
			c.t.Logf("--- etcd %s log %s (tail) ---\n%s", m.name, m.p.logPath, tail)
		}
	}
}

// Members returns the number of members.
func (c *EtcdCluster) Members() int { return len(c.members) }

// Endpoints returns every member's client URL, in member order, for
// clientv3.Config.Endpoints or a comma-joined --etcd-endpoints. They stay
// the same across Kill and Restart.
func (c *EtcdCluster) Endpoints() []string {
	eps := make([]string, len(c.members))
	for i, m := range c.members {
		eps[i] = m.clientURL
	}
	return eps
}

// Endpoint returns member i's client URL.
func (c *EtcdCluster) Endpoint(i int) string { return c.members[i].clientURL }

// LogFile returns the path of member i's log.
func (c *EtcdCluster) LogFile(i int) string { return c.members[i].p.logPath }

// TLSFiles returns the CA and a client certificate and key that every
// member accepts, as Etcd.TLSFiles does for a single member.
func (c *EtcdCluster) TLSFiles() TLSFiles { return c.tlsFiles }

// TLSConfig returns a new client TLS configuration that trusts the members
// and presents the client certificate.
func (c *EtcdCluster) TLSConfig() *tls.Config { return c.tlsConf.Clone() }

// ClientConfig returns a clientv3 configuration for all members with TLS
// and a no-op logger.
func (c *EtcdCluster) ClientConfig() clientv3.Config {
	return clientv3.Config{
		Endpoints:   c.Endpoints(),
		DialTimeout: 5 * time.Second,
		TLS:         c.TLSConfig(),
		Logger:      zap.NewNop(),
	}
}

// Client returns a client of all members, closed by a cleanup of t.
func (c *EtcdCluster) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(c.ClientConfig())
	if err != nil {
		t.Fatalf("testenv: etcd cluster client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// status asks member i for its maintenance status, over a connection to
// that member alone, and remembers its member ID.
func (c *EtcdCluster) status(cli *clientv3.Client, i int) (*clientv3.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), memberProbeTimeout)
	defer cancel()
	resp, err := cli.Status(ctx, c.members[i].clientURL)
	if err != nil {
		return nil, err
	}
	m := c.members[i]
	m.mu.Lock()
	m.id = resp.Header.MemberId
	m.mu.Unlock()
	return resp, nil
}

// indexOf returns the index of the member with ID id, or -1 when no member
// has answered a status with that ID.
func (c *EtcdCluster) indexOf(id uint64) int {
	for i, m := range c.members {
		m.mu.Lock()
		mid := m.id
		m.mu.Unlock()
		if id != 0 && mid == id {
			return i
		}
	}
	return -1
}

// leaderNow asks every running, unpaused member except skip for its
// status and returns the index of the leader when at least a quorum of
// members answered and all of them name the same one; otherwise -1. It
// learns every answering member's ID on the way.
func (c *EtcdCluster) leaderNow(cli *clientv3.Client, skip int) int {
	var leader uint64
	answers := 0
	for i, m := range c.members {
		if i == skip || m.p.pid() == 0 || m.p.isPaused() {
			continue
		}
		resp, err := c.status(cli, i)
		if err != nil || resp.Leader == 0 || (leader != 0 && resp.Leader != leader) {
			return -1
		}
		leader = resp.Leader
		answers++
	}
	if answers < len(c.members)/2+1 {
		return -1
	}
	if i := c.indexOf(leader); i >= 0 && i != skip {
		return i
	}
	return -1
}

// statusClient returns a client used only for Status calls; Status dials
// the member it names, so the client's own endpoints do not matter.
func (c *EtcdCluster) statusClient(t testing.TB) *clientv3.Client {
	t.Helper()
	cfg := c.ClientConfig()
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatalf("testenv: etcd cluster status client: %v", err)
	}
	return cli
}

// Leader returns the index of the current leader, as a majority of the
// running members report it through the maintenance Status API, waiting
// up to etcdStartTimeout for one to be elected.
func (c *EtcdCluster) Leader(t testing.TB) int {
	t.Helper()
	cli := c.statusClient(t)
	defer cli.Close()
	deadline := time.Now().Add(etcdStartTimeout)
	for {
		if i := c.leaderNow(cli, -1); i >= 0 {
			return i
		}
		if time.Now().After(deadline) {
			t.Fatalf("testenv: etcd cluster: no leader after %v", etcdStartTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill sends SIGKILL to member i and waits for it to exit, like a crash.
// Its data dir and ports are kept for Restart. Safe from any goroutine.
func (c *EtcdCluster) Kill(i int) {
	if err := c.members[i].p.stop(0); err != nil {
		c.t.Errorf("testenv: kill etcd %s: %v", c.members[i].name, err)
	}
}

// Restart starts a killed member again on its ports and data dir and
// waits until it is healthy. Use Start and WaitHealthy instead when the
// member cannot become healthy alone (quorum is still lost).
func (c *EtcdCluster) Restart(i int) {
	c.t.Helper()
	c.Start(i)
	if err := c.waitMemberHealthy(i, etcdStartTimeout); err != nil {
		c.t.Fatalf("testenv: restart etcd %s: %v\n--- log ---\n%s", c.members[i].name, err, c.members[i].p.logTail())
	}
}

// Start starts a killed member again without waiting for it.
func (c *EtcdCluster) Start(i int) {
	c.t.Helper()
	if err := c.members[i].p.start(); err != nil {
		c.t.Fatalf("testenv: start etcd %s: %v", c.members[i].name, err)
	}
}

// Pause freezes member i with SIGSTOP. Safe from any goroutine.
func (c *EtcdCluster) Pause(i int) {
	if err := c.members[i].p.setPaused(true); err != nil {
		c.t.Errorf("testenv: pause etcd %s: %v", c.members[i].name, err)
	}
}

// Resume continues a paused member with SIGCONT. Safe from any goroutine.
func (c *EtcdCluster) Resume(i int) {
	if err := c.members[i].p.setPaused(false); err != nil {
		c.t.Errorf("testenv: resume etcd %s: %v", c.members[i].name, err)
	}
}

// WaitHealthy waits up to timeout until every member is running, answers
// healthy and a majority agrees on a leader.
func (c *EtcdCluster) WaitHealthy(t testing.TB, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for i := range c.members {
		if err := c.waitMemberHealthy(i, time.Until(deadline)); err != nil {
			t.Fatalf("testenv: etcd cluster not healthy: %v\n--- log ---\n%s", err, c.members[i].p.logTail())
		}
	}
	cli := c.statusClient(t)
	defer cli.Close()
	for c.leaderNow(cli, -1) < 0 {
		if time.Now().After(deadline) {
			t.Fatalf("testenv: etcd cluster: no agreed leader after %v", timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// LeaderChange is what KillLeader observed.
type LeaderChange struct {
	// Old is the killed leader, New the member elected after it.
	Old, New int
	// Election is the time from the kill until a surviving member first
	// named the new leader.
	Election time.Duration
}

// KillLeader kills the current leader with SIGKILL and waits until the
// survivors have elected another. The old leader stays down; Restart it
// when the test is done with a two-member cluster.
func (c *EtcdCluster) KillLeader(t testing.TB) LeaderChange {
	t.Helper()
	old := c.Leader(t)
	cli := c.statusClient(t)
	defer cli.Close()
	killed := time.Now()
	c.Kill(old)
	deadline := killed.Add(etcdStartTimeout)
	for {
		// A survivor keeps naming the dead leader until its election
		// timeout passes; leaderNow ignores the dead member's ID.
		if i := c.leaderNow(cli, old); i >= 0 {
			return LeaderChange{Old: old, New: i, Election: time.Since(killed)}
		}
		if time.Now().After(deadline) {
			t.Fatalf("testenv: etcd cluster: no new leader %v after killing %s", etcdStartTimeout, c.members[old].name)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// FaultMode is how TakeDown takes members out.
type FaultMode int

const (
	// FaultPause freezes members with SIGSTOP: their connections stay open
	// and nothing is answered, as with a hung host or a partition.
	FaultPause FaultMode = iota
	// FaultKill kills members with SIGKILL and restarts them afterwards:
	// connections are refused.
	FaultKill
)

// Outage is what TakeDown did.
type Outage struct {
	// Members are the indexes taken down.
	Members []int
	// Down is how long they were down (from the first signal to the last
	// resume or restart).
	Down time.Duration
	// Recovery is the time from bringing them back until every member was
	// healthy with an agreed leader.
	Recovery time.Duration
}

// LoseQuorum takes down the current leader and as many other members as it
// takes to lose quorum (two of three) for d, then brings them back and
// waits until the whole cluster is healthy again.
func (c *EtcdCluster) LoseQuorum(t testing.TB, d time.Duration, mode FaultMode) Outage {
	t.Helper()
	leader := c.Leader(t)
	down := []int{leader}
	for i := range c.members {
		if len(down) >= len(c.members)/2+1 {
			break
		}
		if i != leader {
			down = append(down, i)
		}
	}
	return c.TakeDown(t, down, d, mode)
}

// StopAll takes every member down for d (a whole-store outage), then
// brings them back and waits for a healthy cluster.
func (c *EtcdCluster) StopAll(t testing.TB, d time.Duration, mode FaultMode) Outage {
	t.Helper()
	all := make([]int, len(c.members))
	for i := range all {
		all[i] = i
	}
	return c.TakeDown(t, all, d, mode)
}

// TakeDown pauses or kills the given members, waits d, resumes or restarts
// them, and waits (up to etcdStartTimeout) until every member is healthy
// with an agreed leader.
func (c *EtcdCluster) TakeDown(t testing.TB, members []int, d time.Duration, mode FaultMode) Outage {
	t.Helper()
	if len(members) == 0 {
		t.Fatal("testenv: TakeDown: no members")
	}
	began := time.Now()
	for _, i := range members {
		switch mode {
		case FaultPause:
			c.Pause(i)
		case FaultKill:
			c.Kill(i)
		default:
			t.Fatalf("testenv: TakeDown: unknown mode %d", mode)
		}
	}
	time.Sleep(time.Until(began.Add(d)))
	for _, i := range members {
		if mode == FaultPause {
			c.Resume(i)
		} else {
			c.Start(i)
		}
	}
	back := time.Now()
	c.WaitHealthy(t, etcdStartTimeout)
	return Outage{Members: members, Down: back.Sub(began), Recovery: time.Since(back)}
}
