package kube

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/talonhq/talon/internal/state"
)

// writeGate bounds the store's Lease writes in flight. Under saturation
// every extra request at the API server only lengthens the queue there
// (and so every write's latency) without adding throughput: the gate
// keeps the queue short and refuses what cannot start soon, so the writes
// it admits finish fast and the refused ones are retried by their callers
// after a backoff, possibly at another coordinator.
//
// A write holds one slot from its first API request to its last (reads,
// conflict retries and their backoff included), so an admitted write is
// never refused halfway. Snapshot's LIST and watches take no slot.
type writeGate struct {
	// slots holds one token per write in flight; nil means no limit.
	slots chan struct{}
	// wait is how long a write waits for a slot before it is refused.
	wait     time.Duration
	refusals prometheus.Counter
	inflight prometheus.GaugeFunc
}

func newWriteGate(limit int, wait time.Duration) *writeGate {
	g := &writeGate{
		wait: wait,
		refusals: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "talon_state_kube_write_refusals_total",
			Help: "Lease writes (registrations, heartbeats, removals) the Kubernetes backend refused because kube-max-inflight-writes were in flight for all of kube-admission-wait; callers get the retryable unavailable error.",
		}),
	}
	g.inflight = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "talon_state_kube_writes_inflight",
		Help: "Lease writes the Kubernetes backend has in flight (at most kube-max-inflight-writes).",
	}, func() float64 { return float64(len(g.slots)) })
	if limit > 0 {
		g.slots = make(chan struct{}, limit)
	}
	return g
}

// collectors are the gate's metrics.
func (g *writeGate) collectors() []prometheus.Collector {
	return []prometheus.Collector{g.refusals, g.inflight}
}

// admit takes a slot, waiting at most the admission wait for one, and
// returns the function that gives it back. When none frees in time it
// returns an error wrapping state.ErrUnavailable (retryable) that names the
// limit; when ctx ends first, ctx's error (mapped like a request's). op
// names the operation in those errors; it is called only to build one.
func (g *writeGate) admit(ctx context.Context, op func() string) (release func(), err error) {
	if g.slots == nil {
		return func() {}, nil
	}
	select {
	case g.slots <- struct{}{}:
		return g.release, nil
	default:
	}
	t := time.NewTimer(g.wait)
	defer t.Stop()
	select {
	case g.slots <- struct{}{}:
		return g.release, nil
	case <-t.C:
		g.refusals.Inc()
		return nil, fmt.Errorf("%s: %w: kube-max-inflight-writes limit %d reached and no lease write finished within kube-admission-wait %s: retry after a backoff",
			op(), state.ErrUnavailable, cap(g.slots), g.wait)
	case <-ctx.Done():
		return nil, mapError(op(), ctx.Err())
	}
}

func (g *writeGate) release() { <-g.slots }
