package etcd

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/testenv"
)

// TestRenewalLog publishes two coordinators' batches on a real etcd and
// reads them the way a peer does, with a watch: its own batch skipped,
// every batch of the other delivered at once, nothing in the records'
// snapshot, and the key gone with its lease when the publisher stops.
func TestRenewalLog(t *testing.T) {
	testenv.SkipIfShort(t)
	e := testenv.StartEtcd(t, testenv.EtcdOptions{})
	a, b := newStore(t, optionsFor(e, true)), newStore(t, optionsFor(e, false))
	clusterID := uniqueCluster(t)
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	watched := b.WatchRenewals(ctx, clusterID, "coord-b")
	time.Sleep(200 * time.Millisecond) // the watch is established
	at := time.Now().UnixMilli()
	w1 := state.Renewal{Role: cluster.RoleWorker, NodeID: "w1", Incarnation: state.IncarnationTag("i1"), AtUnixMs: at}
	w2 := state.Renewal{Role: cluster.RoleWorker, NodeID: "w2", Incarnation: state.IncarnationTag("i2"), AtUnixMs: at + 5}
	next := func(want state.Renewal) {
		t.Helper()
		select {
		case got, ok := <-watched:
			if !ok || len(got) != 1 || got[0] != want {
				t.Fatalf("coord-b's watch delivered %+v (open %t); want %+v", got, ok, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("coord-b's watch delivered nothing in 5s; want %+v", want)
		}
	}
	if err := b.PublishRenewals(testCtx(t), clusterID, "coord-b", []state.Renewal{w2}, 3*time.Second); err != nil {
		t.Fatalf("PublishRenewals b: %v", err)
	}
	if err := a.PublishRenewals(testCtx(t), clusterID, "coord-a", []state.Renewal{w1}, 3*time.Second); err != nil {
		t.Fatalf("PublishRenewals a: %v", err)
	}
	next(w1) // coord-b's own batch is skipped
	w1.AtUnixMs += 1000
	if err := a.PublishRenewals(testCtx(t), clusterID, "coord-a", []state.Renewal{w1}, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	next(w1)
	if snap, err := a.Snapshot(testCtx(t), clusterID); err != nil || len(snap.Records) != 0 {
		t.Fatalf("Snapshot sees %d records (%v), want none: renewal batches are not records", len(snap.Records), err)
	}
	raw := e.Client(t)
	resp, err := raw.Get(testCtx(t), DefaultPrefix+"/renewals/"+clusterID+"/coord-a")
	if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].Lease == 0 {
		t.Fatalf("coord-a's batch key: %v, %+v; want one key on a lease", err, resp.Kvs)
	}
	ttl, err := raw.TimeToLive(testCtx(t), clientv3.LeaseID(resp.Kvs[0].Lease))
	if err != nil || ttl.GrantedTTL != 3 {
		t.Fatalf("batch lease: %+v, %v; want granted for keepFor, 3s", ttl, err)
	}
	// A publisher that stops leaves nothing after keepFor.
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := raw.Get(testCtx(t), DefaultPrefix+"/renewals/"+clusterID+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err == nil && resp.Count == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("renewal batches still stored 15s after their 3s lease: %v, %v", resp, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := a.PublishRenewals(testCtx(t), clusterID, "bad id", nil, time.Second); err == nil {
		t.Fatal("PublishRenewals from an invalid coordinator ID was accepted")
	}
}
