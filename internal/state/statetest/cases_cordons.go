package statetest

import (
	"errors"
	"testing"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

// runCordons checks the persisted cordons (state.CordonLog), which every
// backend keeps: a cordon persisted through one store is read through a
// peer, outlives the node's record, is replaced and lifted by node, and
// is never seen by a reader of the records.
func runCordons(t *testing.T, newHarness Factory) {
	e := setup(t, newHarness)
	log, ok := e.s.(state.CordonLog)
	if !ok {
		t.Fatalf("%s store keeps no persisted cordons (state.CordonLog)", e.s.Backend())
	}
	peer, ok := e.h.Peer(t, 0).(state.CordonLog)
	if !ok {
		t.Fatal("the peer store keeps no persisted cordons")
	}
	key := cluster.Key{ClusterID: e.cluster, Role: cluster.RoleWorker, NodeID: "w-cordoned"}
	get := func(l state.CordonLog) (state.Cordon, bool) {
		t.Helper()
		c, found, err := l.PersistedCordon(e.ctx(), key)
		if err != nil {
			t.Fatalf("PersistedCordon: %v", err)
		}
		return c, found
	}
	if _, found := get(log); found {
		t.Fatal("a node never cordoned has a persisted cordon")
	}
	// The node's record comes and goes; the cordon stays.
	rec := e.rec(cluster.RoleWorker, key.NodeID, "inc-a", 1)
	e.upsert(rec, longTTL)
	first := state.Cordon{By: "ops", AtUnixMs: 1_700_000_000_000, Persist: true}
	if err := log.PersistCordon(e.ctx(), key, first); err != nil {
		t.Fatalf("PersistCordon: %v", err)
	}
	e.remove(rec.Key(), "inc-a")
	if c, found := get(peer); !found || c != first {
		t.Fatalf("the peer reads %+v, %t after the record was removed; want %+v", c, found, first)
	}
	if snap := e.snapshot(e.cluster); len(snap.Records) != 0 {
		t.Fatalf("a snapshot lists %d records; a persisted cordon is not a record", len(snap.Records))
	}
	second := state.Cordon{By: "oncall", AtUnixMs: first.AtUnixMs + 1, Persist: true}
	if err := peer.PersistCordon(e.ctx(), key, second); err != nil {
		t.Fatalf("PersistCordon again: %v", err)
	}
	if c, found := get(log); !found || c != second {
		t.Fatalf("after a second cordon: %+v, %t; want %+v", c, found, second)
	}
	if err := log.LiftCordon(e.ctx(), key); err != nil {
		t.Fatalf("LiftCordon: %v", err)
	}
	if _, found := get(peer); found {
		t.Fatal("a lifted cordon is still persisted")
	}
	if err := log.LiftCordon(e.ctx(), key); err != nil {
		t.Fatalf("LiftCordon of no cordon: %v; want nil", err)
	}
	for _, bad := range []struct {
		key cluster.Key
		c   state.Cordon
	}{
		{key, state.Cordon{}},
		{key, state.Cordon{By: "ops", AtUnixMs: -1}},
		{cluster.Key{ClusterID: e.cluster, Role: cluster.RoleCoordinator, NodeID: "c1"}, first},
		{cluster.Key{ClusterID: e.cluster, Role: cluster.RoleWorker, NodeID: "bad id"}, first},
	} {
		if err := log.PersistCordon(e.ctx(), bad.key, bad.c); !errors.Is(err, state.ErrInvalidRecord) {
			t.Errorf("PersistCordon(%v, %+v) = %v; want ErrInvalidRecord", bad.key, bad.c, err)
		}
	}
}
