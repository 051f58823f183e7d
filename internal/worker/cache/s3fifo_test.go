package cache

import (
	"fmt"
	"testing"
)

// sim drives a policy the way Cache does, with unit-size entries.
type sim struct {
	p        *policy
	entries  map[blockID]*entry
	capacity int64
	bytes    int64
	evicted  int
}

func newSim(capacity int64) *sim {
	return &sim{p: newPolicy(capacity, 1), entries: map[blockID]*entry{}, capacity: capacity}
}

// access reads id: a hit touches it, a miss evicts as needed and inserts it.
func (s *sim) access(id blockID) (hit bool) {
	if e, ok := s.entries[id]; ok {
		s.p.touch(e)
		return true
	}
	for s.bytes+1 > s.capacity {
		v := s.p.victim()
		delete(s.entries, v.id)
		s.bytes -= v.fileSize
		s.evicted++
	}
	e := &entry{id: id, fileSize: 1}
	s.entries[id] = e
	s.p.insert(e)
	s.bytes++
	return false
}

func (s *sim) check(t *testing.T) {
	t.Helper()
	if got := s.p.small.bytes + s.p.main.bytes; got != s.bytes || s.p.small.len+s.p.main.len != len(s.entries) {
		t.Fatalf("queues hold %d bytes / %d entries, index %d / %d", got, s.p.small.len+s.p.main.len, s.bytes, len(s.entries))
	}
	if s.bytes > s.capacity {
		t.Fatalf("%d bytes over capacity %d", s.bytes, s.capacity)
	}
}

func TestS3FIFOScanResistance(t *testing.T) {
	s := newSim(100)
	hot := make([]blockID, 20)
	for i := range hot {
		hot[i] = blockID{fmt.Sprintf("hot/%d", i), 0}
	}
	// Warm up: the hot set is read many times.
	for range 5 {
		for _, id := range hot {
			s.access(id)
		}
	}
	// A one-pass scan ten times the cache size, interleaved with hot reads.
	for i := range 1000 {
		s.access(blockID{"scan", int64(i)})
		if i%10 == 0 {
			for _, id := range hot[:2] {
				s.access(id)
			}
		}
		s.check(t)
	}
	hits := 0
	for _, id := range hot {
		if s.access(id) {
			hits++
		}
	}
	if hits != len(hot) {
		t.Fatalf("after a scan %d of %d hot blocks survive; S3-FIFO keeps them all", hits, len(hot))
	}
	if s.evicted < 900 {
		t.Fatalf("evicted %d, want the scan to have passed through", s.evicted)
	}
}

func TestS3FIFOGhostPromotes(t *testing.T) {
	s := newSim(10)
	a := blockID{"a", 0}
	s.access(a)
	for i := range 15 { // push a out of the small queue unread
		s.access(blockID{"x", int64(i)})
	}
	if _, ok := s.entries[a]; ok {
		t.Fatal("a should have been evicted from the small queue")
	}
	if _, ok := s.p.ghost.set[a]; !ok {
		t.Fatal("an entry evicted from the small queue must be remembered in the ghost")
	}
	s.access(a)
	if e := s.entries[a]; e.q != &s.p.main {
		t.Fatal("a block the ghost remembers must enter the main queue")
	}
	s.check(t)
}

func TestGhostBounded(t *testing.T) {
	g := newGhost(8)
	for i := range 10000 {
		g.add(blockID{"k", int64(i % 50)})
		if len(g.set) > 8 || len(g.fifo) > 3*8 {
			t.Fatalf("ghost grew to %d ids, %d queued", len(g.set), len(g.fifo))
		}
	}
	if newPolicy(100, 1).victim() != nil {
		t.Fatal("an empty policy has no victim")
	}
}
