package netlimit

import (
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// TestKeyedBounded: a flood of distinct keys, none idle, never holds more
// than the bound; idle keys go first, then the least recently used, and
// onEvict hears each.
func TestKeyedBounded(t *testing.T) {
	now := time.Unix(1000, 0)
	evicted := 0
	k := NewKeyed[int](100, time.Minute, func() *int { return new(int) }, func(int, *int) { evicted++ })
	for i := range 10_000 {
		k.Do(i, now, func(v *int) { *v++ })
		if k.Len() > 100 {
			t.Fatalf("%d keys after %d inserts, bound 100", k.Len(), i+1)
		}
	}
	if evicted != 10_000-k.Len() {
		t.Fatalf("%d evicted, %d held, of 10000", evicted, k.Len())
	}
	// The most recent key survives a make-room; an idle one does not.
	k2 := NewKeyed[string](4, time.Minute, func() *int { return new(int) }, nil)
	k2.Do("old", now, func(*int) {})
	k2.Do("a", now.Add(2*time.Minute), func(*int) {})
	k2.Do("b", now.Add(2*time.Minute), func(*int) {})
	k2.Do("c", now.Add(2*time.Minute), func(*int) {})
	k2.Do("d", now.Add(2*time.Minute), func(*int) {})
	held := map[string]bool{}
	k2.Each(func(key string, _ *int) bool { held[key] = true; return true })
	if held["old"] || !held["d"] || len(held) != 4 {
		t.Fatalf("held %v, want a b c d", held)
	}
}

func TestBuckets(t *testing.T) {
	now := time.Unix(1000, 0)
	b := NewBuckets[string](rate.Every(time.Second), 2, 10, time.Minute)
	for i, want := range []bool{true, true, false} {
		if ok, wait := b.Allow("x", now); ok != want || (!ok && wait <= 0) {
			t.Fatalf("take %d: %v %v, want %v", i, ok, wait, want)
		}
	}
	if ok, _ := b.Allow("y", now); !ok {
		t.Fatal("another key shares the bucket")
	}
	if ok, _ := b.Allow("x", now.Add(time.Second)); !ok {
		t.Fatal("no token a second later")
	}
}

// TestBucketsAllowN: n tokens are taken at once or not at all, per key.
func TestBucketsAllowN(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	b := NewBuckets[string](1, 4, 8, time.Minute)
	if !b.AllowN("a", now, 3) {
		t.Fatal("3 of a burst of 4 refused")
	}
	if b.AllowN("a", now, 2) {
		t.Fatal("2 more taken with 1 left")
	}
	if !b.AllowN("a", now, 1) || !b.AllowN("b", now, 4) {
		t.Fatal("the last token, or another key's burst, refused")
	}
	if !b.AllowN("a", now.Add(2*time.Second), 2) {
		t.Fatal("2 tokens refilled in 2s refused")
	}
}
