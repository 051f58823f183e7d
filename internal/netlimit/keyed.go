package netlimit

import (
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Keyed holds a value per key (a client address, a principal) for at
// most max keys: the one bounded map behind every per-key limit of a
// listener. A key unused for idle or more is dropped when room is needed;
// when every key is in use, the least recently used are dropped until a
// quarter of the room is free, so that a flood of new keys costs each
// insertion O(log max), and a dropped key starts afresh (a full bucket, a
// zero count). It is safe for concurrent use; its functions run with its
// lock held and must not call back into it.
type Keyed[K comparable, V any] struct {
	max   int
	idle  time.Duration
	fresh func() V
	// onEvict, when set, hears every value dropped to make room.
	onEvict func(K, V)

	mu sync.Mutex // guards m
	m  map[K]*keyedEntry[V]
}

type keyedEntry[V any] struct {
	v    V
	used time.Time
}

// NewKeyed returns a Keyed of at most bound keys (at least 1), whose
// values start as fresh() and are dropped first when idle for idle;
// onEvict (optional) hears each value dropped.
func NewKeyed[K comparable, V any](bound int, idle time.Duration, fresh func() V, onEvict func(K, V)) *Keyed[K, V] {
	return &Keyed[K, V]{max: max(1, bound), idle: idle, fresh: fresh, onEvict: onEvict, m: map[K]*keyedEntry[V]{}}
}

// Do calls f with key's value, creating it when absent, and marks it used
// at now.
func (k *Keyed[K, V]) Do(key K, now time.Time, f func(V)) {
	k.mu.Lock()
	defer k.mu.Unlock()
	e := k.m[key]
	if e == nil {
		if len(k.m) >= k.max {
			k.makeRoomLocked(now)
		}
		e = &keyedEntry[V]{v: k.fresh()}
		k.m[key] = e
	}
	e.used = now
	f(e.v)
}

// Each calls f with every key and value; f returns false to drop the
// key.
func (k *Keyed[K, V]) Each(f func(K, V) (keep bool)) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for key, e := range k.m {
		if !f(key, e.v) {
			delete(k.m, key)
		}
	}
}

// Len returns the keys held.
func (k *Keyed[K, V]) Len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.m)
}

func (k *Keyed[K, V]) makeRoomLocked(now time.Time) {
	for key, e := range k.m {
		if now.Sub(e.used) >= k.idle {
			k.dropLocked(key, e)
		}
	}
	target := k.max - max(1, k.max/4)
	if len(k.m) <= target {
		return
	}
	type aged struct {
		key  K
		used time.Time
	}
	all := make([]aged, 0, len(k.m))
	for key, e := range k.m {
		all = append(all, aged{key, e.used})
	}
	slices.SortFunc(all, func(a, b aged) int { return a.used.Compare(b.used) })
	for _, a := range all[:len(all)-target] {
		k.dropLocked(a.key, k.m[a.key])
	}
}

func (k *Keyed[K, V]) dropLocked(key K, e *keyedEntry[V]) {
	delete(k.m, key)
	if k.onEvict != nil {
		k.onEvict(key, e.v)
	}
}

// Buckets is a token bucket per key, held in a Keyed.
type Buckets[K comparable] struct {
	k *Keyed[K, *rate.Limiter]
}

// NewBuckets returns buckets of burst tokens refilled at every per
// second, for at most bound keys, a key idle for idle dropped first.
func NewBuckets[K comparable](every rate.Limit, burst, bound int, idle time.Duration) *Buckets[K] {
	return &Buckets[K]{k: NewKeyed[K](bound, idle, func() *rate.Limiter { return rate.NewLimiter(every, burst) }, nil)}
}

// Allow takes a token of key's bucket at now; when none is left it
// returns false and how long until one is.
func (b *Buckets[K]) Allow(key K, now time.Time) (ok bool, wait time.Duration) {
	b.k.Do(key, now, func(l *rate.Limiter) {
		r := l.ReserveN(now, 1)
		if d := r.DelayFrom(now); d > 0 {
			r.CancelAt(now)
			ok, wait = false, d
			return
		}
		ok = true
	})
	return ok, wait
}

// Len returns the keys held.
func (b *Buckets[K]) Len() int { return b.k.Len() }

// AllowN takes n tokens of key's bucket at now, or none when fewer are
// left.
func (b *Buckets[K]) AllowN(key K, now time.Time, n int) (ok bool) {
	b.k.Do(key, now, func(l *rate.Limiter) { ok = l.AllowN(now, n) })
	return ok
}
