package coordinator

import (
	"time"

	"golang.org/x/time/rate"

	"github.com/talonhq/talon/internal/netlimit"
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

// writeRates is a token bucket per node ID (netlimit.Buckets). Buckets
// idle for 10 intervals are dropped first when it reaches its bound, so
// it holds about as many entries as the cluster has writing nodes. A nil
// *writeRates allows everything.
type writeRates struct {
	b                  *netlimit.Buckets[string]
	perInterval, burst int // for the refusal's message
}

// newWriteRates returns the buckets of perInterval writes per interval,
// nil (no limit) when perInterval is not positive.
func newWriteRates(interval time.Duration, perInterval, maxRecords int) *writeRates {
	if perInterval <= 0 {
		return nil
	}
	burst := writeBurstIntervals * perInterval
	return &writeRates{b: netlimit.NewBuckets[string](rate.Every(interval/time.Duration(perInterval)), burst, 2*maxRecords, 10*interval), perInterval: perInterval, burst: burst}
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
// pruned like the write buckets (idle 10 refills, past bound entries).
func newPeerRates(every time.Duration, burst, bound int) *writeRates {
	return &writeRates{b: netlimit.NewBuckets[string](rate.Every(every), burst, bound, 10*every), perInterval: 1, burst: burst}
}

// allow takes a token of node's bucket at now; when none is left it
// returns false and how long until one is.
func (w *writeRates) allow(node string, now time.Time) (bool, time.Duration) {
	if w == nil {
		return true, 0
	}
	return w.b.Allow(node, now)
}
