package simulate

import (
	"fmt"
	"slices"
	"testing"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/placement"
)

func workers(n int) []placement.Node {
	out := make([]placement.Node, n)
	for i := range out {
		out[i] = placement.Node{ID: fmt.Sprintf("w-%d", i+1), Address: fmt.Sprintf("w-%d:7500", i+1)}
	}
	return out
}

func loadOf(r *Result, id string) WorkerLoad {
	for _, w := range r.Workers {
		if w.NodeID == id {
			return w
		}
	}
	return WorkerLoad{}
}

// TestSimulateMovesOnlyWhatHRWMoves checks the model against the HRW
// property and against placement.Table directly: a drain moves exactly
// the blocks the drained worker owned, an addition exactly those the new
// worker wins, and nothing else changes owner.
func TestSimulateMovesOnlyWhatHRWMoves(t *testing.T) {
	for _, tt := range []struct {
		name     string
		plan     Plan
		movedVia func(r *Result) int // the blocks that must move
	}{
		{"drain one, 1 replica", Plan{Drain: []string{"w-3"}, Replicas: 1, Samples: 5000},
			func(r *Result) int { return loadOf(r, "w-3").Before }},
		{"drain one, 3 replicas", Plan{Drain: []string{"w-3"}, Replicas: 3, Samples: 5000},
			func(r *Result) int { return loadOf(r, "w-3").Before }},
		{"add two, 1 replica", Plan{Add: []string{"new-1", "new-2"}, Replicas: 1, Samples: 5000},
			func(r *Result) int { return loadOf(r, "new-1").After + loadOf(r, "new-2").After }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Simulate(workers(6), tt.plan)
			if err != nil {
				t.Fatal(err)
			}
			if want := tt.movedVia(r); r.MovedCopies != want {
				t.Errorf("moved copies %d, want %d", r.MovedCopies, want)
			}
			if tt.plan.Replicas == 1 && r.MovedBlocks != r.MovedCopies {
				t.Errorf("one replica: moved blocks %d != moved copies %d", r.MovedBlocks, r.MovedCopies)
			}
			sumB, sumA := 0, 0
			for _, w := range r.Workers {
				sumB, sumA = sumB+w.Before, sumA+w.After
				// A drain only gives, an addition only takes.
				if len(tt.plan.Add) == 0 && w.Change < 0 && !w.Drained {
					t.Errorf("%s lost blocks (%d) without being drained", w.NodeID, w.Change)
				}
				if len(tt.plan.Add) > 0 && w.Change > 0 && !w.Added {
					t.Errorf("%s gained blocks (%d) from an addition", w.NodeID, w.Change)
				}
			}
			if total := tt.plan.Samples * tt.plan.Replicas; sumB != total || sumA != total {
				t.Errorf("copies before %d, after %d, want %d", sumB, sumA, total)
			}
			if !slices.IsSortedFunc(r.Workers, func(a, b WorkerLoad) int { return b.Change - a.Change }) {
				t.Errorf("workers not sorted by gain: %+v", r.Workers)
			}
		})
	}
}

// TestSimulateIsTheCoordinatorsPlacement: the owners behind the counts
// are placement.Table's, and the versions are the tables'.
func TestSimulateIsTheCoordinatorsPlacement(t *testing.T) {
	ws := workers(4)
	r, err := Simulate(ws, Plan{Drain: []string{"w-2"}, Replicas: 2, Samples: 300})
	if err != nil {
		t.Fatal(err)
	}
	before, _ := placement.New(ws)
	after, _ := placement.New(slices.DeleteFunc(slices.Clone(ws), func(n placement.Node) bool { return n.ID == "w-2" }))
	counts := map[string]int{}
	moved := 0
	for i := range 300 {
		b, a := before.Lookup(SampleKey(i), 2), after.Lookup(SampleKey(i), 2)
		if !slices.Equal(ids(b), ids(a)) && !sameSet(ids(b), ids(a)) {
			moved++
		}
		for _, o := range a {
			counts[o.NodeID]++
		}
	}
	if r.MovedBlocks != moved {
		t.Errorf("moved %d, tables say %d", r.MovedBlocks, moved)
	}
	for id, n := range counts {
		if loadOf(r, id).After != n {
			t.Errorf("%s after %d, tables say %d", id, loadOf(r, id).After, n)
		}
	}
	if r.Before.PlacementVersion != apiv1.FormatU64(uint64(before.Version())) || r.After.PlacementVersion != apiv1.FormatU64(uint64(after.Version())) {
		t.Errorf("versions %s -> %s", r.Before.PlacementVersion, r.After.PlacementVersion)
	}
	if r.Before.Workers != 4 || r.After.Workers != 3 || r.After.Load.Mean != 200 {
		t.Errorf("sides %+v %+v", r.Before, r.After)
	}
}

func ids(os []placement.Owner) []string {
	out := make([]string, len(os))
	for i, o := range os {
		out[i] = o.NodeID
	}
	return out
}

func sameSet(a, b []string) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(s string) bool { return !slices.Contains(b, s) })
}

func TestSimulateRefusesUnknownChanges(t *testing.T) {
	if _, err := Simulate(workers(3), Plan{Drain: []string{"w-9"}, Replicas: 1, Samples: 1}); err == nil {
		t.Error("draining a worker that is not eligible was accepted")
	}
	if _, err := Simulate(workers(3), Plan{Add: []string{"w-1"}, Replicas: 1, Samples: 1}); err == nil {
		t.Error("adding an eligible worker's ID was accepted")
	}
}

func TestSpread(t *testing.T) {
	l := spread([]int{2, 4, 4, 4, 5, 5, 7, 9})
	if l.Min != 2 || l.Max != 9 || l.Mean != 5 || l.Stddev != 2 {
		t.Errorf("spread %+v", l)
	}
}

// TestEligibleFollowsTheCoordinatorsRule: the API's nodes rebuild records
// that placement.Eligible judges as the coordinators do.
func TestEligibleFollowsTheCoordinatorsRule(t *testing.T) {
	nodes := []apiv1.Node{
		{NodeID: "ok", Role: "worker", Address: "a:1", Health: "healthy", Ready: true},
		{NodeID: "degraded", Role: "worker", Address: "a:2", Health: "degraded", Ready: true},
		{NodeID: "late", Role: "worker", Address: "a:3", Health: "unhealthy", ReportedHealth: "healthy", Ready: true},
		{NodeID: "cordoned", Role: "worker", Address: "a:4", Health: "healthy", Ready: true, Cordon: &apiv1.NodeCordon{By: "ops"}},
		{NodeID: "uncordon-pending", Role: "worker", Address: "a:5", Health: "healthy", NotReadyReason: "cordoned"},
		{NodeID: "not-ready", Role: "worker", Address: "a:6", Health: "healthy"},
		{NodeID: "revoked", Role: "worker", Address: "a:7", Health: "healthy", Ready: true, Revocation: &apiv1.NodeRevocation{By: "c"}},
		{NodeID: "coord", Role: "coordinator", Address: "a:8", Health: "healthy", Ready: true},
	}
	el, ex := Eligible(nodes)
	var got []string
	for _, n := range el {
		got = append(got, n.ID)
	}
	if want := []string{"degraded", "ok", "uncordon-pending"}; !slices.Equal(got, want) {
		t.Errorf("eligible %v, want %v", got, want)
	}
	if len(ex) != 4 {
		t.Errorf("excluded %+v", ex)
	}
}
