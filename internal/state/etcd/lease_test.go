package etcd

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/testenv"
)

const (
	methodTxn       = "/etcdserverpb.KV/Txn"
	methodRange     = "/etcdserverpb.KV/Range"
	methodKeepAlive = "/etcdserverpb.Lease/LeaseKeepAlive"
	methodGrant     = "/etcdserverpb.Lease/LeaseGrant"
	methodRevoke    = "/etcdserverpb.Lease/LeaseRevoke"
	methodAuth      = "/etcdserverpb.Auth/Authenticate"
)

// waitCache blocks until s's snapshot cache has applied revision rev, a
// write under the prefix (so its event comes without a progress request,
// which would put a message on the wire during a count).
func waitCache(t *testing.T, s *Store, rev state.Revision) {
	t.Helper()
	n, ok := parseRevision(rev)
	if !ok {
		t.Fatalf("revision %q", rev)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		reached, ready := s.cache.r.Reached(uint64(n))
		if reached {
			return
		}
		if time.Now().After(deadline) {
			at, _ := s.cache.r.Revision()
			t.Fatalf("cache at revision %d (ready %t), want %d", at, ready, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitCacheReady blocks until s's snapshot cache has listed and watches.
func waitCacheReady(t testing.TB, s *Store) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !s.cache.isReady() {
		if time.Now().After(deadline) {
			t.Fatal("snapshot cache not ready after 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Ready is set before the watch is created: wait for the event of a
	// write under the prefix (not a record key, so no snapshot shows it).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := s.client.Put(ctx, s.keys.all()+"warm-up", "x")
	if err != nil {
		t.Fatal(err)
	}
	for {
		at, _ := s.cache.r.Revision()
		if at >= uint64(resp.Header.Revision) {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("cache at revision %d, want %d", at, resp.Header.Revision)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestRoundTrips counts the requests each heartbeat puts on the wire, with
// authentication on (so a per-request re-authentication would show).
//
// Steady state, an accepted heartbeat costs two requests: one keepalive
// message on a long-lived stream and one transaction. That holds when the
// heartbeats of one worker alternate between two coordinators, as long as
// each coordinator's snapshot cache has seen the other's last write. Without
// the cache, alternation costs one more transaction (the compare fails and
// returns the current record).
func TestRoundTrips(t *testing.T) {
	testenv.SkipIfShort(t)
	e := testenv.StartEtcd(t, testenv.EtcdOptions{Auth: true})
	ctx := testCtx(t)

	counted := func(cache bool) (*Store, *rpcCounter) {
		c := newRPCCounter()
		o := optionsFor(e, cache)
		o.dialOptions = c.dialOptions()
		s := newStore(t, o)
		if cache {
			waitCacheReady(t, s)
		}
		c.take() // connecting (and the cache's list and watch) authenticates
		return s, c
	}
	want2 := map[string]int{methodKeepAlive: 1, methodTxn: 1}

	t.Run("one coordinator", func(t *testing.T) {
		for _, cache := range []bool{false, true} {
			s, c := counted(cache)
			cid := uniqueCluster(t)
			if _, err := s.UpsertNode(ctx, record(cid, cluster.RoleWorker, "w", "i", 1), time.Minute); err != nil {
				t.Fatal(err)
			}
			ins := c.take()
			// Insert: a read (the grant is a Raft write, so the decision
			// is confirmed first), the grant and the transaction.
			wantIns := map[string]int{methodRange: 1, methodGrant: 1, methodTxn: 1}
			if !maps.Equal(ins, wantIns) {
				t.Errorf("cache=%t insert: requests %v, want %v", cache, ins, wantIns)
			}
			// Each of the first keepalives opens one of the keepalive
			// streams, which authenticates once.
			warm := uint64(2 + keepAliveStreams)
			for seq := uint64(2); seq < warm; seq++ {
				if _, err := s.UpsertNode(ctx, record(cid, cluster.RoleWorker, "w", "i", seq), time.Minute); err != nil {
					t.Fatal(err)
				}
			}
			if got := c.take(); got[methodAuth] != keepAliveStreams {
				t.Errorf("warm-up: requests %v, want %d authentications (one per keepalive stream)", got, keepAliveStreams)
			}
			for seq := warm; seq < warm+20; seq++ {
				res, err := s.UpsertNode(ctx, record(cid, cluster.RoleWorker, "w", "i", seq), time.Minute)
				if err != nil || res.Decision != cluster.DecisionAdvance {
					t.Fatalf("heartbeat %d: %+v %v", seq, res, err)
				}
				if got := c.take(); !maps.Equal(got, want2) {
					t.Fatalf("cache=%t heartbeat %d: requests %v, want %v", cache, seq, got, want2)
				}
			}
		}
	})

	t.Run("alternating coordinators", func(t *testing.T) {
		for _, cache := range []bool{true, false} {
			a, ca := counted(cache)
			b, cb := counted(cache)
			cid := uniqueCluster(t)
			stores := []*Store{a, b}
			counters := []*rpcCounter{ca, cb}
			var last state.WriteResult
			for seq := uint64(1); seq <= 2*keepAliveStreams+22; seq++ {
				i := int(seq % 2)
				s, c := stores[i], counters[i]
				if cache && seq > 1 {
					waitCache(t, s, last.Revision) // the other coordinator's write
				}
				c.take()
				res, err := s.UpsertNode(ctx, record(cid, cluster.RoleWorker, "w", "i", seq), time.Minute)
				if err != nil || !res.Decision.Accepted() {
					t.Fatalf("heartbeat %d: %+v %v", seq, res, err)
				}
				last = res
				got := c.take()
				if seq <= 2+2*keepAliveStreams {
					continue // insert; opening each store's keepalive streams
				}
				want := want2
				if !cache {
					want = map[string]int{methodKeepAlive: 1, methodTxn: 2}
				}
				if !maps.Equal(got, want) {
					t.Fatalf("cache=%t heartbeat %d via store %d: requests %v, want %v", cache, seq, i, got, want)
				}
			}
			if g := a.Stats().LeaseGrants + b.Stats().LeaseGrants; g != 1 {
				t.Fatalf("cache=%t: %d lease grants for one incarnation, want 1", cache, g)
			}
		}
	})

	t.Run("duplicate and stale cost one read", func(t *testing.T) {
		s, c := counted(true)
		cid := uniqueCluster(t)
		res, err := s.UpsertNode(ctx, record(cid, cluster.RoleWorker, "w", "i", 5), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		waitCache(t, s, res.Revision)
		for _, seq := range []uint64{5, 4} {
			c.take()
			res, err := s.UpsertNode(ctx, record(cid, cluster.RoleWorker, "w", "i", seq), time.Minute)
			if err != nil || res.Decision.Accepted() {
				t.Fatalf("seq %d: %+v %v", seq, res, err)
			}
			if got, want := c.take(), map[string]int{methodRange: 1}; !maps.Equal(got, want) {
				t.Fatalf("seq %d: requests %v, want %v", seq, got, want)
			}
		}
	})
}

// TestNoLeakedLeases drives many heartbeats (alternating coordinators,
// restarts, a TTL change, removals) and then counts the leases etcd holds:
// exactly one per live incarnation.
func TestNoLeakedLeases(t *testing.T) {
	testenv.SkipIfShort(t)
	e := testenv.StartEtcd(t, testenv.EtcdOptions{})
	raw := e.Client(t)
	ctx := testCtx(t)
	a := newStore(t, optionsFor(e, true))
	b := newStore(t, optionsFor(e, false))
	stores := []*Store{a, b}
	cid := uniqueCluster(t)
	const workers, rounds = 40, 25

	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			node := fmt.Sprintf("w%03d", w)
			inc, seq := 0, uint64(0)
			ttl := time.Minute
			for r := range rounds {
				seq++
				if r > 0 && (r+w)%9 == 0 {
					inc, seq = inc+1, 0 // the process restarted
				}
				if r == rounds/2 && w%5 == 0 {
					ttl = 2 * time.Minute // operator changed the lease TTL
				}
				s := stores[(r+w)%2]
				rec := record(cid, cluster.RoleWorker, node, fmt.Sprintf("inc-%d", inc), seq)
				res, err := s.UpsertNode(ctx, rec, ttl)
				if err != nil {
					errs <- fmt.Errorf("%s round %d: %w", node, r, err)
					return
				}
				if !res.Decision.Accepted() {
					errs <- fmt.Errorf("%s round %d: %s", node, r, res.Decision)
					return
				}
			}
			if w%4 == 0 {
				k := cluster.Key{ClusterID: cid, Role: cluster.RoleWorker, NodeID: node}
				if _, err := stores[w%2].RemoveNode(ctx, k, fmt.Sprintf("inc-%d", inc)); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	live := workers - workers/4
	leases, err := raw.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Leases of dead incarnations and removed records are left to expire
	// (a revoke could take a record re-registered on them); every lease
	// that holds a key holds exactly one, one per live incarnation.
	holding := 0
	for _, l := range leases.Leases {
		ttl, err := raw.TimeToLive(ctx, l.ID, clientv3.WithAttachedKeys())
		if err != nil {
			t.Fatal(err)
		}
		switch n := len(ttl.Keys); {
		case n > 1:
			t.Errorf("lease %x holds %d keys, want at most 1", l.ID, n)
		case n == 1:
			holding++
		}
	}
	if holding != live {
		t.Errorf("%d leases hold a key, want %d (one per live incarnation)", holding, live)
	}
	t.Logf("%d leases, %d holding a key", len(leases.Leases), holding)
	snap, err := a.Snapshot(ctx, cid)
	if err != nil || len(snap.Records) != live {
		t.Fatalf("snapshot: %d records, %v; want %d", len(snap.Records), err, live)
	}
	// Every record is attached to a live lease with the TTL it asked for.
	for _, r := range snap.Records {
		gr, err := raw.Get(ctx, a.keys.slot(r.Key()))
		if err != nil || len(gr.Kvs) != 1 {
			t.Fatalf("%s: %v", r.Key(), err)
		}
		ttl, err := raw.TimeToLive(ctx, leaseID(gr.Kvs[0].Lease))
		if err != nil || ttl.TTL <= 0 {
			t.Fatalf("%s: lease %x: %+v %v", r.Key(), gr.Kvs[0].Lease, ttl, err)
		}
		var w int
		fmt.Sscanf(r.NodeID, "w%03d", &w)
		want := int64(60)
		if w%5 == 0 {
			want = 120
		}
		if ttl.GrantedTTL != want {
			t.Errorf("%s: lease granted for %ds, want %ds", r.Key(), ttl.GrantedTTL, want)
		}
	}
	total := a.Stats().LeaseGrants + b.Stats().LeaseGrants
	t.Logf("%d heartbeats, %d lease grants, %d keepalives, %d revokes", workers*rounds, total,
		a.Stats().LeaseKeepAlives+b.Stats().LeaseKeepAlives, a.Stats().LeaseRevokes+b.Stats().LeaseRevokes)
}

// TestLeaseExpiry checks that a record whose heartbeats stop disappears
// after its TTL: etcd deletes the key, watchers see EventDelete, and
// snapshots (both paths) leave it out.
func TestLeaseExpiry(t *testing.T) {
	testenv.SkipIfShort(t)
	e := testenv.StartEtcd(t, testenv.EtcdOptions{})
	raw := e.Client(t)
	ctx := testCtx(t)
	s := newStore(t, optionsFor(e, true))
	cid := uniqueCluster(t)
	res, err := s.UpsertNode(ctx, record(cid, cluster.RoleWorker, "w", "i", 1), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	slot := s.keys.slot(cluster.Key{ClusterID: cid, Role: cluster.RoleWorker, NodeID: "w"})
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := s.Watch(wctx, cid, res.Revision)
	start := time.Now()
	select {
	case b := <-ch:
		if b.Err != nil || len(b.Events) != 1 || b.Events[0].Type != state.EventDelete {
			t.Fatalf("batch %+v, want one delete", b)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no delete event 15s after a 1s lease")
	}
	if el := time.Since(start); el < 500*time.Millisecond {
		t.Fatalf("deleted after %s, before the TTL", el)
	}
	gr, err := raw.Get(ctx, slot)
	if err != nil || len(gr.Kvs) != 0 {
		t.Fatalf("key still present: %v %v", gr.Kvs, err)
	}
	for _, cache := range []bool{true, false} {
		st := s
		if !cache {
			st = newStore(t, optionsFor(e, false))
		}
		snap, err := st.Snapshot(ctx, cid)
		if err != nil || len(snap.Records) != 0 {
			t.Fatalf("cache=%t: snapshot %+v %v", cache, snap, err)
		}
	}
	// The same incarnation comes back: a fresh lease, not the dead one.
	res, err = s.UpsertNode(ctx, record(cid, cluster.RoleWorker, "w", "i", 2), 30*time.Second)
	if err != nil || res.Decision != cluster.DecisionInsert {
		t.Fatalf("after expiry: %+v %v", res, err)
	}
}

// TestNoAgeFilter checks that a snapshot holds every record etcd holds,
// whatever this store's clock says: a record older than its lease TTL on
// the reader's clock (here: the clock runs ahead) stays until etcd's own
// lease deletes it, so coordinators reading one revision agree.
func TestNoAgeFilter(t *testing.T) {
	testenv.SkipIfShort(t)
	e := testenv.StartEtcd(t, testenv.EtcdOptions{})
	ctx := testCtx(t)
	for _, cache := range []bool{false, true} {
		var mu sync.Mutex
		now := time.Now()
		o := optionsFor(e, cache)
		o.Clock = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		s := newStore(t, o)
		if cache {
			waitCacheReady(t, s)
		}
		cid := uniqueCluster(t)
		if _, err := s.UpsertNode(ctx, record(cid, cluster.RoleWorker, "w", "i", 1), 30*time.Second); err != nil {
			t.Fatal(err)
		}
		if snap, err := s.Snapshot(ctx, cid); err != nil || len(snap.Records) != 1 {
			t.Fatalf("cache=%t fresh: %+v %v", cache, snap, err)
		}
		mu.Lock()
		now = now.Add(31 * time.Second)
		mu.Unlock()
		if snap, err := s.Snapshot(ctx, cid); err != nil || len(snap.Records) != 1 {
			t.Fatalf("cache=%t, 31 s later on the reader's clock: %+v %v; want the record etcd still holds", cache, snap, err)
		}
	}
}
