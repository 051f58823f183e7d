package placement

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// workers returns n worker nodes w-0000.. with distinct addresses.
func workers(n int) []Node {
	nodes := make([]Node, n)
	for i := range nodes {
		nodes[i] = Node{ID: fmt.Sprintf("w-%04d", i), Address: fmt.Sprintf("10.0.%d.%d:7070", i/250, i%250+1)}
	}
	return nodes
}

// mustNew builds a table or fails the test.
func mustNew(t testing.TB, nodes []Node) *Table {
	t.Helper()
	tbl, err := New(nodes)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return tbl
}

// shuffled returns a shuffled copy of nodes, deterministic per seed.
func shuffled(nodes []Node, seed uint64) []Node {
	out := slices.Clone(nodes)
	r := rand.New(rand.NewPCG(seed, seed^0x5eed))
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// keys returns n distinct keys shaped like block keys.
func keys(n int) []string {
	ks := make([]string, n)
	for i := range ks {
		ks[i] = fmt.Sprintf("bucket/object-%d/block-%d", i/16, i%16)
	}
	return ks
}

func ownerIDs(owners []Owner) []string {
	ids := make([]string, len(owners))
	for i, o := range owners {
		ids[i] = o.NodeID
	}
	return ids
}

func candidateOwners(cs []Candidate) []Owner {
	out := make([]Owner, len(cs))
	for i, c := range cs {
		out[i] = Owner{NodeID: c.NodeID, Address: c.Address}
	}
	return out
}
