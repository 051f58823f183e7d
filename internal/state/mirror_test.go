package state

import (
	"slices"
	"testing"

	"github.com/talonhq/talon/internal/cluster"
)

type testEntry struct {
	name string
	key  cluster.Key
	rec  *cluster.Record
}

func (e *testEntry) MirrorName() string     { return e.name }
func (e *testEntry) MirrorKey() cluster.Key { return e.key }

func entry(name, clusterID string, role cluster.Role, node string) *testEntry {
	k := cluster.Key{ClusterID: clusterID, Role: role, NodeID: node}
	return &testEntry{name: name, key: k, rec: &cluster.Record{ClusterID: clusterID, Role: role, NodeID: node}}
}

// TestMirror: entries come out per cluster in snapshot order (role, node,
// name) through any mix of Reset, Put and Delete; a cluster's list is
// built once per change and shared in between; one the builder does not
// keep is built every time.
func TestMirror(t *testing.T) {
	m := NewMirror[*testEntry]()
	builds := 0
	build := func(es []*testEntry) ([]*cluster.Record, bool) {
		builds++
		recs := make([]*cluster.Record, len(es))
		for i, e := range es {
			recs[i] = e.rec
		}
		return recs, true
	}
	nodes := func(recs []*cluster.Record) []string {
		var out []string
		for _, r := range recs {
			out = append(out, string(r.Role)+"/"+r.NodeID)
		}
		return out
	}
	m.Reset([]*testEntry{entry("k3", "a", cluster.RoleWorker, "w2"), entry("k1", "a", cluster.RoleCoordinator, "c1"), entry("k2", "a", cluster.RoleWorker, "w1"), entry("k9", "b", cluster.RoleWorker, "w1")})
	first := m.Records("a", build)
	if got, want := nodes(first), []string{"coordinator/c1", "worker/w1", "worker/w2"}; !slices.Equal(got, want) {
		t.Fatalf("after Reset: %v, want %v", got, want)
	}
	if again := m.Records("a", build); &again[0] != &first[0] || builds != 1 {
		t.Fatalf("unchanged cluster rebuilt (%d builds)", builds)
	}
	m.Put(entry("k4", "b", cluster.RoleWorker, "w0")) // another cluster's change
	if m.Records("a", build); builds != 1 {
		t.Fatalf("a change in cluster b rebuilt cluster a's list")
	}
	m.Put(entry("k0", "a", cluster.RoleWorker, "w15"))
	m.Delete("k2")
	m.Put(entry("k3", "a", cluster.RoleWorker, "w2")) // replaced in place
	if got, want := nodes(m.Records("a", build)), []string{"coordinator/c1", "worker/w15", "worker/w2"}; !slices.Equal(got, want) || builds != 2 {
		t.Fatalf("after Put and Delete: %v (%d builds), want %v built once more", got, builds, want)
	}
	if got, want := nodes(m.Records("b", build)), []string{"worker/w0", "worker/w1"}; !slices.Equal(got, want) {
		t.Fatalf("cluster b: %v, want %v", got, want)
	}
	if e, ok := m.Get("k0"); !ok || e.key.NodeID != "w15" {
		t.Fatalf("Get(k0) = %v, %v", e, ok)
	}
	m.Delete("k9")
	m.Delete("k4")
	if got := m.Records("b", build); len(got) != 0 {
		t.Fatalf("emptied cluster b: %v", nodes(got))
	}
	before := builds
	m.Reset([]*testEntry{entry("k1", "a", cluster.RoleCoordinator, "c1")})
	if got := nodes(m.Records("a", build)); !slices.Equal(got, []string{"coordinator/c1"}) || builds != before+1 {
		t.Fatalf("after a second Reset: %v (%d builds, want %d)", got, builds, before+1)
	}
	n := 0
	m.Entries(func(*testEntry) { n++ })
	if n != 1 {
		t.Fatalf("Entries visited %d, want 1", n)
	}
	keepNone := func(es []*testEntry) ([]*cluster.Record, bool) { builds++; return nil, false }
	m.Put(entry("k5", "a", cluster.RoleWorker, "w5")) // the kept list is stale now
	before = builds
	m.Records("a", keepNone)
	m.Records("a", keepNone)
	if builds != before+2 {
		t.Fatalf("a list the builder does not keep was reused")
	}
}
