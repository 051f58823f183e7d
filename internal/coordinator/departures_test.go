package coordinator

import (
	"testing"
	"time"

	"github.com/talonhq/talon/internal/cluster"
)

// TestDepartures: a deregistration is taken once, for its incarnation
// only, within departureTTL; the set stays within its bound.
func TestDepartures(t *testing.T) {
	now := time.Unix(1000, 0)
	k := cluster.Key{ClusterID: "c", Role: cluster.RoleWorker, NodeID: "w1"}
	d := newDepartures(2)
	d.note(k, "inc-a", now)
	if d.take(k, "inc-b", now) {
		t.Error("another incarnation's removal taken as the deregistration")
	}
	if !d.take(k, "inc-a", now.Add(time.Second)) {
		t.Error("the deregistration not taken")
	}
	if d.take(k, "inc-a", now.Add(time.Second)) {
		t.Error("the deregistration taken twice")
	}
	d.note(k, "inc-a", now)
	if d.take(k, "inc-a", now.Add(departureTTL+time.Second)) {
		t.Error("a deregistration older than departureTTL taken")
	}
	for i, n := range []string{"w1", "w2", "w3"} {
		d.note(cluster.Key{ClusterID: "c", Role: cluster.RoleWorker, NodeID: n}, "inc", now.Add(time.Duration(i)*time.Millisecond))
	}
	if len(d.left) != 2 {
		t.Errorf("%d departures kept, want the bound 2", len(d.left))
	}
	if d.take(cluster.Key{ClusterID: "c", Role: cluster.RoleWorker, NodeID: "w1"}, "inc", now) {
		t.Error("the oldest departure was not the one dropped")
	}
}
