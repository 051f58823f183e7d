package coordinator_test

import (
	"context"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/coordinator"
	"github.com/talonhq/talon/internal/protocol"
	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/state/memory"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/coordtest"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// TestPersistedCordonSurvivesReregistration is issue 47's finding: a
// worker whose cordon an operator persisted deregisters and registers
// again, with a new incarnation and a record that carries no cordon. The
// new record must be born cordoned (out of placement from its first
// version); on the old code it registered uncordoned. Uncordon lifts the
// persisted cordon, so the next registration is uncordoned.
func TestPersistedCordonSurvivesReregistration(t *testing.T) {
	store := memory.New(memory.Options{})
	t.Cleanup(func() { store.Close() })
	timing := cluster.Timing{HeartbeatInterval: 100 * time.Millisecond, UnhealthyAfter: time.Second, LeaseTTL: time.Hour}
	c := coordtest.Start(t, coordtest.Options{ClusterID: "it", Store: store, Timing: timing, WaitReady: true, FrozenLiveness: true})
	conn := talontest.Conn(t, c.ControlAddr)
	register := func(incarnation string) {
		t.Helper()
		rec := talontest.SimRecord(0)
		rec.IncarnationID = incarnation
		msg, err := protocol.NewRegister(rec)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := conn.Call(context.Background(), msg)
		if a, ok := resp.(*protocol.Ack); err != nil || !ok || a.Outcome != protocol.OutcomeAccepted {
			t.Fatalf("register %s: %v, %v", incarnation, resp, err)
		}
	}
	deregister := func(incarnation string) {
		t.Helper()
		resp, err := conn.Call(context.Background(), &protocol.Deregister{ClusterID: "it", Role: cluster.RoleWorker, NodeID: "w-sim", IncarnationID: incarnation})
		if a, ok := resp.(*protocol.Ack); err != nil || !ok || a.Outcome != protocol.OutcomeAccepted {
			t.Fatalf("deregister %s: %v, %v", incarnation, resp, err)
		}
	}
	stored := func() *cluster.Record {
		t.Helper()
		snap, err := store.Snapshot(context.Background(), "it")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range snap.Records {
			if r.NodeID == "w-sim" {
				return r
			}
		}
		return nil
	}
	register("sim-1")
	testsupport.WaitFor(t, 5*time.Second, "w-sim in the view", func() bool {
		_, err := c.SetCordon(context.Background(), coordinator.CordonRequest{NodeID: "w-sim", On: true, Persist: true, By: "ops"})
		return err == nil
	})
	if r := stored(); r == nil || !r.Cordoned() || !r.CordonPersist {
		t.Fatalf("after cordon --persist the record is %+v; want cordoned, persisted", r)
	}
	deregister("sim-1")
	testsupport.WaitFor(t, 5*time.Second, "w-sim gone from the view", func() bool {
		_, _, _ = c.Lookup(context.Background(), "k#0", 1)
		v := c.LastGood()
		return v != nil && stored() == nil
	})
	_, _, _ = c.Lookup(context.Background(), "k#0", 1)
	register("sim-2")
	r := stored()
	if r == nil || !r.Cordoned() || r.CordonedBy != "ops" || !r.CordonPersist {
		t.Fatalf("re-registered after deregistering, the record is %+v; want born cordoned by ops (the persisted cordon)", r)
	}
	if _, err := c.SetCordon(context.Background(), coordinator.CordonRequest{NodeID: "w-sim", On: false, By: "ops"}); err != nil {
		t.Fatalf("uncordon: %v", err)
	}
	if _, found, _ := store.PersistedCordon(context.Background(), r.Key()); found {
		t.Fatal("uncordon left the persisted cordon")
	}
	deregister("sim-2")
	testsupport.WaitFor(t, 5*time.Second, "w-sim gone again", func() bool {
		_, _, _ = c.Lookup(context.Background(), "k#0", 1)
		return stored() == nil
	})
	_, _, _ = c.Lookup(context.Background(), "k#0", 1)
	register("sim-3")
	if r := stored(); r == nil || r.Cordoned() {
		t.Fatalf("after uncordon the next registration is %+v; want uncordoned", r)
	}
	var _ state.CordonLog = store
}
