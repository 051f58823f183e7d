package state

import (
	"cmp"
	"slices"
	"sync"

	"github.com/talonhq/talon/internal/cluster"
)

// MirrorEntry is what a watch-fed snapshot cache keeps per stored object:
// its name in the backend (an etcd key, a Lease name) and the slot it
// holds.
type MirrorEntry interface {
	comparable
	MirrorName() string
	MirrorKey() cluster.Key
}

// Mirror is the index both backends' watch-fed snapshot caches keep: their
// entries by name and, per cluster, in snapshot order (role, node ID, then
// name), with a count of the changes applied per cluster, so a cluster's
// record list is built once per change and shared by every snapshot in
// between (Records).
//
// Concurrency: the cache's own lock guards a Mirror; Reset, Put and Delete
// need it held for writing, Get, Entries and Records for reading at least
// (Records' memo has a lock of its own, so concurrent readers may build
// it).
type Mirror[E MirrorEntry] struct {
	byName   map[string]E
	clusters map[string][]E
	changes  map[string]uint64 // per cluster: changes applied

	memoMu sync.Mutex            // guards lists
	lists  map[string]mirrorList // per cluster: the record list last built
}

// mirrorList is one cluster's record list as built after changes.
type mirrorList struct {
	changes uint64
	recs    []*cluster.Record
}

// NewMirror returns an empty index.
func NewMirror[E MirrorEntry]() *Mirror[E] {
	return &Mirror[E]{byName: map[string]E{}, clusters: map[string][]E{}, changes: map[string]uint64{}, lists: map[string]mirrorList{}}
}

func compareMirror[E MirrorEntry](a, b E) int {
	ka, kb := a.MirrorKey(), b.MirrorKey()
	return cmp.Or(cmp.Compare(ka.Role, kb.Role), cmp.Compare(ka.NodeID, kb.NodeID), cmp.Compare(a.MirrorName(), b.MirrorName()))
}

// Reset replaces the contents with entries (a listing). Every cluster's
// change count moves, so no list built before is reused.
func (m *Mirror[E]) Reset(entries []E) {
	byName := make(map[string]E, len(entries))
	clusters := make(map[string][]E)
	for _, e := range entries {
		byName[e.MirrorName()] = e
		id := e.MirrorKey().ClusterID
		clusters[id] = append(clusters[id], e)
	}
	for _, es := range clusters {
		slices.SortFunc(es, compareMirror[E])
	}
	m.byName, m.clusters = byName, clusters
	for id := range m.changes {
		m.changes[id]++
	}
	for id := range clusters {
		m.changes[id]++
	}
}

// Put adds e, replacing the entry of the same name.
func (m *Mirror[E]) Put(e E) {
	m.Delete(e.MirrorName())
	m.byName[e.MirrorName()] = e
	id := e.MirrorKey().ClusterID
	m.changes[id]++
	es := m.clusters[id]
	i, _ := slices.BinarySearchFunc(es, e, compareMirror[E])
	m.clusters[id] = slices.Insert(es, i, e)
}

// Delete removes the entry named name, if any.
func (m *Mirror[E]) Delete(name string) {
	e, ok := m.byName[name]
	if !ok {
		return
	}
	delete(m.byName, name)
	id := e.MirrorKey().ClusterID
	m.changes[id]++
	es := m.clusters[id]
	if i, found := slices.BinarySearchFunc(es, e, compareMirror[E]); found {
		es = slices.Delete(es, i, i+1)
	}
	if len(es) == 0 {
		delete(m.clusters, id)
	} else {
		m.clusters[id] = es
	}
}

// Get returns the entry named name.
func (m *Mirror[E]) Get(name string) (E, bool) {
	e, ok := m.byName[name]
	return e, ok
}

// Entries calls f for every entry, in no order.
func (m *Mirror[E]) Entries(f func(E)) {
	for _, e := range m.byName {
		f(e)
	}
}

// Records returns the cluster's records in snapshot order, built by build
// from its entries (in that order) and reused until the cluster changes;
// a list that build reports as not to be kept (reuse false: it left out
// unreadable entries, and each snapshot should count them) is built
// again every time. The slice is shared by the snapshots that get it and
// must not be modified.
func (m *Mirror[E]) Records(clusterID string, build func(es []E) (recs []*cluster.Record, reuse bool)) []*cluster.Record {
	changes := m.changes[clusterID]
	m.memoMu.Lock()
	l, ok := m.lists[clusterID]
	m.memoMu.Unlock()
	if ok && l.changes == changes {
		return l.recs
	}
	recs, reuse := build(m.clusters[clusterID])
	if reuse {
		m.memoMu.Lock()
		m.lists[clusterID] = mirrorList{changes: changes, recs: recs}
		m.memoMu.Unlock()
	}
	return recs
}
