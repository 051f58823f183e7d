package coordinator

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Write rates per node: a live worker writes once per heartbeat interval;
// a retry, a re-registration after an outage, a failover or a crash loop
// of restarts (each a registration of a new incarnation) add some. More
// than writesPerInterval per interval sustained, past a burst of
// writeBurst, is a bug or an attack (a 1 ns heartbeat interval wrote
// 17,000 a second), and each such write would be a store write: it is
// refused before the store with a retryable error.
// The burst is writeBurstIntervals intervals' worth.
const writeBurstIntervals = 6

// writeRates is a token bucket per node ID. Buckets idle for pruneAfter
// are dropped when the map passes its bound, so it holds about as many
// entries as the cluster has writing nodes.
type writeRates struct {
	perInterval int
	burst       int
	every       rate.Limit
	pruneAfter  time.Duration
	bound       int

	mu      sync.Mutex // guards the fields below
	buckets map[string]*bucket
}

type bucket struct {
	lim  *rate.Limiter
	used time.Time
}

// newWriteRates returns the buckets of perInterval writes per interval,
// nil (no limit) when perInterval is not positive.
func newWriteRates(interval time.Duration, perInterval, maxRecords int) *writeRates {
	if perInterval <= 0 {
		return nil
	}
	return &writeRates{
		perInterval: perInterval,
		burst:       writeBurstIntervals * perInterval,
		every:       rate.Every(interval / time.Duration(perInterval)),
		pruneAfter:  10 * interval,
		bound:       2 * maxRecords,
		buckets:     map[string]*bucket{},
	}
}

// Attestation rates per peer: a worker attests each connection once, when
// it connects, so a peer (a certificate identity, or an address without
// TLS) attests attestBurst times back to back (a restart, a failover),
// then once per attestEvery. Each attestation is a TokenReview at the
// platform's API server, which one worker certificate drove 310 times a
// minute by reconnecting.
const (
	attestBurst = 8
	attestEvery = 10 * time.Second
)

// newPeerRates returns buckets of burst tokens refilled once per every,
// pruned like the write buckets (idle 10 intervals, past bound entries).
func newPeerRates(every time.Duration, burst, bound int) *writeRates {
	return &writeRates{
		perInterval: 1,
		burst:       burst,
		every:       rate.Every(every),
		pruneAfter:  10 * every,
		bound:       bound,
		buckets:     map[string]*bucket{},
	}
}

// allow takes a token of node's bucket at now; when none is left it
// returns false and how long until one is.
func (w *writeRates) allow(node string, now time.Time) (bool, time.Duration) {
	if w == nil {
		return true, 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.buckets[node]
	if b == nil {
		if len(w.buckets) >= w.bound {
			w.pruneLocked(now)
		}
		b = &bucket{lim: rate.NewLimiter(w.every, w.burst)}
		w.buckets[node] = b
	}
	b.used = now
	r := b.lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

func (w *writeRates) pruneLocked(now time.Time) {
	for k, b := range w.buckets {
		if now.Sub(b.used) > w.pruneAfter {
			delete(w.buckets, k)
		}
	}
}
