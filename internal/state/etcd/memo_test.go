package etcd

import (
	"context"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/testenv"
)

// TestDecodeOncePerVersion checks the heartbeat path's decode budget: a
// store with the snapshot cache and a Watch open decodes none of the
// versions it wrote itself, and each version another store wrote once,
// although both its cache and its Watch deliver every version. Records it
// hands out are equal to what was written, with its own observation time.
func TestDecodeOncePerVersion(t *testing.T) {
	testenv.SkipIfShort(t)
	e := testenv.StartEtcd(t, testenv.EtcdOptions{})
	ctx := testCtx(t)
	a := newStore(t, optionsFor(e, true))
	b := newStore(t, optionsFor(e, true))
	cid := uniqueCluster(t)
	waitCacheReady(t, a)
	waitCacheReady(t, b)

	start, err := a.Snapshot(ctx, cid)
	if err != nil {
		t.Fatal(err)
	}
	const writes = 20
	own := record(cid, cluster.RoleWorker, "own", "i", 0)
	foreign := record(cid, cluster.RoleWorker, "foreign", "j", 0)
	before := a.Stats().RecordDecodes
	for i := range writes {
		own.HeartbeatSeq, foreign.HeartbeatSeq = uint64(i+1), uint64(i+1)
		if _, err := a.UpsertNode(ctx, own, time.Minute); err != nil {
			t.Fatal(err)
		}
		if _, err := b.UpsertNode(ctx, foreign, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	// A snapshot waits until the cache has applied every write (it is
	// linearizable). A watch from before the writes then replays them all:
	// the cache decoded them first, so the two never race for a version.
	snap, err := a.Snapshot(ctx, cid)
	if err != nil || len(snap.Records) != 2 {
		t.Fatalf("snapshot %+v %v", snap, err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := a.Watch(wctx, cid, start.Revision)
	seen := map[string]uint64{}
	for seen["foreign"] < writes || seen["own"] < writes {
		select {
		case batch := <-ch:
			if batch.Err != nil {
				t.Fatal(batch.Err)
			}
			for _, ev := range batch.Events {
				if ev.Record == nil {
					t.Fatalf("event without a record: %+v", ev)
				}
				seen[ev.Key.NodeID] = ev.Record.HeartbeatSeq
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("watch delivered %v of %d writes each", seen, writes)
		}
	}
	got := a.Stats().RecordDecodes - before
	// Own versions: never. Foreign ones: once. Two versions may share a
	// memo bucket (the memo is a cache), which costs a decode: tolerated.
	// Without the memo it is 4 per pair of writes.
	if got < writes || got > writes+writes/4 {
		t.Fatalf("%d decodes for %d own and %d foreign versions delivered to a cache and a watch: want %d (own never, foreign once), give or take a shared memo bucket", got, writes, writes, writes)
	}
	for _, r := range snap.Records {
		if r.HeartbeatSeq != writes || r.UpdatedAtUnixMs == 0 {
			t.Fatalf("record %+v: want seq %d and an observation time", r, writes)
		}
	}
}
