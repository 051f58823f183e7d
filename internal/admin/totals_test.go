package admin

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cluster"
)

func coordRecord(id string, ready bool) *cluster.Record {
	return &cluster.Record{ClusterID: clusterID, NodeID: id, Role: cluster.RoleCoordinator, IncarnationID: "inc-" + id, Ready: ready, AdminAddress: id + ".admin:7401"}
}

// TestPresenceNamesMissingCoordinators: issue 38, a coordinator that
// expired was invisible ("coordinators 1: 1 healthy, 1 ready").
func TestPresenceNamesMissingCoordinators(t *testing.T) {
	tt := newTotals()
	t0 := time.Unix(1_800_000_000, 0)
	both := []*cluster.Record{coordRecord("coord-a", true), coordRecord("coord-b", true)}
	if p := tt.presence(both, 2, t0); p.Present != 2 || p.Ready != 2 || !p.Complete || len(p.Missing) != 0 {
		t.Fatalf("both live: %+v", p)
	}
	one := both[:1]
	p := tt.presence(one, 2, t0.Add(time.Minute))
	if p.Present != 1 || p.Expected != 2 || p.Complete || !slices.Equal(apiv1.MissingNames(p.Missing), []string{"coord-b"}) || p.Missing[0].AdminAddress != "coord-b.admin:7401" || p.Missing[0].LastSeenUnixMs != t0.UnixMilli() {
		t.Fatalf("coord-b gone: %+v, want present 1 of 2, missing [coord-b]", p)
	}
	notReady := []*cluster.Record{coordRecord("coord-a", true), coordRecord("coord-b", false)}
	if p := tt.presence(notReady, 2, t0.Add(2*time.Minute)); p.Complete || p.Ready != 1 || len(p.Missing) != 0 {
		t.Fatalf("coord-b back, not ready: %+v", p)
	}
	// Scaled down to one: nothing is missing.
	if p := tt.presence(one, 1, t0.Add(3*time.Minute)); !p.Complete || len(p.Missing) != 0 {
		t.Fatalf("expected 1: %+v", p)
	}
	// A name gone for more than missingFor is forgotten.
	if p := tt.presence(one, 2, t0.Add(2*time.Minute+missingFor+time.Second)); len(p.Missing) != 0 {
		t.Fatalf("after %s: %+v, want coord-b forgotten", missingFor, p)
	}
	// Memory stays bounded whatever names come and go.
	for i := range 3 * maxSeenCoordinators {
		tt.presence([]*cluster.Record{coordRecord(fmt.Sprintf("c-%d", i), true)}, 1, t0.Add(4*time.Minute+time.Duration(i)*time.Millisecond))
	}
	if n := len(tt.seen); n > maxSeenCoordinators {
		t.Fatalf("%d coordinator names remembered, bound %d", n, maxSeenCoordinators)
	}
}

// TestCapacityRates: rates are over two status writes of one incarnation,
// a restart starts over, and workers gone are forgotten.
func TestCapacityRates(t *testing.T) {
	tt := newTotals()
	w := func(id, inc string, statusAt int64, req, bytes uint64) *cluster.Record {
		r := workerRecord(id, nil)
		r.IncarnationID, r.StatusAtUnixMs = inc, statusAt
		r.Capacity = cluster.Capacity{CapacityBytes: 100, ResidentBytes: 10}
		r.Counters = cluster.Counters{RequestsTotal: req, HitsTotal: req / 2, MissesTotal: req - req/2, BytesServedTotal: bytes}
		return r
	}
	c := tt.capacity([]*cluster.Record{w("w1", "a", 1000, 0, 0), w("w2", "a", 1000, 0, 0)})
	if c.RequestsPerSecond != nil || c.HitRatio != nil || c.CapacityBytes != 200 || c.ResidentBytes != 20 {
		t.Fatalf("first sight: %+v", c)
	}
	// w1 wrote its status 10 s later with 100 more requests; w2 did not.
	c = tt.capacity([]*cluster.Record{w("w1", "a", 11_000, 100, 1000), w("w2", "a", 1000, 0, 0)})
	if c.RequestsPerSecond == nil || *c.RequestsPerSecond != 10 || *c.BytesServedPerSecond != 100 || c.RateWorkers != 1 || *c.HitRatio != 0.5 {
		t.Fatalf("after w1's second write: %+v (req/s %v)", c, c.RequestsPerSecond)
	}
	// The same view again keeps the rate; an older one does not undo it.
	c = tt.capacity([]*cluster.Record{w("w1", "a", 1000, 0, 0), w("w2", "a", 1000, 0, 0)})
	if c.RequestsPerSecond == nil || *c.RequestsPerSecond != 10 {
		t.Fatalf("an older view: %+v", c)
	}
	// w1 restarted: no rate until its new incarnation wrote twice.
	c = tt.capacity([]*cluster.Record{w("w1", "b", 12_000, 5, 5)})
	if c.RequestsPerSecond != nil || c.Workers != 1 {
		t.Fatalf("after a restart: %+v", c)
	}
	if len(tt.status) != 1 {
		t.Fatalf("%d workers remembered, want only the live w1", len(tt.status))
	}
}

// TestAgreement: a coordinator's published placement against the
// answering one's (issue 38: top and the UI showed only the answering
// coordinator's).
func TestAgreement(t *testing.T) {
	const settle = 3 * time.Second
	now := int64(1_800_000_000_000)
	coord := func(id, pv string, eligible int64, publishedAgo time.Duration) *apiv1.Node {
		return &apiv1.Node{NodeID: id, Role: "coordinator", PlacementVersion: pv, EligibleWorkers: eligible, StatusAtUnixMs: now - publishedAgo.Milliseconds()}
	}
	for _, tc := range []struct {
		name string
		n    *apiv1.Node
		held time.Duration
		want string
	}{
		{"same placement", coord("b", "00000000000000aa", 3, time.Minute), time.Minute, "yes"},
		{"the answering one", coord("a", "00000000000000bb", 2, time.Minute), time.Minute, "yes"},
		{"differs, both settled", coord("b", "00000000000000bb", 3, time.Minute), time.Minute, "no"},
		{"eligible differs, both settled", coord("b", "00000000000000aa", 2, time.Minute), time.Minute, "no"},
		{"differs, ours is new", coord("b", "00000000000000bb", 3, time.Minute), time.Second, "-"},
		{"differs, theirs is new", coord("b", "00000000000000bb", 3, time.Second), time.Minute, "-"},
		{"publishes none", coord("b", "", 0, time.Minute), time.Minute, "-"},
		{"a worker", &apiv1.Node{NodeID: "w", Role: "worker"}, time.Minute, ""},
	} {
		if got := agreement(tc.n, "a", "00000000000000aa", 3, tc.held, settle, now); got != tc.want {
			t.Errorf("%s: agreement = %q, want %q", tc.name, got, tc.want)
		}
	}
}
