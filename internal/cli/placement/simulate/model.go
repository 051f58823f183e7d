package simulate

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/placement"
)

// KeyFormat is the format of the sample keys: an object name and a block
// index, as clients name blocks.
const KeyFormat = "talon-simulate/object-%d#0"

// SampleKey is the i-th sample key.
func SampleKey(i int) string { return fmt.Sprintf(KeyFormat, i) }

// AddedAddress is the data address given to an added worker: placement
// ranks by node ID only, but the PlacementVersion hashes addresses too.
const AddedAddress = "simulated:0"

// Plan is what to simulate.
type Plan struct {
	Drain    []string // workers taken out of placement
	Add      []string // IDs of new workers
	Replicas int      // owners per block, at least 1
	Samples  int      // sample keys, at least 1
}

// Load is the spread of block copies over the workers.
type Load struct {
	Min    int     `json:"min"`
	Max    int     `json:"max"`
	Mean   float64 `json:"mean"`
	Stddev float64 `json:"stddev"`
}

// Side is placement before or after the change.
type Side struct {
	Workers          int    `json:"workers"`
	PlacementVersion string `json:"placementVersion"`
	Load             Load   `json:"load"`
}

// WorkerLoad is one worker's block copies (of the sample) before and after.
type WorkerLoad struct {
	NodeID string `json:"nodeId"`
	Before int    `json:"before"`
	After  int    `json:"after"`
	Change int    `json:"change"`
	// Added and Drained mark the workers the plan adds or drains.
	Added   bool `json:"added,omitempty"`
	Drained bool `json:"drained,omitempty"`
}

// Result is the simulation's answer (the -o json document).
type Result struct {
	Samples   int      `json:"samples"`
	KeyFormat string   `json:"keyFormat"`
	Replicas  int      `json:"replicas"`
	Drained   []string `json:"drained"`
	Added     []string `json:"added"`
	Before    Side     `json:"before"`
	After     Side     `json:"after"`
	// MovedBlocks is how many sample blocks have another owner set after;
	// MovedShare is that over Samples.
	MovedBlocks int     `json:"movedBlocks"`
	MovedShare  float64 `json:"movedShare"`
	// MovedCopies is how many block copies land on a worker that did not
	// hold them (a block whose one owner of three changed counts 1);
	// MovedCopyShare is that over Samples*Replicas.
	MovedCopies    int     `json:"movedCopies"`
	MovedCopyShare float64 `json:"movedCopyShare"`
	// Workers are every worker of either side, most gained first (then by
	// node ID).
	Workers []WorkerLoad `json:"workers"`
}

// Eligible returns the workers placement may choose among nodes, by the
// coordinators' own rule (placement.Eligible), and why the others are out.
func Eligible(nodes []apiv1.Node) ([]placement.Node, []placement.Exclusion) {
	recs := make([]*cluster.Record, 0, len(nodes))
	for i := range nodes {
		recs = append(recs, recordOf(&nodes[i]))
	}
	return placement.Eligible(recs)
}

// recordOf rebuilds the fields of a record that eligibility reads. Health
// is the API's effective health, so the record is never late.
func recordOf(n *apiv1.Node) *cluster.Record {
	r := &cluster.Record{
		NodeID: n.NodeID, Role: cluster.Role(n.Role), Address: n.Address,
		Health: cluster.Health(n.Health), Ready: n.Ready, NotReadyReason: n.NotReadyReason,
	}
	if n.Cordon != nil {
		r.CordonedBy = cmp.Or(n.Cordon.By, "(unknown)")
	}
	if n.Revocation != nil {
		r.RevokedBy = cmp.Or(n.Revocation.By, "(unknown)")
	}
	return r
}

// Simulate places the sample keys on the eligible workers before, and on
// them less plan.Drain plus plan.Add after, and compares. A drained worker
// must be eligible and an added one must not exist.
func Simulate(eligible []placement.Node, plan Plan) (*Result, error) {
	before, err := placement.New(eligible)
	if err != nil {
		return nil, err
	}
	after, err := afterTable(eligible, plan)
	if err != nil {
		return nil, err
	}
	res := &Result{Samples: plan.Samples, KeyFormat: KeyFormat, Replicas: plan.Replicas,
		Drained: nonNil(plan.Drain), Added: nonNil(plan.Add)}
	loads := map[string]*WorkerLoad{}
	load := func(id string) *WorkerLoad {
		if loads[id] == nil {
			loads[id] = &WorkerLoad{NodeID: id, Added: slices.Contains(plan.Add, id), Drained: slices.Contains(plan.Drain, id)}
		}
		return loads[id]
	}
	for _, n := range before.Nodes() {
		load(n.ID)
	}
	for _, n := range after.Nodes() {
		load(n.ID)
	}
	bo := make([]placement.Owner, 0, plan.Replicas)
	ao := make([]placement.Owner, 0, plan.Replicas)
	for i := range plan.Samples {
		key := SampleKey(i)
		bo = before.LookupInto(key, plan.Replicas, bo)
		ao = after.LookupInto(key, plan.Replicas, ao)
		for _, o := range bo {
			load(o.NodeID).Before++
		}
		moved := len(bo) != len(ao)
		for _, o := range ao {
			load(o.NodeID).After++
			if !containsOwner(bo, o.NodeID) {
				res.MovedCopies++
				moved = true
			}
		}
		if moved {
			res.MovedBlocks++
		}
	}
	res.MovedShare = float64(res.MovedBlocks) / float64(plan.Samples)
	res.MovedCopyShare = float64(res.MovedCopies) / float64(plan.Samples*plan.Replicas)
	for _, l := range loads {
		l.Change = l.After - l.Before
		res.Workers = append(res.Workers, *l)
	}
	slices.SortFunc(res.Workers, func(a, b WorkerLoad) int {
		return cmp.Or(cmp.Compare(b.Change, a.Change), cmp.Compare(a.NodeID, b.NodeID))
	})
	res.Before = side(before, res.Workers, func(w WorkerLoad) (int, bool) { return w.Before, !w.Added })
	res.After = side(after, res.Workers, func(w WorkerLoad) (int, bool) { return w.After, !w.Drained })
	return res, nil
}

// afterTable is the table of eligible less plan.Drain plus plan.Add.
func afterTable(eligible []placement.Node, plan Plan) (*placement.Table, error) {
	var nodes []placement.Node
	for _, id := range plan.Drain {
		if !slices.ContainsFunc(eligible, func(n placement.Node) bool { return n.ID == id }) {
			return nil, fmt.Errorf("--drain %s: not an eligible worker (absent, or already out of placement)", id)
		}
	}
	for _, n := range eligible {
		if !slices.Contains(plan.Drain, n.ID) {
			nodes = append(nodes, n)
		}
	}
	for _, id := range plan.Add {
		if slices.ContainsFunc(eligible, func(n placement.Node) bool { return n.ID == id }) {
			return nil, fmt.Errorf("added worker %s: a worker of that ID is already eligible", id)
		}
		nodes = append(nodes, placement.Node{ID: id, Address: AddedAddress, Role: cluster.RoleWorker})
	}
	return placement.New(nodes)
}

// side summarises one table: the load over its members.
func side(t *placement.Table, workers []WorkerLoad, of func(WorkerLoad) (int, bool)) Side {
	var counts []int
	for _, w := range workers {
		if n, member := of(w); member {
			counts = append(counts, n)
		}
	}
	return Side{Workers: t.Len(), PlacementVersion: apiv1.FormatU64(uint64(t.Version())), Load: spread(counts)}
}

// spread is the min, max, mean and population standard deviation of counts.
func spread(counts []int) Load {
	if len(counts) == 0 {
		return Load{}
	}
	l := Load{Min: slices.Min(counts), Max: slices.Max(counts)}
	sum := 0
	for _, c := range counts {
		sum += c
	}
	l.Mean = float64(sum) / float64(len(counts))
	var sq float64
	for _, c := range counts {
		d := float64(c) - l.Mean
		sq += d * d
	}
	l.Stddev = math.Sqrt(sq / float64(len(counts)))
	return l
}

func containsOwner(owners []placement.Owner, id string) bool {
	return slices.ContainsFunc(owners, func(o placement.Owner) bool { return o.NodeID == id })
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
