package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
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
)

// conn is a raw control-protocol connection to one coordinator.
func conn(t *testing.T, addr string) *protocol.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c := protocol.NewConn(nc, protocol.ConnOptions{})
	t.Cleanup(func() { c.Close() })
	return c
}

func simRecord(seq uint64) *cluster.Record {
	return &cluster.Record{
		ClusterID: "it", NodeID: "w-sim", Role: cluster.RoleWorker, IncarnationID: "sim-1",
		Address: "127.0.0.1:9", Version: "sim", StartTimeUnixMs: 1, HeartbeatSeq: seq,
		Health: cluster.HealthHealthy, Ready: true,
	}
}

// send sends the simulated worker's record: a Register at seq 0 (its
// first message), a Heartbeat after.
func send(t *testing.T, c *protocol.Conn, seq uint64) protocol.Outcome {
	var msg protocol.Message
	var err error
	if seq == 0 {
		msg, err = protocol.NewRegister(simRecord(seq))
	} else {
		msg, err = protocol.NewHeartbeat(simRecord(seq))
	}
	if err != nil {
		t.Error(err)
		return 0
	}
	resp, err := c.Call(context.Background(), msg)
	if err != nil {
		t.Errorf("heartbeat %d: %v", seq, err)
		return 0
	}
	return resp.(*protocol.Ack).Outcome
}

// TestActiveActiveOnEtcd runs two coordinators on a real etcd with three
// real workers and checks the ADR's active-active guarantees end to end.
func TestActiveActiveOnEtcd(t *testing.T) {
	skipShort(t)
	etcd := testenv.StartEtcd(t, testenv.EtcdOptions{})
	store := []string{"--state-backend", "etcd", "--etcd-endpoints", strings.Join(etcd.Endpoints(), ","), "--ha", "--coordinator-replicas", "2"}
	ctlA, ctlB := freeAddr(t), freeAddr(t)
	a := start(t, "coordinator-a", coordinatorArgs("coord-a", ctlA, freeAddr(t), store...)...)
	b := start(t, "coordinator-b", coordinatorArgs("coord-b", ctlB, freeAddr(t), store...)...)
	testsupport.WaitFor(t, 20*time.Second, "both coordinators ready", func() bool { return ready(t, a) && ready(t, b) })

	blobs := t.TempDir()
	var workers []*proc
	for i := 1; i <= 3; i++ {
		workers = append(workers, start(t, fmt.Sprintf("worker-%d", i),
			workerArgs(fmt.Sprintf("worker-%d", i), freeAddr(t), freeAddr(t), []string{ctlA, ctlB}, blobs, t.TempDir())...))
	}
	healthyWorkers := func(p *proc) int {
		c, err := p.api(t).Cluster(context.Background())
		if err != nil {
			return -1
		}
		return c.Nodes.Workers.Healthy
	}
	testsupport.WaitFor(t, 20*time.Second, "three healthy workers seen by both coordinators", func() bool {
		return healthyWorkers(a) == 3 && healthyWorkers(b) == 3
	})

	t.Run("OrderedHeartbeatsThroughBothCoordinators", func(t *testing.T) {
		conns := []*protocol.Conn{conn(t, ctlA), conn(t, ctlB)}
		// Readers on both coordinators watch the record: its sequence must
		// never move backward, whichever coordinator answers.
		var stop atomic.Bool
		var wg sync.WaitGroup
		var backward atomic.Int64
		for _, p := range []*proc{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				api := p.api(t)
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
			switch send(t, c, seq) {
			case protocol.OutcomeAccepted:
				accepted++
			default:
				t.Fatalf("fresh heartbeat %d not accepted", seq)
			}
			if seq%5 == 0 { // duplicated through the other coordinator
				if o := send(t, conns[(seq+1)%2], seq); o != protocol.OutcomeDuplicate {
					t.Fatalf("duplicate of %d through the other coordinator: %v, want duplicate", seq, o)
				}
				dup++
			}
			if len(delayed) > 0 && seq%9 == 0 {
				old := delayed[0]
				delayed = delayed[1:]
				if o := send(t, conns[(seq+1)%2], old); o != protocol.OutcomeStale {
					t.Fatalf("delayed heartbeat %d after %d: %v, want stale", old, seq, o)
				}
				stale++
			}
		}
		// One more fresh heartbeat, so every held-back one is now older.
		if o := send(t, conns[0], n); o != protocol.OutcomeAccepted {
			t.Fatalf("final heartbeat: %v", o)
		}
		accepted++
		for _, old := range delayed {
			if o := send(t, conns[old%2], old); o != protocol.OutcomeStale {
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
		for _, p := range []*proc{a, b} {
			got, err := p.api(t).Node(context.Background(), "w-sim")
			if err != nil || got.Node.HeartbeatSeq != n {
				t.Fatalf("%s holds seq %v (%v), want %d", p.name, got, err, n)
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
		ca, cb := conn(t, ctlA), conn(t, ctlB)
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
		a.kill() // SIGKILL: no drain, no deregistration
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
		a.restart()
		testsupport.WaitFor(t, 20*time.Second, "coordinator A back", func() bool { return ready(t, a) })
	})

	t.Run("StoreDownFailsClosed", func(t *testing.T) {
		etcd.Stop()
		testsupport.WaitFor(t, 20*time.Second, "both coordinators unready", func() bool { return !ready(t, a) && !ready(t, b) })
		for _, p := range []*proc{a, b} {
			if !live(t, p) {
				t.Fatalf("%s not live while the store is down", p.name)
			}
			h, err := p.api(t).Readyz(context.Background())
			if err == nil && h.Ready() {
				t.Fatalf("%s ready with the store down", p.name)
			}
			_, err = p.api(t).Cluster(context.Background())
			var ae *apiv1.APIError
			if !errors.As(err, &ae) || ae.HTTPStatus != 503 || !ae.Retryable {
				t.Fatalf("%s /api/v1/cluster with the store down: %v", p.name, err)
			}
		}
		for _, addr := range []string{ctlA, ctlB} {
			c := conn(t, addr)
			_, err := c.Call(context.Background(), &protocol.PlacementLookup{Key: []byte("k"), Replicas: 1})
			if err == nil || !protocol.Retryable(err) {
				t.Fatalf("lookup on %s with the store down: %v, want a retryable error", addr, err)
			}
			msg, _ := protocol.NewHeartbeat(simRecord(1000))
			_, err = c.Call(context.Background(), msg)
			if err == nil || !protocol.Retryable(err) {
				t.Fatalf("heartbeat on %s with the store down: %v, want a retryable error", addr, err)
			}
		}
		etcd.Start()
		testsupport.WaitFor(t, 30*time.Second, "both coordinators ready again", func() bool { return ready(t, a) && ready(t, b) })
		testsupport.WaitFor(t, 20*time.Second, "workers healthy again", func() bool { return healthyWorkers(a) == 3 && healthyWorkers(b) == 3 })
	})
	for _, w := range workers {
		if w.exited() {
			t.Fatalf("%s exited during the test", w.name)
		}
	}
}
