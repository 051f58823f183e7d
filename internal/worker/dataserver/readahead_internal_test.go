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

// TestSequential is the access pattern's table.
func TestSequential(t *testing.T) {
	for _, tt := range []struct {
		name        string
		ok          bool
		prev, first int64
		ownedGap    int
		want        bool
	}{
		{"first read of the object", false, 0, 0, 0, false},
		{"next block", true, 4, 5, 0, true},
		{"gap of other workers' blocks", true, 4, 9, 0, true},
		{"skipped an owned block: sparse", true, 0, 10, 1, false},
		{"gap too wide", true, 0, maxStreamGap + 2, 0, false},
		{"widest gap", true, 0, maxStreamGap + 1, 0, true},
		{"same block again", true, 5, 5, 0, false},
		{"backwards", true, 9, 5, 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := sequential(tt.ok, tt.prev, tt.first, tt.ownedGap); got != tt.want {
				t.Fatalf("sequential(%t, %d, %d, %d) = %t, want %t", tt.ok, tt.prev, tt.first, tt.ownedGap, got, tt.want)
			}
		})
	}
}

// TestStreams: what a client read of an object, as observe reports it.
func TestStreams(t *testing.T) {
	type read struct {
		client, object string
		first, last    int64
		prev           int64
		ok             bool
	}
	for _, tt := range []struct {
		name  string
		reads []read
	}{
		{"in order", []read{{"a", "o", 0, 0, 0, false}, {"a", "o", 1, 1, 0, true}, {"a", "o", 4, 5, 1, true}}},
		{"per client and object", []read{{"a", "o", 0, 0, 0, false}, {"b", "o", 1, 1, 0, false}, {"a", "p", 1, 1, 0, false}, {"a", "o", 1, 1, 0, true}}},
		// Parallel requests arrive out of order: block 3 after 5 finds
		// block 2, which the client read before it.
		{"out of order", []read{{"a", "o", 2, 2, 0, false}, {"a", "o", 5, 5, 2, true}, {"a", "o", 3, 3, 2, true}, {"a", "o", 6, 6, 5, true}}},
		{"far ahead then far back", []read{{"a", "o", 0, 0, 0, false}, {"a", "o", 200, 200, 0, true}, {"a", "o", 1, 1, 0, false}, {"a", "o", 2, 2, 1, true}}},
		{"nothing remembered below", []read{{"a", "o", 10, 10, 0, false}, {"a", "o", 5, 5, 0, false}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newStreams()
			for i, r := range tt.reads {
				prev, ok := s.observe(r.client, r.object, r.first, r.last)
				if ok != r.ok || (ok && prev != r.prev) {
					t.Fatalf("read %d (%s %s %d-%d): prev %d %t, want %d %t", i, r.client, r.object, r.first, r.last, prev, ok, r.prev, r.ok)
				}
			}
		})
	}
	s := newStreams()
	for i := range maxStreams + 10 {
		s.observe("a", string(rune('a'+i%26))+string(rune(i)), 0, 0)
	}
	if len(s.m) > maxStreams {
		t.Fatalf("%d streams remembered, want at most %d", len(s.m), maxStreams)
	}
}
