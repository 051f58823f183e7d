package etcd

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/testenv"
)

// TestCachedListReused checks that snapshots from the cache reuse the
// record list while nothing changed (a burst of lookups costs no pass over
// the records), rebuild it after a write, and keep it however far this
// store's clock moves.
func TestCachedListReused(t *testing.T) {
	testenv.SkipIfShort(t)
	e := testenv.StartEtcd(t, testenv.EtcdOptions{})
	ctx := testCtx(t)
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	o := optionsFor(e, true)
	o.Clock = func() time.Time { return time.Unix(0, now.Load()) }
	s := newStore(t, o)
	waitCacheReady(t, s)
	cid := uniqueCluster(t)
	for _, n := range []string{"a", "b"} {
		if _, err := s.UpsertNode(ctx, record(cid, cluster.RoleWorker, n, "i", 1), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	first, err := s.Snapshot(ctx, cid)
	if err != nil || len(first.Records) != 2 {
		t.Fatalf("snapshot %+v %v", first, err)
	}
	again, err := s.Snapshot(ctx, cid)
	if err != nil || len(again.Records) != 2 || &again.Records[0] != &first.Records[0] {
		t.Fatalf("unchanged cluster: a new list (%p, was %p), want the same one", again.Records, first.Records)
	}

	if _, err := s.UpsertNode(ctx, record(cid, cluster.RoleWorker, "a", "i", 2), time.Minute); err != nil {
		t.Fatal(err)
	}
	after, err := s.Snapshot(ctx, cid)
	if err != nil || len(after.Records) != 2 || after.Records[0].HeartbeatSeq != 2 {
		t.Fatalf("after a write: %+v %v, want a at seq 2", after, err)
	}

	// b's lease TTL passes by this store's clock (etcd's lease is still
	// alive): nothing changed in etcd, so b stays and the list is reused;
	// no reader's clock takes a record out.
	if _, err := s.UpsertNode(ctx, record(cid, cluster.RoleWorker, "a", "i", 3), 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	before, err := s.Snapshot(ctx, cid)
	if err != nil {
		t.Fatal(err)
	}
	now.Add(int64(61 * time.Second))
	late, err := s.Snapshot(ctx, cid)
	if err != nil || len(late.Records) != 2 || &late.Records[0] != &before.Records[0] {
		t.Fatalf("61s later on the store's clock: %+v %v, want both records in the same list", late, err)
	}
}
