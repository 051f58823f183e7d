package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"io"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/talonhq/talon/internal/testsupport"
)

// issue writes a credential for id into dir and returns its files.
func issue(t *testing.T, ca *CA, dir string, id Identity) Files {
	t.Helper()
	is, err := ca.Issue(id, []string{"127.0.0.1", "localhost"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	f := Layout(dir, id)
	if err := is.WriteFiles(f.CertFile, f.KeyFile); err != nil {
		t.Fatal(err)
	}
	return f
}

func newCA(t *testing.T, dir string) *CA {
	t.Helper()
	ca, err := NewCA("test", time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.Write(dir); err != nil {
		t.Fatal(err)
	}
	return ca
}

func load(t *testing.T, f Files, clock func() time.Time) *Source {
	t.Helper()
	s, err := Load(f, Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// serve accepts TLS connections on loopback and answers each with the
// peer's identity; it returns the address.
func serve(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				tc := c.(*tls.Conn)
				_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
				if err := tc.Handshake(); err != nil {
					return
				}
				cs := tc.ConnectionState()
				id, err := PeerIdentity(&cs)
				if err != nil {
					io.WriteString(c, "error "+err.Error())
					return
				}
				io.WriteString(c, id.String())
			}()
		}
	}()
	return ln.Addr().String()
}

func dialID(addr string, cfg *tls.Config) (peer string, resumed bool, err error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return "", false, err
	}
	defer c.Close()
	b, err := io.ReadAll(c)
	if err != nil {
		return "", false, err
	}
	cs := c.ConnectionState()
	id, err := PeerIdentity(&cs)
	if err != nil {
		return "", false, err
	}
	return string(b) + " <- " + id.String(), cs.DidResume, nil
}

func TestIdentityOf(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, dir)
	for _, id := range []Identity{{Role: RoleWorker, NodeID: "w1"}, {Role: RoleCoordinator, NodeID: "c-1"}, {Role: RoleClient, NodeID: "ops"}, {Role: RoleWorker, NodeID: "w2", Cluster: "prod-eu"}} {
		f := issue(t, ca, dir, id)
		s := load(t, f, nil)
		got, err := s.Identity()
		if err != nil || got != id {
			t.Fatalf("identity of %s: %v %v", id, got, err)
		}
	}
	if _, err := ca.Issue(Identity{Role: "admin", NodeID: "x"}, nil, time.Hour); err == nil || !strings.Contains(err.Error(), `role "admin"`) {
		t.Fatalf("issue with an unknown role: %v", err)
	}
}

func TestMutualTLSChecksChainAndIdentity(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, dir)
	coord := load(t, issue(t, ca, dir, Identity{Role: RoleCoordinator, NodeID: "c1"}), nil)
	worker := load(t, issue(t, ca, dir, Identity{Role: RoleWorker, NodeID: "w1"}), nil)
	client := load(t, issue(t, ca, dir, Identity{Role: RoleClient, NodeID: "cli"}), nil)

	addr := serve(t, coord.ServerConfig(Expect{}))
	got, _, err := dialID(addr, worker.ClientConfig(Expect{Roles: []Role{RoleCoordinator}}))
	if err != nil || got != "worker/w1 <- coordinator/c1" {
		t.Fatalf("worker to coordinator: %q %v", got, err)
	}
	// The worker expects a coordinator; a worker listening is refused.
	waddr := serve(t, worker.ServerConfig(Expect{}))
	if _, _, err := dialID(waddr, client.ClientConfig(Expect{Roles: []Role{RoleCoordinator}})); err == nil || !strings.Contains(err.Error(), "want role [coordinator]") {
		t.Fatalf("client dialling a worker as a coordinator: %v", err)
	}
	// A specific node is expected.
	if _, _, err := dialID(waddr, client.ClientConfig(Expect{Roles: []Role{RoleWorker}, NodeID: "w2"})); err == nil || !strings.Contains(err.Error(), `want node "w2"`) {
		t.Fatalf("client expecting w2 reached w1: %v", err)
	}

	// A credential from another CA is refused by the server.
	odir := t.TempDir()
	other := load(t, issue(t, newCA(t, odir), odir, Identity{Role: RoleWorker, NodeID: "w1"}), nil)
	_, _, err = dialID(addr, other.ClientConfig(Expect{}))
	if err == nil {
		t.Fatal("a certificate from another CA was accepted")
	}
	// No client certificate at all is refused.
	plain := Harden(&tls.Config{InsecureSkipVerify: true})
	if _, _, err := dialID(addr, plain); err == nil {
		t.Fatal("a client without a certificate was accepted")
	}
}

func TestOldVersionsAndWeakSuitesRefused(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, dir)
	srv := load(t, issue(t, ca, dir, Identity{Role: RoleCoordinator, NodeID: "c1"}), nil)
	cli := load(t, issue(t, ca, dir, Identity{Role: RoleClient, NodeID: "cli"}), nil)
	addr := serve(t, srv.ServerConfig(Expect{}))

	old := cli.ClientConfig(Expect{})
	old.MinVersion, old.MaxVersion = tls.VersionTLS10, tls.VersionTLS11
	if _, _, err := dialID(addr, old); err == nil {
		t.Fatal("TLS 1.1 was accepted")
	}
	cbc := cli.ClientConfig(Expect{})
	cbc.MaxVersion = tls.VersionTLS12
	cbc.CipherSuites = []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA}
	if _, _, err := dialID(addr, cbc); err == nil {
		t.Fatal("a CBC-SHA1 suite was accepted")
	}
	ok := cli.ClientConfig(Expect{})
	ok.MaxVersion = tls.VersionTLS12
	if _, _, err := dialID(addr, ok); err != nil {
		t.Fatalf("TLS 1.2 with a modern suite: %v", err)
	}
}

func TestSessionsResume(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, dir)
	srv := load(t, issue(t, ca, dir, Identity{Role: RoleCoordinator, NodeID: "c1"}), nil)
	cli := load(t, issue(t, ca, dir, Identity{Role: RoleWorker, NodeID: "w1"}), nil)
	addr := serve(t, srv.ServerConfig(Expect{}))
	cfg := cli.ClientConfig(Expect{Roles: []Role{RoleCoordinator}})
	resumed := false
	for range 3 {
		_, r, err := dialID(addr, cfg)
		if err != nil {
			t.Fatal(err)
		}
		resumed = resumed || r
	}
	if !resumed {
		t.Fatal("no reconnection resumed its session")
	}
}

func TestReloadOnChange(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, dir)
	clock := testsupport.NewFakeClock(time.Now())
	id := Identity{Role: RoleCoordinator, NodeID: "c1"}
	f := issue(t, ca, dir, id)
	s := load(t, f, clock.Now)
	first := s.Certificate().Leaf

	// A new certificate replaces the files; nothing changes until a check
	// is due.
	issue(t, ca, dir, id)
	if !SameCertificate(s.Certificate().Leaf, first) {
		t.Fatal("reloaded before the check interval")
	}
	clock.Advance(2 * DefaultCheckInterval)
	if SameCertificate(s.Certificate().Leaf, first) || s.Reloads() != 1 {
		t.Fatalf("not reloaded after the files changed (reloads %d)", s.Reloads())
	}
	second := s.Certificate().Leaf

	// A half-written change (a key that does not match) keeps the old one.
	other, err := ca.Issue(id, nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.KeyFile, other.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * DefaultCheckInterval)
	if !SameCertificate(s.Certificate().Leaf, second) || s.ReloadFailures() != 1 {
		t.Fatalf("a mismatched key replaced the certificate (failures %d)", s.ReloadFailures())
	}
	// The matching certificate completes the change.
	if err := os.WriteFile(f.CertFile, other.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * DefaultCheckInterval)
	if SameCertificate(s.Certificate().Leaf, second) || s.Reloads() != 2 {
		t.Fatalf("the completed change was not loaded (reloads %d)", s.Reloads())
	}
}

func TestLoadErrorsNameTheSetting(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, dir)
	f := issue(t, ca, dir, Identity{Role: RoleWorker, NodeID: "w1"})
	cases := []struct {
		name  string
		files Files
		want  string
	}{
		{"missing key", Files{CertFile: f.CertFile}, `tls-cert-file "` + f.CertFile + `" and tls-key-file "": both are required`},
		{"missing cert file", Files{CertFile: filepath.Join(dir, "nope.crt"), KeyFile: f.KeyFile}, "nope.crt"},
		{"ca not pem", Files{CAFile: f.KeyFile, CertFile: f.CertFile, KeyFile: f.KeyFile}, "tls-ca-file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.files, Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want it to contain %q", err, tc.want)
			}
		})
	}
	// A certificate from another CA is refused at load.
	odir := t.TempDir()
	of := issue(t, newCA(t, odir), odir, Identity{Role: RoleWorker, NodeID: "w1"})
	_, err := Load(Files{CAFile: f.CAFile, CertFile: of.CertFile, KeyFile: of.KeyFile}, Options{})
	if err == nil || !strings.Contains(err.Error(), "is not valid under tls-ca-file") {
		t.Fatalf("foreign certificate: %v", err)
	}
	if !errors.Is(Expect{NodeID: "x"}.Check(Identity{Role: RoleWorker, NodeID: "y"}), ErrIdentity) {
		t.Fatal("Expect.Check does not wrap ErrIdentity")
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// signed returns a certificate the CA signed from tmpl (a forger's
// request that the CA's issuer accepted).
func signed(t *testing.T, ca *CA, tmpl *x509.Certificate) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = big.NewInt(time.Now().UnixNano())
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Minute), time.Now().Add(time.Hour)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestOneIdentityPerCertificate: a certificate names exactly one identity;
// several common names (the last used to win), units or Talon SPIFFE IDs,
// or a SPIFFE ID that disagrees with the subject, are refused.
func TestOneIdentityPerCertificate(t *testing.T) {
	ca := newCA(t, t.TempDir())
	cn := asn1.ObjectIdentifier{2, 5, 4, 3}
	uri := func(s string) *url.URL {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	for name, tc := range map[string]struct {
		tmpl *x509.Certificate
		want string
	}{
		"two common names": {&x509.Certificate{Subject: pkix.Name{OrganizationalUnit: []string{"worker"}, ExtraNames: []pkix.AttributeTypeAndValue{{Type: cn, Value: "w1"}, {Type: cn, Value: "w2"}}}}, "2 common names"},
		"two units":        {&x509.Certificate{Subject: pkix.Name{CommonName: "w1", OrganizationalUnit: []string{"worker", "ops"}}}, "2 organizational units"},
		"two SPIFFE IDs": {&x509.Certificate{Subject: pkix.Name{CommonName: "w1", OrganizationalUnit: []string{"worker"}},
			URIs: []*url.URL{uri("spiffe://talon/talon/a/worker/w1"), uri("spiffe://talon/talon/b/worker/w1")}}, "2 Talon SPIFFE IDs"},
		"SPIFFE ID of another node": {&x509.Certificate{Subject: pkix.Name{CommonName: "w1", OrganizationalUnit: []string{"worker"}},
			URIs: []*url.URL{uri("spiffe://talon/talon/a/worker/w2")}}, "does not name the subject's worker/w1"},
		"SPIFFE ID of another role": {&x509.Certificate{Subject: pkix.Name{CommonName: "w1", OrganizationalUnit: []string{"worker"}},
			URIs: []*url.URL{uri("spiffe://talon/talon/a/coordinator/w1")}}, "does not name the subject's"},
	} {
		t.Run(name, func(t *testing.T) {
			if id, err := IdentityOf(signed(t, ca, tc.tmpl)); err == nil || !errors.Is(err, ErrIdentity) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("IdentityOf = %v, %v; want an identity error containing %q", id, err, tc.want)
			}
		})
	}
}

// TestClusterBinding: a Source bound to a cluster refuses its own
// certificate of another cluster or of none, and refuses peers of another
// cluster or of none in the handshake, on both sides; a client whose
// certificate names a cluster talks to that cluster only.
func TestClusterBinding(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, dir)
	bound := func(id Identity, cluster string) (*Source, error) {
		return Load(issue(t, ca, dir, id), Options{ClusterID: cluster})
	}
	if _, err := bound(Identity{Role: RoleWorker, NodeID: "w1", Cluster: "a"}, "b"); err == nil || !strings.Contains(err.Error(), `bound to cluster "a", but this process serves cluster "b"`) {
		t.Fatalf("own certificate of another cluster: %v", err)
	}
	if _, err := bound(Identity{Role: RoleWorker, NodeID: "w1"}, "b"); err == nil || !strings.Contains(err.Error(), "names no cluster") || !strings.Contains(err.Error(), "--cluster-id b") {
		t.Fatalf("own certificate of no cluster: %v", err)
	}
	srv, err := bound(Identity{Role: RoleCoordinator, NodeID: "c1", Cluster: "a"}, "a")
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, srv.ServerConfig(Expect{}))
	dialAs := func(id Identity) error {
		cli := load(t, issue(t, ca, dir, id), nil)
		_, _, err := dialID(addr, cli.ClientConfig(Expect{Roles: []Role{RoleCoordinator}}))
		return err
	}
	if err := dialAs(Identity{Role: RoleWorker, NodeID: "w1", Cluster: "a"}); err != nil {
		t.Fatalf("a worker of the cluster: %v", err)
	}
	for _, id := range []Identity{{Role: RoleWorker, NodeID: "w2", Cluster: "b"}, {Role: RoleWorker, NodeID: "w3"}} {
		if err := dialAs(id); err == nil {
			t.Fatalf("a worker of cluster %q was served by a coordinator of cluster a", id.Cluster)
		}
	}
	// The other way round: a client of cluster b refuses cluster a's
	// coordinator itself.
	cliB := load(t, issue(t, ca, dir, Identity{Role: RoleClient, NodeID: "ops", Cluster: "b"}), nil)
	open := serve(t, load(t, issue(t, ca, dir, Identity{Role: RoleCoordinator, NodeID: "c2", Cluster: "a"}), nil).ServerConfig(Expect{}))
	if _, _, err := dialID(open, cliB.ClientConfig(Expect{Roles: []Role{RoleCoordinator}})); err == nil || !strings.Contains(err.Error(), `bound to cluster "a"; this process serves cluster "b"`) {
		t.Fatalf("client of cluster b dialling a coordinator of cluster a: %v", err)
	}
}

// TestDenyList: entries by serial, node and identity refuse the matching
// peers in the handshake and through Denied; a change of the file takes
// effect at the next check; a malformed file names the line.
func TestDenyList(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, dir)
	deny := filepath.Join(dir, "deny")
	if err := os.WriteFile(deny, []byte("# none yet\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	clock := testsupport.NewFakeClock(time.Now())
	srvFiles := issue(t, ca, dir, Identity{Role: RoleCoordinator, NodeID: "c1"})
	srvFiles.DenyFile = deny
	srv, err := Load(srvFiles, Options{Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, srv.ServerConfig(Expect{}))
	w1 := load(t, issue(t, ca, dir, Identity{Role: RoleWorker, NodeID: "w1"}), nil)
	w2 := load(t, issue(t, ca, dir, Identity{Role: RoleWorker, NodeID: "w2"}), nil)
	ops := load(t, issue(t, ca, dir, Identity{Role: RoleClient, NodeID: "ops"}), nil)
	served := func(s *Source) bool {
		_, _, err := dialID(addr, s.ClientConfig(Expect{Roles: []Role{RoleCoordinator}}))
		return err == nil
	}
	for _, s := range []*Source{w1, w2, ops} {
		if !served(s) {
			t.Fatal("a peer refused before any entry")
		}
	}
	serialW1 := w1.Certificate().Leaf.SerialNumber.Text(16)
	entries := "serial:" + serialW1 + "\nnode:w2 # any role\nclient/ops\n"
	if err := os.WriteFile(deny, []byte(entries), 0o600); err != nil {
		t.Fatal(err)
	}
	if !served(w1) {
		t.Fatal("the change took effect before the next check was due")
	}
	clock.Advance(2 * DefaultCheckInterval)
	for name, s := range map[string]*Source{"serial": w1, "node": w2, "identity": ops} {
		if served(s) {
			t.Errorf("a peer denied by %s was served", name)
		}
		if !srv.Denied(s.Certificate().Leaf) {
			t.Errorf("Denied(%s entry) = false", name)
		}
	}
	if n := srv.Denials(); n < 6 {
		t.Errorf("%d denials counted, want at least 6", n)
	}
	for content, want := range map[string]string{
		"serial:xyz\n":   "deny:1: serial \"xyz\": must be hexadecimal",
		"\nadmin/x\n":    "deny:2: \"admin/x\": want serial:<hex>, node:<node-id> or <role>/<node-id>",
		"node:a b\n":     "node",
		"worker/w1 ok\n": "deny:1",
	} {
		if err := os.WriteFile(deny, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(srvFiles, Options{}); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "tls-deny-file") {
			t.Errorf("deny file %q: %v, want an error containing %q", content, err, want)
		}
	}
}
