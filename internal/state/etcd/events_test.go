package etcd

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/testenv"
)

// TestEventsAreLeasedRing: event keys live outside the records' range and
// share the lease of their 10-minute bucket, granted for an hour and ten
// minutes, so that etcd expires them on its own (and compaction removes
// them from history); a new bucket takes a new lease.
func TestEventsAreLeasedRing(t *testing.T) {
	testenv.SkipIfShort(t)
	e := testenv.StartEtcd(t, testenv.EtcdOptions{})
	now := time.Date(2026, 12, 4, 0, 1, 0, 0, time.UTC)
	o := optionsFor(e, false)
	o.Clock = func() time.Time { return now }
	s := newStore(t, o)
	raw := e.Client(t)
	clusterID := uniqueCluster(t)
	leaseOf := func(n int) clientv3.LeaseID {
		t.Helper()
		id := state.EventID(state.EventIdentity{ClusterID: clusterID, Type: "node_joined", NodeID: "w", Seq: uint64(n)})
		if created, err := s.AppendEvent(testCtx(t), state.NodeEvent{ID: id, ClusterID: clusterID, Time: now, Type: "node_joined", NodeID: "w"}); err != nil || !created {
			t.Fatalf("AppendEvent %d: created %t, %v", n, created, err)
		}
		resp, err := raw.Get(testCtx(t), DefaultPrefix+"/events/"+clusterID+"/"+id)
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("event key %d: %v, %d keys", n, err, len(resp.Kvs))
		}
		return clientv3.LeaseID(resp.Kvs[0].Lease)
	}
	first, second := leaseOf(1), leaseOf(2)
	if first == 0 || first != second {
		t.Fatalf("events of one bucket on leases %x and %x, want one shared lease", first, second)
	}
	ttl, err := raw.TimeToLive(testCtx(t), first)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(eventLeaseTTL / time.Second); ttl.GrantedTTL != want {
		t.Fatalf("event lease granted for %ds, want %ds", ttl.GrantedTTL, want)
	}
	now = now.Add(eventLeaseBucket)
	if third := leaseOf(3); third == first {
		t.Fatal("the next bucket's event is on the previous bucket's lease")
	}
	snap, err := s.Snapshot(testCtx(t), clusterID)
	if err != nil || len(snap.Records) != 0 {
		t.Fatalf("Snapshot sees %d records (%v), want none: events are not records", len(snap.Records), err)
	}
}
