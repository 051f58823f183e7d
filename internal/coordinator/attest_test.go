package coordinator_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/coordinator"
	"github.com/talonhq/talon/internal/pki"
	"github.com/talonhq/talon/internal/protocol"
	"github.com/talonhq/talon/internal/testsupport/coordtest"
	"github.com/talonhq/talon/internal/testsupport/pkitest"
)

// TestAttestationBindsWrites: with attestation on, a worker's writes are
// accepted only on a connection attested for its node and only until the
// attestation expires; a refused or unverifiable credential leaves the
// connection unattested (the latter with a retryable code), and nothing
// is stored for a refused write. The verifier here is the coordinator's
// injected boundary; internal/attest and the integration tests check the
// real TokenReview behind it.
func TestAttestationBindsWrites(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Now().UnixMilli())
	verdicts := map[string]coordinator.Attestation{
		"tok-w1":      {NodeID: "w1", Subject: "talon/talon-worker", Expires: time.UnixMilli(now.Load()).Add(time.Hour)},
		"tok-expired": {NodeID: "w2", Subject: "talon/talon-worker", Expires: time.UnixMilli(now.Load()).Add(-time.Second)},
	}
	verify := func(_ context.Context, tok []byte) (coordinator.Attestation, error) {
		switch string(tok) {
		case "tok-down":
			return coordinator.Attestation{}, errors.New("TokenReview: connection refused")
		case "tok-refused":
			return coordinator.Attestation{}, fmt.Errorf("%w: service account talon/other is not a worker service account", coordinator.ErrAttestationRefused)
		}
		return verdicts[string(tok)], nil
	}
	c := coordtest.Start(t, coordtest.Options{Attest: verify, WaitReady: true})
	dial := func() *protocol.Conn {
		nc, err := net.Dial("tcp", c.ControlAddr)
		if err != nil {
			t.Fatal(err)
		}
		cn := protocol.NewConn(nc, protocol.ConnOptions{})
		t.Cleanup(func() { cn.Close() })
		return cn
	}
	rec := func(node string) *cluster.Record {
		return &cluster.Record{ClusterID: "test", NodeID: node, Role: cluster.RoleWorker, IncarnationID: "i1", Address: "127.0.0.1:9001",
			Version: "test", Health: cluster.HealthHealthy, Ready: true, FeatureLevel: cluster.BuildLevel}
	}
	register := func(cn *protocol.Conn, node string) error {
		msg, err := protocol.NewRegister(rec(node))
		if err != nil {
			t.Fatal(err)
		}
		_, err = cn.Call(context.Background(), msg)
		return err
	}
	attest := func(cn *protocol.Conn, tok string) (protocol.Message, error) {
		return cn.Call(context.Background(), &protocol.Attest{Token: []byte(tok)})
	}
	stored := func(node string) bool {
		snap, err := c.Store.Snapshot(context.Background(), "test")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range snap.Records {
			if r.NodeID == node {
				return true
			}
		}
		return false
	}
	refusedWith := func(t *testing.T, err error, code protocol.Code, want string) {
		t.Helper()
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Code != code || !strings.Contains(pe.Message, want) {
			t.Fatalf("got %v, want %s mentioning %q", err, code, want)
		}
	}

	t.Run("unattested write refused", func(t *testing.T) {
		refusedWith(t, register(dial(), "w1"), protocol.CodePermissionDenied, "not attested")
	})
	t.Run("attested as another node", func(t *testing.T) {
		cn := dial()
		resp, err := attest(cn, "tok-w1")
		if err != nil {
			t.Fatal(err)
		}
		if a := resp.(*protocol.Attested); a.NodeID != "w1" || a.ExpiresUnixMs != verdicts["tok-w1"].Expires.UnixMilli() {
			t.Fatalf("Attested = %+v", a)
		}
		refusedWith(t, register(cn, "w3"), protocol.CodePermissionDenied, `attested as pod "w1"`)
		if stored("w3") {
			t.Fatal("w3 stored after a refused registration")
		}
		if err := register(cn, "w1"); err != nil {
			t.Fatalf("w1 on its own attested connection: %v", err)
		}
		if !stored("w1") {
			t.Fatal("w1 not stored")
		}
	})
	t.Run("expired attestation", func(t *testing.T) {
		cn := dial()
		if _, err := attest(cn, "tok-expired"); err != nil {
			t.Fatal(err)
		}
		refusedWith(t, register(cn, "w2"), protocol.CodePermissionDenied, "attestation expired")
	})
	t.Run("refused credential", func(t *testing.T) {
		cn := dial()
		_, err := attest(cn, "tok-refused")
		refusedWith(t, err, protocol.CodePermissionDenied, "not a worker service account")
		refusedWith(t, register(cn, "w4"), protocol.CodePermissionDenied, "not attested")
	})
	t.Run("verifier down is retryable", func(t *testing.T) {
		_, err := attest(dial(), "tok-down")
		refusedWith(t, err, protocol.CodeUnavailable, "could not be verified now")
		if !protocol.Retryable(err) {
			t.Fatalf("%v is not retryable", err)
		}
	})
	want := `
# HELP talon_coordinator_auth_refusals_total x
# TYPE talon_coordinator_auth_refusals_total counter
talon_coordinator_auth_refusals_total{reason="attestation"} 1
talon_coordinator_auth_refusals_total{reason="handshake"} 0
talon_coordinator_auth_refusals_total{reason="not_attested"} 4
talon_coordinator_auth_refusals_total{reason="permission_denied"} 0
talon_coordinator_auth_refusals_total{reason="revoked"} 0
`
	if err := testutil.GatherAndCompare(c.Registry, strings.NewReader(helpless(t, c, want)), "talon_coordinator_auth_refusals_total"); err != nil {
		t.Fatal(err)
	}
}

// helpless puts the registered help text into want's HELP line, so the
// comparison is about the values.
func helpless(t *testing.T, c *coordtest.Coordinator, want string) string {
	t.Helper()
	mfs, err := c.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "talon_coordinator_auth_refusals_total" {
			return strings.Replace(want, "total x", "total "+mf.GetHelp(), 1)
		}
	}
	t.Fatal("no talon_coordinator_auth_refusals_total")
	return ""
}

// TestAttestationWithMutualTLS: with mutual TLS the certificate and the
// token must name the same node, only a worker's certificate may attest,
// and one connection may attest at most a few times.
func TestAttestationWithMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.NewCA("test", time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.Write(dir); err != nil {
		t.Fatal(err)
	}
	source := func(id pki.Identity) *pki.Source { return pkitest.Source(t, ca, dir, id) }
	srv := source(pki.Identity{Role: pki.RoleCoordinator, NodeID: "coord-a", Cluster: "test"}).ServerConfig(pki.Expect{})
	verify := func(_ context.Context, tok []byte) (coordinator.Attestation, error) {
		return coordinator.Attestation{NodeID: string(tok), Subject: "talon/talon-worker", Expires: time.Now().Add(time.Hour)}, nil
	}
	c := coordtest.Start(t, coordtest.Options{Attest: verify, WaitReady: true, TLS: srv})
	dial := func(id pki.Identity) *protocol.Conn {
		cfg := source(id).ClientConfig(pki.Expect{Roles: []pki.Role{pki.RoleCoordinator}})
		nc, err := tls.Dial("tcp", c.ControlAddr, cfg)
		if err != nil {
			t.Fatal(err)
		}
		cn := protocol.NewConn(nc, protocol.ConnOptions{})
		t.Cleanup(func() { cn.Close() })
		return cn
	}
	attest := func(cn *protocol.Conn, node string) error {
		_, err := cn.Call(context.Background(), &protocol.Attest{Token: []byte(node)})
		return err
	}
	code := func(err error) protocol.Code {
		var pe *protocol.Error
		if errors.As(err, &pe) {
			return pe.Code
		}
		return 0
	}
	w1 := dial(pki.Identity{Role: pki.RoleWorker, NodeID: "w1", Cluster: "test"})
	if err := attest(w1, "w2"); code(err) != protocol.CodePermissionDenied || !strings.Contains(err.Error(), `attests pod "w2" but the certificate names`) {
		t.Fatalf("w1's certificate with w2's token: %v", err)
	}
	if err := attest(w1, "w1"); err != nil {
		t.Fatalf("w1's certificate with w1's token: %v", err)
	}
	msg, err := protocol.NewRegister(&cluster.Record{ClusterID: "test", NodeID: "w1", Role: cluster.RoleWorker, IncarnationID: "i1",
		Address: "127.0.0.1:9001", Version: "test", Health: cluster.HealthHealthy, Ready: true, FeatureLevel: cluster.BuildLevel})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w1.Call(context.Background(), msg); err != nil {
		t.Fatalf("w1 attested by both: %v", err)
	}
	for range 2 {
		_ = attest(w1, "w1")
	}
	if err := attest(w1, "w1"); code(err) != protocol.CodeResourceExhausted {
		t.Fatalf("a fifth Attest on one connection: %v, want resource_exhausted", err)
	}
	cli := dial(pki.Identity{Role: pki.RoleClient, NodeID: "cli", Cluster: "test"})
	if err := attest(cli, "cli"); code(err) != protocol.CodePermissionDenied || !strings.Contains(err.Error(), "only workers attest") {
		t.Fatalf("a client certificate attesting: %v", err)
	}
}
