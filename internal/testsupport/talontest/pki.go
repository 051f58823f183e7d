package talontest

import (
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/pki"
	"github.com/talonhq/talon/internal/protocol"
)

// PKI is a CA in a temporary directory that issues credentials, bound
// to cluster "it" (the tests' --cluster-id) unless cluster says otherwise.
type PKI struct {
	Dir     string
	CA      *pki.CA
	Cluster string
}

// NewPKI creates a CA for cluster "it" in a temporary directory.
func NewPKI(t *testing.T) *PKI {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.NewCA("integration", time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.Write(dir); err != nil {
		t.Fatal(err)
	}
	return &PKI{Dir: dir, CA: ca, Cluster: "it"}
}

// Files issues (again) the credential of role/node and returns its files.
func (p *PKI) Files(t *testing.T, role pki.Role, node string) pki.Files {
	t.Helper()
	id := pki.Identity{Role: role, NodeID: node, Cluster: p.Cluster}
	is, err := p.CA.Issue(id, []string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	f := pki.Layout(p.Dir, id)
	if err := is.WriteFiles(f.CertFile, f.KeyFile); err != nil {
		t.Fatal(err)
	}
	return f
}

// Args returns the TLS flags of role/node.
func (p *PKI) Args(t *testing.T, role pki.Role, node string) []string {
	f := p.Files(t, role, node)
	return []string{"--tls-ca-file", f.CAFile, "--tls-cert-file", f.CertFile, "--tls-key-file", f.KeyFile}
}

// Source loads the credential of role/node.
func (p *PKI) Source(t *testing.T, role pki.Role, node string) *pki.Source {
	t.Helper()
	s, err := pki.Load(p.Files(t, role, node), pki.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// DialAs opens a control connection with the credential of role/node.
func (p *PKI) DialAs(t *testing.T, addr string, role pki.Role, node string) *protocol.Conn {
	t.Helper()
	cfg := p.Source(t, role, node).ClientConfig(pki.Expect{Roles: []pki.Role{pki.RoleCoordinator}})
	nc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		t.Fatalf("dial %s as %s/%s: %v", addr, role, node, err)
	}
	cn := protocol.NewConn(nc, protocol.ConnOptions{})
	t.Cleanup(func() { cn.Close() })
	return cn
}

// workerRecordOf returns the worker's record as the admin API shows it.
// AcceptedHeartbeats is how many heartbeats worker p has seen accepted,
// from its own metrics: a heartbeat that changes nothing but counters
// renews the record's lease without rewriting it (status-interval), so
// the stored sequence moves only once per status interval.
func AcceptedHeartbeats(p *Proc) float64 {
	return Scrape("http://" + p.Admin + "/metrics")[`talon_worker_heartbeats_total{operation="heartbeat",outcome="accepted"}`]
}
