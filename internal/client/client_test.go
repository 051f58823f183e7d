package client_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/datav1"
	"github.com/talonhq/talon/internal/pki"
	"github.com/talonhq/talon/internal/protocol"
	"github.com/talonhq/talon/internal/state/memory"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/coordtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// coord runs a coordinator over a memory store with workers w1..wN.
func coord(t *testing.T, workers ...string) (string, *memory.Store) {
	t.Helper()
	store := memory.New(memory.Options{})
	t.Cleanup(func() { store.Close() })
	for _, id := range workers {
		upsert(t, store, id, "127.0.0.1:1")
	}
	c := coordtest.Start(t, coordtest.Options{
		ClusterID: "t", NodeID: "c", Timing: cluster.Timing{HeartbeatInterval: 100 * time.Millisecond, UnhealthyAfter: time.Minute, LeaseTTL: 2 * time.Minute},
		RequestTimeout: time.Second, ShutdownTimeout: time.Second, Store: store,
	})
	return c.ControlAddr, store
}

func upsert(t *testing.T, store *memory.Store, id, addr string) {
	t.Helper()
	_, err := store.UpsertNode(context.Background(), &cluster.Record{FeatureLevel: cluster.BuildLevel,
		ClusterID: "t", NodeID: id, Role: cluster.RoleWorker, IncarnationID: "i-" + addr, Address: addr,
		StartTimeUnixMs: time.Now().UnixMilli(), Health: cluster.HealthHealthy, Ready: true,
	}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
}

func lookup(t *testing.T, c *client.Client, key string) client.Placement {
	t.Helper()
	var p client.Placement
	var err error
	for range 100 { // the coordinator may still be warming up
		if p, err = c.Lookup(context.Background(), key, 2); err == nil {
			return p
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("lookup %s: %v", key, err)
	return p
}

// TestCacheEqualityRule: any different version, whether numerically
// greater or smaller, drops the cache; the same version keeps it.
func TestCacheEqualityRule(t *testing.T) {
	addr, _ := coord(t, "w1", "w2", "w3")
	clk := testsupport.NewFakeClock(time.Unix(1000, 0))
	c, err := client.New(client.Options{Coordinators: []string{addr}, CacheTTL: time.Minute, Clock: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	first := lookup(t, c, "k")
	if first.Cached || len(first.Owners) != 2 {
		t.Fatalf("first lookup %+v", first)
	}
	if p := lookup(t, c, "k"); !p.Cached || p.Version != first.Version {
		t.Fatalf("second lookup not served from the cache: %+v", p)
	}
	c.ObserveVersion(uint64(first.Version)) // the same token: nothing changes
	if p := lookup(t, c, "k"); !p.Cached {
		t.Fatal("observing the same version dropped the cache")
	}
	for _, other := range []uint64{uint64(first.Version) + 1, uint64(first.Version) - 1} {
		c.ObserveVersion(other)
		if p := lookup(t, c, "k"); p.Cached {
			t.Fatalf("version %016x (cached %016x) did not drop the cache", other, first.Version)
		}
	}
	// TTL expiry refreshes too.
	if p := lookup(t, c, "k"); !p.Cached {
		t.Fatal("not cached after a refresh")
	}
	clk.Advance(time.Minute)
	if p := lookup(t, c, "k"); p.Cached {
		t.Fatal("served from the cache past its TTL")
	}
	// Invalidate drops one key only.
	lookup(t, c, "other")
	c.Invalidate("k")
	if p := lookup(t, c, "k"); p.Cached {
		t.Fatal("invalidated key served from the cache")
	}
	if p := lookup(t, c, "other"); !p.Cached {
		t.Fatal("Invalidate dropped an unrelated key")
	}
}

// TestMembershipChangeRefreshes: a new worker changes the version; the
// client learns it from the next answer and drops entries of the old one.
func TestMembershipChangeRefreshes(t *testing.T) {
	addr, store := coord(t, "w1", "w2")
	c, err := client.New(client.Options{Coordinators: []string{addr}, CacheTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a := lookup(t, c, "a")
	upsert(t, store, "w3", "127.0.0.1:3")
	// A lookup of another key reaches the coordinator and brings the new
	// version, which drops "a".
	var b client.Placement
	for b.Version == a.Version || b.Version == 0 {
		c.Invalidate("b")
		b = lookup(t, c, "b")
	}
	if p := lookup(t, c, "a"); p.Cached || p.Version != b.Version {
		t.Fatalf("entry of the old membership survived: %+v (new version %016x)", p, b.Version)
	}
}

func TestFailover(t *testing.T) {
	addr, _ := coord(t, "w1")
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()
	c, err := client.New(client.Options{Coordinators: []string{deadAddr, addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if p := lookup(t, c, "k"); len(p.Owners) != 1 {
		t.Fatalf("lookup through failover: %+v", p)
	}
	all, err := client.New(client.Options{Coordinators: []string{deadAddr}, Retries: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer all.Close()
	if _, err := all.Lookup(context.Background(), "k", 1); !errors.Is(err, client.ErrNoCoordinator) {
		t.Fatalf("every coordinator down: %v, want ErrNoCoordinator", err)
	}
}

// The data path's replica limit is the control protocol's: a client may
// read from every owner a lookup can return.
func TestDataReplicaLimitMatchesProtocol(t *testing.T) {
	if datav1.MaxReplicas != protocol.MaxReplicas {
		t.Fatalf("datav1.MaxReplicas %d, protocol.MaxReplicas %d", datav1.MaxReplicas, protocol.MaxReplicas)
	}
}

// TestWrongPortHints: an HTTP port, or a plain client against a mutual-TLS
// coordinator, gets a message that says what to do, not protocol jargon.
func TestWrongPortHints(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	cl, err := client.New(client.Options{Coordinators: []string{srv.Listener.Addr().String()}, Retries: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// A 6-byte key makes the frame's length field a newline, so the HTTP
	// server reads a (bad) request line and answers 400, as talon's admin
	// listener did in the report.
	hctx, hcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer hcancel()
	_, err = cl.Lookup(hctx, "abcd#0", 1)
	if err == nil || !strings.Contains(err.Error(), "answered HTTP") || !strings.Contains(err.Error(), "control addresses") {
		t.Fatalf("lookup against an HTTP port: %v", err)
	}
	// A mutual-TLS listener that fails the handshake of a plain client.
	ca, err := pki.NewCA("test", time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	is, err := ca.Issue(pki.Identity{Role: pki.RoleCoordinator, NodeID: "c"}, nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(is.CertPEM, is.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", pki.Harden(&tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAnyClientCert}))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	cl2, err := client.New(client.Options{Coordinators: []string{ln.Addr().String()}, Retries: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = cl2.Lookup(ctx, "k#0", 1)
	if err == nil || !strings.Contains(err.Error(), "give a client credential") {
		t.Fatalf("plain lookup against a TLS port: %v", err)
	}
}
