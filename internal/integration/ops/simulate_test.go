package ops

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/talonhq/talon/internal/cli/placement/simulate"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// simulateSamples keeps the placement reads within the admin listener's
// rate limit (100/s, burst 200) per coordinator and side.
const simulateSamples = 150

// ownersOn asks coordinator p for the owners of every sample key, and
// checks each answer names version.
func ownersOn(t *testing.T, p *talontest.Proc, replicas int, version string) [][]string {
	t.Helper()
	api := talontest.OpsAPI(t, p)
	out := make([][]string, simulateSamples)
	for i := range out {
		pl, err := api.Placement(context.Background(), simulate.SampleKey(i), replicas)
		if err != nil {
			t.Fatalf("%s: placement of %s: %v", p.Name, simulate.SampleKey(i), err)
		}
		if pl.PlacementVersion != version {
			t.Fatalf("%s answered placement version %s for %s, the simulation predicted %s", p.Name, pl.PlacementVersion, simulate.SampleKey(i), version)
		}
		for _, o := range pl.Owners {
			out[i] = append(out[i], o.NodeID)
		}
		slices.Sort(out[i])
	}
	return out
}

// checkSimulateDrain runs placement simulate --drain w-3, drains w-3 for
// real and compares the prediction with what both coordinators answer for
// the same sample keys before and after: the placement versions, the
// blocks whose owners changed (exactly) and every worker's load.
func checkSimulateDrain(t *testing.T, servers []string, coords []*talontest.Proc, all []string) {
	const replicas = 2
	code, stdout, stderr := talontest.Ctl(t, servers, "placement", "simulate", "--drain", "w-3", "--replicas", "2",
		"--samples", "150", "-o", "json")
	var res simulate.Result
	if code != 0 || json.Unmarshal([]byte(stdout), &res) != nil {
		t.Fatalf("simulate: exit %d\n%s\n%s", code, stdout, stderr)
	}
	before := ownersOn(t, coords[0], replicas, res.Before.PlacementVersion)
	if other := ownersOn(t, coords[1], replicas, res.Before.PlacementVersion); !slices.EqualFunc(before, other, slices.Equal) {
		t.Fatal("the coordinators disagree on the owners before the drain")
	}
	if code, stdout, stderr := talontest.Ctl(t, servers, "nodes", "drain", "w-3", "--drain-timeout", "60s"); code != 0 {
		t.Fatalf("drain: exit %d\n%s\n%s", code, stdout, stderr)
	}
	defer func() {
		talontest.Ctl(t, servers, "nodes", "uncordon", "w-3")
		testsupport.WaitFor(t, 10*opsHeartbeat, "w-3 back in placement", func() bool {
			return slices.Equal(talontest.EligibleOn(t, coords[0]), all) && slices.Equal(talontest.EligibleOn(t, coords[1]), all)
		})
	}()
	for _, p := range coords {
		after := ownersOn(t, p, replicas, res.After.PlacementVersion)
		moved := 0
		loads := map[string][2]int{}
		for i := range after {
			if !slices.Equal(before[i], after[i]) {
				moved++
			}
			for _, id := range before[i] {
				l := loads[id]
				l[0]++
				loads[id] = l
			}
			for _, id := range after[i] {
				l := loads[id]
				l[1]++
				loads[id] = l
			}
		}
		if moved != res.MovedBlocks {
			t.Errorf("%s: the drain moved %d of %d sample blocks, the simulation predicted %d", p.Name, moved, simulateSamples, res.MovedBlocks)
		}
		for _, w := range res.Workers {
			if got := loads[w.NodeID]; got != [2]int{w.Before, w.After} {
				t.Errorf("%s: %s holds %d then %d copies, the simulation predicted %d then %d", p.Name, w.NodeID, got[0], got[1], w.Before, w.After)
			}
		}
		t.Logf("%s: drain of w-3 moved %d of %d blocks (%.1f%%), as predicted", p.Name, moved, simulateSamples, 100*res.MovedShare)
	}
}
