package pki

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
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
	for _, id := range []Identity{{RoleWorker, "w1"}, {RoleCoordinator, "c-1"}, {RoleClient, "ops"}} {
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
	coord := load(t, issue(t, ca, dir, Identity{RoleCoordinator, "c1"}), nil)
	worker := load(t, issue(t, ca, dir, Identity{RoleWorker, "w1"}), nil)
	client := load(t, issue(t, ca, dir, Identity{RoleClient, "cli"}), nil)

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
	other := load(t, issue(t, newCA(t, odir), odir, Identity{RoleWorker, "w1"}), nil)
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
	srv := load(t, issue(t, ca, dir, Identity{RoleCoordinator, "c1"}), nil)
	cli := load(t, issue(t, ca, dir, Identity{RoleClient, "cli"}), nil)
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
	srv := load(t, issue(t, ca, dir, Identity{RoleCoordinator, "c1"}), nil)
	cli := load(t, issue(t, ca, dir, Identity{RoleWorker, "w1"}), nil)
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
	id := Identity{RoleCoordinator, "c1"}
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
	f := issue(t, ca, dir, Identity{RoleWorker, "w1"})
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
	of := issue(t, newCA(t, odir), odir, Identity{RoleWorker, "w1"})
	_, err := Load(Files{CAFile: f.CAFile, CertFile: of.CertFile, KeyFile: of.KeyFile}, Options{})
	if err == nil || !strings.Contains(err.Error(), "is not valid under tls-ca-file") {
		t.Fatalf("foreign certificate: %v", err)
	}
	if !errors.Is(Expect{NodeID: "x"}.Check(Identity{RoleWorker, "y"}), ErrIdentity) {
		t.Fatal("Expect.Check does not wrap ErrIdentity")
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
