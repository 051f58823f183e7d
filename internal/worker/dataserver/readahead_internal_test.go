package dataserver

import (
	"slices"
	"testing"
)

// TestPlanPrefetch is the read-ahead decision's table: only after a
// sequential read, only owned cold blocks, nearest first, at most the
// free slots and, while warming up, the tokens left.
func TestPlanPrefetch(t *testing.T) {
	o := blockState{owned: true, cold: true} // owned, cold: a candidate
	warm := blockState{owned: true}          // owned, resident or loading
	other := blockState{}                    // another worker's
	four := []blockState{o, o, o, o}
	for _, tt := range []struct {
		name string
		in   prefetchInput
		want []int
	}{
		{"sequential, all owned and cold", prefetchInput{sequential: true, next: four, slots: 8}, []int{0, 1, 2, 3}},
		{"sparse: nothing", prefetchInput{sequential: false, next: four, slots: 8}, nil},
		{"only owned cold blocks", prefetchInput{sequential: true, next: []blockState{other, warm, o, other}, slots: 8}, []int{2}},
		{"nothing cold", prefetchInput{sequential: true, next: []blockState{warm, warm, other}, slots: 8}, nil},
		{"slots bound, nearest first", prefetchInput{sequential: true, next: []blockState{other, o, o, o}, slots: 2}, []int{1, 2}},
		{"no slot", prefetchInput{sequential: true, next: four, slots: 0}, nil},
		{"warming: tokens bound", prefetchInput{sequential: true, next: four, slots: 8, warming: true, tokens: 1}, []int{0}},
		{"warming: no token", prefetchInput{sequential: true, next: four, slots: 8, warming: true, tokens: 0}, nil},
		{"warming: slots below tokens", prefetchInput{sequential: true, next: four, slots: 2, warming: true, tokens: 64}, []int{0, 1}},
		{"not warming: tokens ignored", prefetchInput{sequential: true, next: four, slots: 3, tokens: 0}, []int{0, 1, 2}},
		{"end of object", prefetchInput{sequential: true, next: nil, slots: 8}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := planPrefetch(tt.in); !slices.Equal(got, tt.want) {
				t.Fatalf("planPrefetch = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestSequential is the access pattern rule's table.
func TestSequential(t *testing.T) {
	for _, tt := range []struct {
		name        string
		seen, holes int
		want        bool
	}{
		{"nothing read before", 0, 0, false},
		{"in order", 8, 0, true},
		{"after other workers' blocks", 1, 0, true},
		{"out of order, one late", 2, 1, true},
		{"out of order, two late of six", 6, 2, true},
		{"every other block", 4, 4, false},
		{"block 0, then 10", 1, 9, false},
		{"every third block", 2, 5, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := sequential(tt.seen, tt.holes); got != tt.want {
				t.Fatalf("sequential(%d, %d) = %t, want %t", tt.seen, tt.holes, got, tt.want)
			}
		})
	}
}

// TestStreams: what a client's reads of an object tell of its last one
// (stream.window: blocks of its window read, and owned ones skipped).
func TestStreams(t *testing.T) {
	all := func(int64) bool { return true }
	third := func(b int64) bool { return b%3 == 0 }
	type read struct {
		client, object string
		first, last    int64
	}
	for _, tt := range []struct {
		name        string
		owned       func(int64) bool
		reads       []read
		seen, holes int
	}{
		{"first read", all, []read{{"a", "o", 0, 0}}, 0, 0},
		{"in order", all, []read{{"a", "o", 0, 0}, {"a", "o", 1, 1}, {"a", "o", 2, 3}, {"a", "o", 4, 4}}, 4, 0},
		{"window of eight", all, []read{{"a", "o", 0, 9}, {"a", "o", 10, 10}}, 8, 0},
		{"per client", all, []read{{"a", "o", 0, 0}, {"b", "o", 1, 1}}, 0, 0},
		{"per object", all, []read{{"a", "o", 0, 0}, {"a", "p", 1, 1}}, 0, 0},
		{"sparse", all, []read{{"a", "o", 0, 0}, {"a", "o", 10, 10}, {"a", "o", 20, 20}}, 1, 9},
		{"every other block", all, []read{{"a", "o", 0, 0}, {"a", "o", 2, 2}, {"a", "o", 4, 4}, {"a", "o", 6, 6}}, 3, 3},
		// The client reads blocks 1, 2, 4, 5 from other workers.
		{"a third owned, in order", third, []read{{"a", "o", 0, 0}, {"a", "o", 3, 3}, {"a", "o", 6, 6}}, 2, 0},
		{"a third owned, sparse", third, []read{{"a", "o", 0, 0}, {"a", "o", 9, 9}}, 1, 2},
		// Parallel requests arrive out of order: block 3 after 5.
		{"out of order", all, []read{{"a", "o", 0, 0}, {"a", "o", 1, 1}, {"a", "o", 2, 2}, {"a", "o", 5, 5}, {"a", "o", 3, 3}}, 3, 0},
		{"ahead of a late one", all, []read{{"a", "o", 0, 0}, {"a", "o", 1, 1}, {"a", "o", 2, 2}, {"a", "o", 4, 4}}, 3, 1},
		{"far from the last read", all, []read{{"a", "o", 0, 0}, {"a", "o", 100, 100}}, 0, 0},
		{"seek back", all, []read{{"a", "o", 0, 0}, {"a", "o", 100, 100}, {"a", "o", 1, 1}}, 0, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newStreams()
			var st stream
			for _, r := range tt.reads {
				st = s.observe(r.client, r.object, r.first, r.last)
			}
			last := tt.reads[len(tt.reads)-1]
			if seen, holes := st.window(last.first, tt.owned); seen != tt.seen || holes != tt.holes {
				t.Fatalf("window of the last read: %d seen, %d holes; want %d and %d", seen, holes, tt.seen, tt.holes)
			}
		})
	}
	s := newStreams()
	for i := range maxStreams + 10 {
		s.observe("a", string(rune('a'+i%26))+string(rune(i)), 0, 0)
	}
	if n := s.k.Len(); n > maxStreams {
		t.Fatalf("%d streams remembered, want at most %d", n, maxStreams)
	}
}
