package faults

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/protocol"
	"github.com/talonhq/talon/internal/testenv"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// TestActiveActiveOnEtcd runs two coordinators on a real etcd with three
// real workers and checks the ADR's active-active guarantees end to end.
func TestActiveActiveOnEtcd(t *testing.T) {
	talontest.SkipShort(t)
	etcd := testenv.StartEtcd(t, testenv.EtcdOptions{})
	store := []string{"--state-backend", "etcd", "--etcd-endpoints", strings.Join(etcd.Endpoints(), ","), "--ha", "--coordinator-replicas", "2"}
	ctlA, ctlB := talontest.FreeAddr(t), talontest.FreeAddr(t)
	a := talontest.Start(t, "coordinator-a", talontest.CoordinatorArgs("coord-a", ctlA, talontest.FreeAddr(t), store...)...)
	b := talontest.Start(t, "coordinator-b", talontest.CoordinatorArgs("coord-b", ctlB, talontest.FreeAddr(t), store...)...)
	testsupport.WaitFor(t, 20*time.Second, "both coordinators ready", func() bool { return talontest.Ready(t, a) && talontest.Ready(t, b) })

	blobs := t.TempDir()
	var workers []*talontest.Proc
	for i := 1; i <= 3; i++ {
		workers = append(workers, talontest.Start(t, fmt.Sprintf("worker-%d", i),
			talontest.WorkerArgs(fmt.Sprintf("worker-%d", i), talontest.FreeAddr(t), talontest.FreeAddr(t), []string{ctlA, ctlB}, blobs, t.TempDir())...))
	}
	healthyWorkers := func(p *talontest.Proc) int {
		c, err := p.API(t).Cluster(context.Background())
		if err != nil {
			return -1
		}
		return c.Nodes.Workers.Healthy
	}
	testsupport.WaitFor(t, 20*time.Second, "three healthy workers seen by both coordinators", func() bool {
		return healthyWorkers(a) == 3 && healthyWorkers(b) == 3
	})

	t.Run("OrderedHeartbeatsThroughBothCoordinators", func(t *testing.T) {
		conns := []*protocol.Conn{talontest.Conn(t, ctlA), talontest.Conn(t, ctlB)}
		// Readers on both coordinators watch the record: its sequence must
		// never move backward, whichever coordinator answers.
		var stop atomic.Bool
		var wg sync.WaitGroup
		var backward atomic.Int64
		for _, p := range []*talontest.Proc{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				api := p.API(t)
				last := uint64(0)
				for !stop.Load() {
					n, err := api.Node(context.Background(), "w-sim")
					if err == nil {
						if n.Node.HeartbeatSeq < last {
							backward.Add(1)
						}
						last = n.Node.HeartbeatSeq
					}
					time.Sleep(5 * time.Millisecond)
				}
			}()
		}
		var delayed []uint64
		const n = 60
		var accepted, dup, stale int
		for seq := uint64(0); seq < n; seq++ {
			c := conns[seq%2]
			if seq%7 == 3 {
				delayed = append(delayed, seq) // held back, sent late below
				continue
			}
			switch talontest.Send(t, c, seq) {
			case protocol.OutcomeAccepted:
				accepted++
			default:
				t.Fatalf("fresh heartbeat %d not accepted", seq)
			}
			if seq%5 == 0 { // duplicated through the other coordinator
				if o := talontest.Send(t, conns[(seq+1)%2], seq); o != protocol.OutcomeDuplicate {
					t.Fatalf("duplicate of %d through the other coordinator: %v, want duplicate", seq, o)
				}
				dup++
			}
			if len(delayed) > 0 && seq%9 == 0 {
				old := delayed[0]
				delayed = delayed[1:]
				if o := talontest.Send(t, conns[(seq+1)%2], old); o != protocol.OutcomeStale {
					t.Fatalf("delayed heartbeat %d after %d: %v, want stale", old, seq, o)
				}
				stale++
			}
		}
		// One more fresh heartbeat, so every held-back one is now older.
		if o := talontest.Send(t, conns[0], n); o != protocol.OutcomeAccepted {
			t.Fatalf("final heartbeat: %v", o)
		}
		accepted++
		for _, old := range delayed {
			if o := talontest.Send(t, conns[old%2], old); o != protocol.OutcomeStale {
				t.Fatalf("delayed heartbeat %d: %v, want stale", old, o)
			}
			stale++
		}
		time.Sleep(100 * time.Millisecond)
		stop.Store(true)
		wg.Wait()
		if backward.Load() != 0 {
			t.Fatalf("readers saw the record move backward %d times", backward.Load())
		}
		for _, p := range []*talontest.Proc{a, b} {
			got, err := p.API(t).Node(context.Background(), "w-sim")
			if err != nil || got.Node.HeartbeatSeq != n {
				t.Fatalf("%s holds seq %v (%v), want %d", p.Name, got, err, n)
			}
		}
		t.Logf("accepted %d, duplicates %d, stale %d", accepted, dup, stale)
		// Leave: the simulated worker deregisters through coordinator B.
		resp, err := conns[1].Call(context.Background(), &protocol.Deregister{ClusterID: "it", Role: cluster.RoleWorker, NodeID: "w-sim", IncarnationID: "sim-1"})
		if err != nil || resp.(*protocol.Ack).Outcome != protocol.OutcomeAccepted {
			t.Fatalf("deregister: %v %v", resp, err)
		}
	})

	t.Run("IdenticalPlacementFromBoth", func(t *testing.T) {
		ca, cb := talontest.Conn(t, ctlA), talontest.Conn(t, ctlB)
		for i := range 25 {
			key := fmt.Sprintf("objects/part-%03d#%d", i, i%4)
			var ra, rb *protocol.PlacementResponse
			testsupport.WaitFor(t, 10*time.Second, "both coordinators on one membership", func() bool {
				x, err1 := ca.Call(context.Background(), &protocol.PlacementLookup{Key: []byte(key), Replicas: 2})
				y, err2 := cb.Call(context.Background(), &protocol.PlacementLookup{Key: []byte(key), Replicas: 2})
				if err1 != nil || err2 != nil {
					return false
				}
				ra, rb = x.(*protocol.PlacementResponse), y.(*protocol.PlacementResponse)
				return ra.Version == rb.Version
			})
			if len(ra.Owners) != 2 || ra.Owners[0] != rb.Owners[0] || ra.Owners[1] != rb.Owners[1] {
				t.Fatalf("key %s: A says %+v, B says %+v", key, ra.Owners, rb.Owners)
			}
		}
	})

	t.Run("CoordinatorKilled", func(t *testing.T) {
		a.Kill() // SIGKILL: no drain, no deregistration
		cl, err := client.New(client.Options{Coordinators: []string{ctlA, ctlB}})
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		for i := range 20 {
			if _, err := cl.Lookup(context.Background(), fmt.Sprintf("k%d", i), 2); err != nil {
				t.Fatalf("lookup %d after coordinator A died: %v", i, err)
			}
		}
		// Workers keep heartbeating through B: still healthy well past the
		// unhealthy threshold.
		time.Sleep(2 * time.Second)
		if n := healthyWorkers(b); n != 3 {
			t.Fatalf("B sees %d healthy workers after A died, want 3", n)
		}
		a.Restart()
		testsupport.WaitFor(t, 20*time.Second, "coordinator A back", func() bool { return talontest.Ready(t, a) })
	})

	t.Run("StoreDownFailsClosed", func(t *testing.T) {
		etcd.Stop()
		testsupport.WaitFor(t, 20*time.Second, "both coordinators unready", func() bool { return !talontest.Ready(t, a) && !talontest.Ready(t, b) })
		for _, p := range []*talontest.Proc{a, b} {
			if !talontest.Live(t, p) {
				t.Fatalf("%s not live while the store is down", p.Name)
			}
			h, err := p.API(t).Readyz(context.Background())
			if err == nil && h.Ready() {
				t.Fatalf("%s ready with the store down", p.Name)
			}
			_, err = p.API(t).Cluster(context.Background())
			var ae *apiv1.APIError
			if !errors.As(err, &ae) || ae.HTTPStatus != 503 || !ae.Retryable {
				t.Fatalf("%s /api/v1/cluster with the store down: %v", p.Name, err)
			}
		}
		for _, addr := range []string{ctlA, ctlB} {
			c := talontest.Conn(t, addr)
			_, err := c.Call(context.Background(), &protocol.PlacementLookup{Key: []byte("k"), Replicas: 1})
			if err == nil || !protocol.Retryable(err) {
				t.Fatalf("lookup on %s with the store down: %v, want a retryable error", addr, err)
			}
			msg, _ := protocol.NewHeartbeat(talontest.SimRecord(1000))
			_, err = c.Call(context.Background(), msg)
			if err == nil || !protocol.Retryable(err) {
				t.Fatalf("heartbeat on %s with the store down: %v, want a retryable error", addr, err)
			}
		}
		etcd.Start()
		testsupport.WaitFor(t, 30*time.Second, "both coordinators ready again", func() bool { return talontest.Ready(t, a) && talontest.Ready(t, b) })
		testsupport.WaitFor(t, 20*time.Second, "workers healthy again", func() bool { return healthyWorkers(a) == 3 && healthyWorkers(b) == 3 })
	})
	for _, w := range workers {
		if w.Exited() {
			t.Fatalf("%s exited during the test", w.Name)
		}
	}
}
