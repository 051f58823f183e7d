package client_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/pki"
	"github.com/talonhq/talon/internal/protocol"
	"github.com/talonhq/talon/internal/state/memory"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/coordtest"
	"github.com/talonhq/talon/internal/testsupport/pkitest"
)

// startOn runs coordinator "c" of cluster "t" over store on ln, with
// mutual TLS when srv is set.
func startOn(t *testing.T, store *memory.Store, ln net.Listener, srv *tls.Config) *coordtest.Coordinator {
	t.Helper()
	return coordtest.Start(t, coordtest.Options{
		ClusterID: "t", NodeID: "c", Timing: cluster.Timing{HeartbeatInterval: 100 * time.Millisecond, UnhealthyAfter: time.Minute, LeaseTTL: 2 * time.Minute},
		RequestTimeout: time.Second, ShutdownTimeout: time.Second, Store: store, Listener: ln, WaitReady: true, TLS: srv,
	})
}

// mutualTLS returns a coordinator's server configuration and a client's
// configuration for it, from a new CA.
func mutualTLS(t *testing.T) (srv, cli *tls.Config) {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.NewCA("test", time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.Write(dir); err != nil {
		t.Fatal(err)
	}
	source := func(id pki.Identity) *pki.Source { return pkitest.Source(t, ca, dir, id) }
	srv = source(pki.Identity{Role: pki.RoleCoordinator, NodeID: "c"}).ServerConfig(pki.Expect{})
	cli = source(pki.Identity{Role: pki.RoleClient, NodeID: "cli"}).ClientConfig(pki.Expect{Roles: []pki.Role{pki.RoleCoordinator}})
	return srv, cli
}

// lookups runs n lookups, parallel at a time, each with a 2 s deadline,
// and returns the failures.
func lookups(c *client.Client, n, parallel int) []error {
	var mu sync.Mutex
	var failed []error
	var wg sync.WaitGroup
	sem := make(chan struct{}, parallel)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if _, err := c.Lookup(ctx, fmt.Sprintf("k%d", i), 1); err != nil {
				mu.Lock()
				failed = append(failed, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return failed
}

// TestRestartOnSameAddress: a coordinator restarted on its address leaves
// the client's pooled connections to the old process closed; the calls
// after the restart redial instead of failing, with one pass (Retries -1,
// as the bench and the worker's ownership client use) as with the
// default retries.
func TestRestartOnSameAddress(t *testing.T) {
	for _, tc := range []struct {
		retries int
		tls     bool
	}{{-1, false}, {0, false}, {-1, true}, {0, true}} {
		t.Run(fmt.Sprintf("retries=%d/tls=%t", tc.retries, tc.tls), func(t *testing.T) {
			var srv, cli *tls.Config
			if tc.tls {
				srv, cli = mutualTLS(t)
			}
			store := memory.New(memory.Options{})
			t.Cleanup(func() { store.Close() })
			upsert(t, store, "w1", "127.0.0.1:1")
			ln, err := net.Listen("tcp", "127.0.0.7:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			old := startOn(t, store, ln, srv)
			c, err := client.New(client.Options{Coordinators: []string{addr}, Retries: tc.retries, MaxIdleConns: 4, TLS: cli})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if failed := lookups(c, 40, 4); len(failed) > 0 {
				t.Fatalf("before the restart: %d failed lookups, first %v", len(failed), failed[0])
			}
			old.Stop()
			if ln, err = net.Listen("tcp", addr); err != nil {
				t.Fatal(err)
			}
			startOn(t, store, ln, srv)
			// One caller first: it meets every stale connection in turn
			// (4, more than the default retries); then 4 at once.
			failed := lookups(c, 10, 1)
			failed = append(failed, lookups(c, 40, 4)...)
			if len(failed) > 0 {
				t.Fatalf("after the restart: %d of 50 lookups failed, first %v", len(failed), failed[0])
			}
		})
	}
}

// TestHungCoordinatorFirst: a coordinator that accepts and never answers
// is first in the list; a call with a 2 s deadline is served by the next
// address after one attempt deadline (a third of 2 s), with one pass as
// with the default retries.
func TestHungCoordinatorFirst(t *testing.T) {
	for _, retries := range []int{-1, 0} {
		t.Run(fmt.Sprintf("retries=%d", retries), func(t *testing.T) {
			addr, _ := coord(t, "w1")
			hung, _ := testsupport.HungListener(t, "127.0.0.7")
			c, err := client.New(client.Options{Coordinators: []string{hung, addr}, Retries: retries})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			began := time.Now()
			if _, err := c.Lookup(ctx, "k", 1); err != nil {
				t.Fatalf("lookup with the first coordinator hung: %v", err)
			}
			t.Logf("served after %s (attempt deadline about %s)", time.Since(began).Round(time.Millisecond), (2 * time.Second / 3).Round(time.Millisecond))
		})
	}
}

// TestPreferenceMovesToWhoeverAnswered: after a call the next address
// served, later calls go there first; an answer that is not a refusal
// (here a non-retryable error) counts as answering, a refusal does not.
func TestPreferenceMovesToWhoeverAnswered(t *testing.T) {
	t.Run("hung", func(t *testing.T) {
		addr, _ := coord(t, "w1")
		hung, accepted := testsupport.HungListener(t, "127.0.0.7")
		c, err := client.New(client.Options{Coordinators: []string{hung, addr}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for i := range 10 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, err := c.Lookup(ctx, fmt.Sprintf("k%d", i), 1)
			cancel()
			if err != nil {
				t.Fatalf("lookup %d: %v", i, err)
			}
		}
		if n := accepted.Load(); n != 1 {
			t.Fatalf("the hung coordinator got %d connections over 10 lookups, want 1 (the first)", n)
		}
	})
	t.Run("answer", func(t *testing.T) {
		var refused, answered atomic.Int32
		a := startFake(t, func(protocol.Message) protocol.Message {
			refused.Add(1)
			return protocol.NewError(protocol.CodeNotReady, "warming up")
		})
		b := startFake(t, func(protocol.Message) protocol.Message {
			answered.Add(1)
			return protocol.NewError(protocol.CodeInvalidArgument, "no such thing")
		})
		c, err := client.New(client.Options{Coordinators: []string{a.addr, b.addr}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for i := range 3 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, err := c.Call(ctx, &protocol.Ping{})
			cancel()
			if !protocol.IsCode(err, protocol.CodeInvalidArgument) {
				t.Fatalf("call %d: %v, want invalid_argument", i, err)
			}
		}
		if r, n := refused.Load(), answered.Load(); r != 1 || n != 3 {
			t.Fatalf("the refusing coordinator got %d requests and the answering one %d, want 1 and 3", r, n)
		}
	})
}

// TestRefusalsPassOverEveryAddress: a not_ready coordinator sends the
// call to the next address within the pass; when every address refuses,
// each pass asks each once and the call returns the refusal, not
// ErrNoCoordinator.
func TestRefusalsPassOverEveryAddress(t *testing.T) {
	var asked [2]atomic.Int32
	var addrs []string
	for i := range asked {
		addrs = append(addrs, startFake(t, func(protocol.Message) protocol.Message {
			asked[i].Add(1)
			return protocol.NewError(protocol.CodeNotReady, "warming up")
		}).addr)
	}
	c, err := client.New(client.Options{Coordinators: addrs, Retries: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Call(ctx, &protocol.Ping{}); !protocol.IsCode(err, protocol.CodeNotReady) || errors.Is(err, client.ErrNoCoordinator) {
		t.Fatalf("every address refusing: %v, want not_ready", err)
	}
	if a, b := asked[0].Load(), asked[1].Load(); a != 3 || b != 3 {
		t.Fatalf("asked %d and %d times with Retries 2, want 3 each (once per pass)", a, b)
	}
}

// TestDrainingCoordinatorCostsNoCall: callers keep calling while the
// coordinator they prefer drains (a drain delay, then the drain notice on
// every connection, then the close). Every call is served, by it or by
// the next address, with one pass (Retries -1) as with the default; and
// no connection told to go is used again.
func TestDrainingCoordinatorCostsNoCall(t *testing.T) {
	for _, tc := range []struct {
		retries int
		tls     bool
	}{{-1, false}, {-1, true}, {0, true}} {
		t.Run(fmt.Sprintf("retries=%d/tls=%t", tc.retries, tc.tls), func(t *testing.T) {
			var srv, cli *tls.Config
			if tc.tls {
				srv, cli = mutualTLS(t)
			}
			store := memory.New(memory.Options{})
			t.Cleanup(func() { store.Close() })
			upsert(t, store, "w1", "127.0.0.1:1")
			var addrs []string
			var coords []*coordtest.Coordinator
			for _, id := range []string{"a", "b"} {
				ln, err := net.Listen("tcp", "127.0.0.7:0")
				if err != nil {
					t.Fatal(err)
				}
				coords = append(coords, coordtest.Start(t, coordtest.Options{
					ClusterID: "t", NodeID: id, Timing: cluster.Timing{HeartbeatInterval: 100 * time.Millisecond, UnhealthyAfter: time.Minute, LeaseTTL: 2 * time.Minute},
					RequestTimeout: time.Second, ShutdownTimeout: time.Second, DrainDelay: 300 * time.Millisecond,
					Store: store, Listener: ln, WaitReady: true, TLS: srv,
				}))
				addrs = append(addrs, ln.Addr().String())
			}
			c, err := client.New(client.Options{Coordinators: addrs, Retries: tc.retries, MaxIdleConns: 4, TLS: cli})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if failed := lookups(c, 40, 4); len(failed) > 0 {
				t.Fatalf("before the drain: %d failed lookups, first %v", len(failed), failed[0])
			}
			stopped := make(chan struct{})
			go func() { defer close(stopped); coords[0].Stop() }()
			var failed []error
			for n := 0; ; n++ {
				select {
				case <-stopped:
				default:
					failed = append(failed, lookups(c, 8, 4)...)
					continue
				}
				break
			}
			failed = append(failed, lookups(c, 40, 4)...)
			if len(failed) > 0 {
				t.Fatalf("during and after the drain of the preferred coordinator: %d lookups failed, first %v", len(failed), failed[0])
			}
		})
	}
}
