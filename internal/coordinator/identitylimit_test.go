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

	"github.com/talonhq/talon/internal/coordinator"
	"github.com/talonhq/talon/internal/pki"
	"github.com/talonhq/talon/internal/protocol"
	"github.com/talonhq/talon/internal/testsupport/coordtest"
	"github.com/talonhq/talon/internal/testsupport/pkitest"
)

// TestConnectionsPerIdentity: one client certificate spread over four
// source addresses holds at most a quarter of max-connections, and a
// fresh client's handshake and first request succeed during that flood.
// Before, the limits were per address and total only: one certificate
// over 9 addresses held about 4,100 idle connections and every new
// handshake failed (here: the flood took all 16 slots and the fresh
// client was closed at accept).
func TestConnectionsPerIdentity(t *testing.T) {
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
	const max = 16
	c := coordtest.Start(t, coordtest.Options{WaitReady: true, TLS: srv, Limits: coordinator.Limits{MaxConnections: max}})
	expect := pki.Expect{Roles: []pki.Role{pki.RoleCoordinator}}
	flood := source(pki.Identity{Role: pki.RoleClient, NodeID: "flood", Cluster: "test"}).ClientConfig(expect)
	fresh := source(pki.Identity{Role: pki.RoleClient, NodeID: "fresh", Cluster: "test"}).ClientConfig(expect)
	// ping dials from src with cfg and reports whether a request is
	// answered; the connection stays open until the test ends.
	ping := func(src string, cfg *tls.Config) error {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
		nc, err := tls.DialWithDialer(d, "tcp", c.ControlAddr, cfg)
		if err != nil {
			return fmt.Errorf("handshake: %w", err)
		}
		cn := protocol.NewConn(nc, protocol.ConnOptions{})
		t.Cleanup(func() { cn.Close() })
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = cn.Call(ctx, &protocol.Ping{})
		return err
	}
	held := 0
	for _, src := range []string{"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"} {
		for range max / 4 {
			if ping(src, flood) == nil {
				held++
			}
		}
	}
	if held != max/4 {
		t.Fatalf("one identity holds %d connections, want %d (a quarter of max-connections %d)", held, max/4, max)
	}
	if err := ping("127.0.0.6", fresh); err != nil {
		t.Fatalf("a fresh client during the flood: %v", err)
	}
	if err := ping("127.0.0.2", fresh); err != nil {
		t.Fatalf("a fresh client from one of the flood's addresses: %v", err)
	}
}

// TestAttestationsPerPeer: one worker certificate reconnecting to attest
// again and again costs at most a burst of TokenReviews (the verifier),
// then is refused with a retryable resource_exhausted naming the wait;
// another worker is not held back by it. Before, each connection's
// attestation was a TokenReview: one certificate drove 310 a minute.
func TestAttestationsPerPeer(t *testing.T) {
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
	var reviews atomic.Int64
	verify := func(_ context.Context, tok []byte) (coordinator.Attestation, error) {
		reviews.Add(1)
		return coordinator.Attestation{NodeID: string(tok), Subject: "talon/talon-worker", Expires: time.Now().Add(time.Hour)}, nil
	}
	c := coordtest.Start(t, coordtest.Options{Attest: verify, WaitReady: true, TLS: srv})
	expect := pki.Expect{Roles: []pki.Role{pki.RoleCoordinator}}
	attest := func(node string) error {
		cfg := source(pki.Identity{Role: pki.RoleWorker, NodeID: node, Cluster: "test"}).ClientConfig(expect)
		nc, err := tls.Dial("tcp", c.ControlAddr, cfg)
		if err != nil {
			t.Fatal(err)
		}
		cn := protocol.NewConn(nc, protocol.ConnOptions{})
		defer cn.Close()
		_, err = cn.Call(context.Background(), &protocol.Attest{Token: []byte(node)})
		return err
	}
	const tries = 40
	refused := 0
	for range tries {
		err := attest("w1")
		var pe *protocol.Error
		switch {
		case err == nil:
		case errors.As(err, &pe) && pe.Code == protocol.CodeResourceExhausted && pe.Retryable && strings.Contains(pe.Message, "retry in"):
			refused++
		default:
			t.Fatalf("attest: %v", err)
		}
	}
	if n := reviews.Load(); n > 9 || refused < tries-9 {
		t.Fatalf("%d attestations of one certificate cost %d reviews (%d refused), want at most the burst of 8 (and one refill)", tries, n, refused)
	}
	if err := attest("w2"); err != nil {
		t.Fatalf("another worker's attestation during w1's: %v", err)
	}
	t.Logf("%d attestations of one certificate: %d reviews, %d refused", tries, reviews.Load()-1, refused)
}
