package placement

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/talonhq/talon/internal/cluster"
)

func TestNewRejects(t *testing.T) {
	tests := []struct {
		name      string
		nodes     []Node
		sentinel  error
		wantParts []string
	}{
		{"duplicate id", []Node{{ID: "w-1", Address: "a:1"}, {ID: "w-2", Address: "b:1"}, {ID: "w-1", Address: "c:1"}},
			ErrDuplicateNode, []string{"nodes.id", `"w-1"`, "unique"}},
		{"duplicate id same address", []Node{{ID: "w-1", Address: "a:1"}, {ID: "w-1", Address: "a:1"}},
			ErrDuplicateNode, []string{`"w-1"`}},
		{"duplicate id different roles", []Node{{ID: "w-1", Address: "a:1"}, {ID: "w-1", Address: "a:1", Role: cluster.RoleCoordinator}},
			ErrDuplicateNode, []string{`"w-1"`}},
		{"empty id", []Node{{ID: "w-1", Address: "a:1"}, {ID: "", Address: "b:1"}},
			ErrInvalidNode, []string{"nodes[1].id", `""`, "must not be empty"}},
		{"empty address", []Node{{ID: "w-1", Address: ""}},
			ErrInvalidNode, []string{"nodes[0].address", "must not be empty", `"w-1"`}},
		{"unknown role", []Node{{ID: "w-1", Address: "a:1", Role: "cache"}},
			ErrInvalidNode, []string{"nodes[0].role", `"cache"`, "coordinator or worker"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tbl, err := New(tt.nodes)
			if err == nil {
				t.Fatalf("New = %d nodes, want an error", tbl.Len())
			}
			if !errors.Is(err, tt.sentinel) {
				t.Errorf("error %v does not wrap %v", err, tt.sentinel)
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Errorf("error %v is not a *FieldError", err)
			}
			for _, p := range tt.wantParts {
				if !strings.Contains(err.Error(), p) {
					t.Errorf("error %q does not mention %q", err, p)
				}
			}
		})
	}
}

func TestNewCanonicalizes(t *testing.T) {
	in := []Node{
		{ID: "w-3", Address: "c:1"},
		{ID: "w-1", Address: "a:1", Role: cluster.RoleWorker},
		{ID: "w-2", Address: "b:1"},
	}
	orig := slices.Clone(in)
	tbl := mustNew(t, in)
	if !slices.Equal(in, orig) {
		t.Fatalf("New modified its input: %v, was %v", in, orig)
	}
	want := []Node{
		{ID: "w-1", Address: "a:1", Role: cluster.RoleWorker},
		{ID: "w-2", Address: "b:1", Role: cluster.RoleWorker},
		{ID: "w-3", Address: "c:1", Role: cluster.RoleWorker},
	}
	if got := tbl.Nodes(); !slices.Equal(got, want) {
		t.Fatalf("Nodes() = %v, want %v", got, want)
	}
	if tbl.Len() != 3 {
		t.Fatalf("Len() = %d, want 3", tbl.Len())
	}
	got := tbl.Nodes()
	got[0].ID = "mutated"
	if tbl.Nodes()[0].ID != "w-1" {
		t.Fatal("Nodes() exposes the table's own slice")
	}
}

func TestLookupCounts(t *testing.T) {
	five, empty := mustNew(t, workers(5)), mustNew(t, nil)
	tests := []struct {
		name string
		tbl  *Table
		n    int
		want int
	}{
		{"negative", five, -1, 0},
		{"zero", five, 0, 0},
		{"one", five, 1, 1},
		{"three", five, 3, 3},
		{"all", five, 5, 5},
		{"more than len", five, 9, 5},
		{"empty table", empty, 3, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.tbl.Lookup("k", tt.n); len(got) != tt.want {
				t.Errorf("Lookup(k, %d) = %d owners, want %d", tt.n, len(got), tt.want)
			}
			if got := tt.tbl.LookupInto("k", tt.n, make([]Owner, 7)); len(got) != tt.want {
				t.Errorf("LookupInto(k, %d) = %d owners, want %d", tt.n, len(got), tt.want)
			}
		})
	}
	if got := empty.Explain("k"); len(got) != 0 {
		t.Errorf("Explain on an empty table = %v, want none", got)
	}
}

// TestLookupGolden pins the owners of fixed keys on a fixed table. The
// values were computed once by this implementation and are frozen: a Version
// names a membership, not the scoring function, so if this test fails the
// scoring (key hash, node hash, mix or tie-break) changed, and coordinators
// of different builds would return different owners under the same Version.
// Fix the code, do not update the values.
func TestLookupGolden(t *testing.T) {
	tbl := mustNew(t, workers(10))
	tests := []struct {
		key  string
		want []string
	}{
		{"", []string{"w-0007", "w-0008", "w-0004"}},
		{"a", []string{"w-0002", "w-0004", "w-0008"}},
		{"bucket/object/block-0", []string{"w-0004", "w-0003", "w-0008"}},
		{"bucket/object/block-1", []string{"w-0007", "w-0009", "w-0008"}},
		{"w-0003", []string{"w-0008", "w-0005", "w-0001"}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", tt.key), func(t *testing.T) {
			if got := ownerIDs(tbl.Lookup(tt.key, 3)); !slices.Equal(got, tt.want) {
				t.Fatalf("Lookup(%q, 3) = %q, want the pinned %q (the scoring function changed)", tt.key, got, tt.want)
			}
		})
	}
	if got, want := nodeHash("w-0000"), uint64(0x2be2b1ca3edbec75); got != want {
		t.Errorf("nodeHash(w-0000) = %#x, want the pinned %#x", got, want)
	}
	if got, want := tbl.Explain("a")[0].Score, uint64(0xe7167ffd9f0c3c71); got != want {
		t.Errorf("Explain(a)[0].Score = %#x, want the pinned %#x", got, want)
	}
}

func TestLookupDeterministicAndOrderIndependent(t *testing.T) {
	nodes := workers(37)
	ref := mustNew(t, nodes)
	for seed := uint64(1); seed <= 5; seed++ {
		t.Run(fmt.Sprintf("shuffle-%d", seed), func(t *testing.T) {
			other := mustNew(t, shuffled(nodes, seed))
			if other.Version() != ref.Version() {
				t.Fatalf("Version = %v for shuffled input, want %v", other.Version(), ref.Version())
			}
			for _, k := range keys(2000) {
				for _, n := range []int{1, 3, 37} {
					if got, want := other.Lookup(k, n), ref.Lookup(k, n); !slices.Equal(got, want) {
						t.Fatalf("Lookup(%q, %d) = %v for shuffled input, want %v", k, n, got, want)
					}
				}
			}
		})
	}
}

func TestLookupMatchesExplain(t *testing.T) {
	for _, size := range []int{1, 2, 3, 17, 40} {
		tbl := mustNew(t, workers(size))
		t.Run(fmt.Sprintf("workers=%d", size), func(t *testing.T) {
			for _, k := range keys(500) {
				ex := tbl.Explain(k)
				checkExplain(t, tbl, k, ex)
				for _, n := range []int{1, 2, 3, 5, 16, 17, 40} {
					want := candidateOwners(ex[:min(n, size)])
					if got := tbl.Lookup(k, n); !slices.Equal(got, want) {
						t.Fatalf("Lookup(%q, %d) = %v, want Explain prefix %v", k, n, got, want)
					}
				}
			}
		})
	}
}

// checkExplain checks that ex ranks every node of tbl once, ranks 1..Len,
// scores non-increasing and equal scores in ID order.
func checkExplain(t *testing.T, tbl *Table, key string, ex []Candidate) {
	t.Helper()
	if len(ex) != tbl.Len() {
		t.Fatalf("Explain(%q) has %d candidates, want %d", key, len(ex), tbl.Len())
	}
	seen := map[string]bool{}
	for i, c := range ex {
		if c.Rank != i+1 {
			t.Fatalf("Explain(%q)[%d].Rank = %d, want %d", key, i, c.Rank, i+1)
		}
		if seen[c.NodeID] {
			t.Fatalf("Explain(%q) lists %s twice", key, c.NodeID)
		}
		seen[c.NodeID] = true
		if i > 0 {
			p := ex[i-1]
			if p.Score < c.Score || p.Score == c.Score && p.NodeID > c.NodeID {
				t.Fatalf("Explain(%q) out of order at %d: %+v before %+v", key, i, p, c)
			}
		}
	}
}

// TestTiesBreakByID forces equal scores by giving two nodes the same hash:
// the lower ID must rank first in both Lookup and Explain, wherever the tie
// falls in the selection.
func TestTiesBreakByID(t *testing.T) {
	tbl := mustNew(t, workers(6))
	// w-0001 and w-0004 score identically for every key.
	tbl.hashes[4] = tbl.hashes[1]
	for _, k := range keys(300) {
		ex := tbl.Explain(k)
		checkExplain(t, tbl, k, ex)
		i1 := slices.IndexFunc(ex, func(c Candidate) bool { return c.NodeID == "w-0001" })
		i4 := slices.IndexFunc(ex, func(c Candidate) bool { return c.NodeID == "w-0004" })
		if i1+1 != i4 || ex[i1].Score != ex[i4].Score {
			t.Fatalf("key %q: tied w-0001 at rank %d and w-0004 at rank %d, want w-0001 immediately first", k, i1+1, i4+1)
		}
		for n := 1; n <= 6; n++ {
			if got, want := tbl.Lookup(k, n), candidateOwners(ex[:n]); !slices.Equal(got, want) {
				t.Fatalf("Lookup(%q, %d) = %v, want %v", k, n, ownerIDs(got), ownerIDs(want))
			}
		}
	}
}

func TestReplicasDistinct(t *testing.T) {
	tbl := mustNew(t, workers(12))
	for _, k := range keys(3000) {
		for _, n := range []int{2, 3, 5, 12} {
			owners := tbl.Lookup(k, n)
			ids := ownerIDs(owners)
			slices.Sort(ids)
			if len(slices.Compact(ids)) != n {
				t.Fatalf("Lookup(%q, %d) = %v has repeated owners", k, n, ownerIDs(owners))
			}
			for _, o := range owners {
				if want := tbl.nodes[slices.IndexFunc(tbl.nodes, func(nd Node) bool { return nd.ID == o.NodeID })].Address; o.Address != want {
					t.Fatalf("owner %s has address %s, want %s", o.NodeID, o.Address, want)
				}
			}
		}
	}
}

const replicas = 3

// TestMinimalDisruptionRemove checks the HRW property exactly: after one
// node leaves, every key's owners are its old ranking with that node struck
// out. So a key whose replicas did not include the node keeps them, in
// order, and only the departed node's slots move.
func TestMinimalDisruptionRemove(t *testing.T) {
	const size = 10
	nodes := workers(size)
	before := mustNew(t, nodes)
	for _, gone := range []int{0, 4, size - 1} {
		goneID := nodes[gone].ID
		t.Run("remove "+goneID, func(t *testing.T) {
			after := mustNew(t, slices.Delete(slices.Clone(nodes), gone, gone+1))
			movedPrimaries, ownedPrimaries := 0, 0
			for _, k := range keys(10000) {
				old := before.Explain(k)
				if old[0].NodeID == goneID {
					ownedPrimaries++
				}
				want := candidateOwners(slices.DeleteFunc(slices.Clone(old), func(c Candidate) bool { return c.NodeID == goneID })[:replicas])
				got := after.Lookup(k, replicas)
				if !slices.Equal(got, want) {
					t.Fatalf("key %q: owners after removing %s = %v, want %v", k, goneID, ownerIDs(got), ownerIDs(want))
				}
				if got[0].NodeID != old[0].NodeID {
					movedPrimaries++
				}
			}
			if movedPrimaries != ownedPrimaries {
				t.Fatalf("%d primaries moved, want exactly the %d %s owned", movedPrimaries, ownedPrimaries, goneID)
			}
		})
	}
}

// TestMinimalDisruptionAdd checks that a new node only takes keys (it never
// shuffles keys between existing nodes) and takes about 1/(N+1) of them.
func TestMinimalDisruptionAdd(t *testing.T) {
	const size, nkeys = 10, 10000
	nodes := workers(size)
	before := mustNew(t, nodes)
	added := Node{ID: "w-new", Address: "10.1.0.1:7070"}
	after := mustNew(t, append(slices.Clone(nodes), added))
	moved := 0
	for _, k := range keys(nkeys) {
		old, got := before.Lookup(k, replicas), after.Lookup(k, replicas)
		if got[0] != old[0] {
			if got[0].NodeID != added.ID {
				t.Fatalf("key %q: primary moved from %s to existing node %s", k, old[0].NodeID, got[0].NodeID)
			}
			moved++
		}
		// The new owners are the old ones with the new node inserted (or
		// unchanged when the new node ranks below them).
		want := old
		if i := slices.IndexFunc(got, func(o Owner) bool { return o.NodeID == added.ID }); i >= 0 {
			want = slices.Insert(slices.Clone(old[:replicas-1]), i, Owner{NodeID: added.ID, Address: added.Address})
		}
		if !slices.Equal(got, want) {
			t.Fatalf("key %q: owners after adding = %v, want %v", k, ownerIDs(got), ownerIDs(want))
		}
	}
	frac, ideal := float64(moved)/nkeys, 1.0/(size+1)
	if frac < 0.8*ideal || frac > 1.2*ideal {
		t.Fatalf("adding one node to %d moved %.4f of primaries, want about %.4f (within 20%%)", size, frac, ideal)
	}
	t.Logf("adding one node to %d moved %.4f of primaries (ideal %.4f)", size, frac, ideal)
}

// TestBalance checks that primaries and replica slots spread evenly. The
// keys are fixed, so the test is deterministic; the tolerance is several
// standard deviations of a fair split.
func TestBalance(t *testing.T) {
	const nkeys = 100000
	for _, size := range []int{3, 10, 50} {
		t.Run(fmt.Sprintf("workers=%d", size), func(t *testing.T) {
			tbl := mustNew(t, workers(size))
			primaries, slots := map[string]int{}, map[string]int{}
			buf := make([]Owner, 0, replicas)
			for _, k := range keys(nkeys) {
				owners := tbl.LookupInto(k, replicas, buf)
				primaries[owners[0].NodeID]++
				for _, o := range owners {
					slots[o.NodeID]++
				}
			}
			check := func(what string, counts map[string]int, mean float64, tol float64) {
				t.Helper()
				lo, hi := nkeys, 0
				for _, n := range tbl.nodes {
					c := counts[n.ID]
					lo, hi = min(lo, c), max(hi, c)
					if dev := (float64(c) - mean) / mean; dev < -tol || dev > tol {
						t.Errorf("%s: %s has %d, mean %.0f, deviation %.1f%% exceeds %.0f%%", what, n.ID, c, mean, 100*dev, 100*tol)
					}
				}
				t.Logf("%s: min %d max %d mean %.0f", what, lo, hi, mean)
			}
			// 50 workers: 2,000 primaries each, sd about 44 (2.2%); 10%
			// is over 4 sd. Smaller sizes have relatively smaller spread.
			check("primaries", primaries, float64(nkeys)/float64(size), 0.10)
			check("replica slots", slots, float64(nkeys*min(replicas, size))/float64(size), 0.10)
		})
	}
}

func TestLookupIntoDoesNotAllocate(t *testing.T) {
	tbl := mustNew(t, workers(100))
	dst := make([]Owner, 0, maxFastReplicas)
	for _, n := range []int{1, 3, maxFastReplicas} {
		allocs := testing.AllocsPerRun(100, func() {
			dst = tbl.LookupInto("bucket/object/block-7", n, dst)
		})
		if allocs != 0 {
			t.Errorf("LookupInto(n=%d) allocates %.1f times per call, want 0", n, allocs)
		}
	}
}

func TestLookupIntoReusesDst(t *testing.T) {
	tbl := mustNew(t, workers(20))
	dst := make([]Owner, 5, 8)
	got := tbl.LookupInto("k", 3, dst)
	if &got[0] != &dst[:1][0] {
		t.Fatal("LookupInto did not write into dst's backing array")
	}
	if want := tbl.Lookup("k", 3); !slices.Equal(got, want) {
		t.Fatalf("LookupInto = %v, want %v", got, want)
	}
}

// TestTableConcurrentUse exercises the "immutable, no locking" claim under
// the race detector: readers share one table.
func TestTableConcurrentUse(t *testing.T) {
	tbl := mustNew(t, workers(50))
	want := tbl.Lookup("shared", 3)
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := 0; g < 8; g++ {
		wg.Go(func() {
			buf := make([]Owner, 0, 3)
			for i := 0; i < 200; i++ {
				_ = tbl.Explain(fmt.Sprint(i))
				_ = tbl.Nodes()
				if got := tbl.LookupInto("shared", 3, buf); !slices.Equal(got, want) || tbl.Version() == EmptyVersion {
					errs <- fmt.Sprintf("concurrent LookupInto = %v, want %v", got, want)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
