package coordinator

import (
	"context"
	"errors"
	"time"

	"github.com/talonhq/talon/internal/backoff"
	"github.com/talonhq/talon/internal/state"
)

// refreshEvery is how often the refresh loop reads the view without being
// asked: at least once a second, so the evidence of a silent record grows
// and readiness and pushes follow the store when no lookup arrives; and at
// least three times per request timeout, so that a store that stops
// answering leaves the view unconfirmed (unready, see Readiness) within
// one request timeout of its last answer.
func refreshEvery(o Options) time.Duration {
	return min(o.Timing.HeartbeatInterval, time.Second, o.RequestTimeout/3)
}

// minRefreshGap is the least time between two background view reads: a
// fifth of the request timeout, at most 200 ms.
func minRefreshGap(o Options) time.Duration { return min(200*time.Millisecond, o.RequestTimeout/5) }

// readSpacing is the longest the refresh loop leaves between the end of
// one read and the start of the next: the minimum gap, then up to one
// refresh period for the ticker.
func readSpacing(o Options) time.Duration { return refreshEvery(o) + minRefreshGap(o) }

// maxReadGap is the longest expected time between the starts of two
// successful reads: a read's timeout plus two refresh periods and the
// minimum gap. A longer gap means this coordinator was not observing (its
// process stalled, or its reads did), so it recovers before answering.
func maxReadGap(o Options) time.Duration {
	return o.RequestTimeout + 2*refreshEvery(o) + minRefreshGap(o)
}

// refresher keeps the view fresh: it reads it periodically and on
// request (run), and follows the store's change stream to read it again
// when a change may move placement (watch).
type refresher struct {
	*Coordinator
	kick chan struct{} // asks run for a new view now; capacity 1
}

func newRefresher(c *Coordinator) *refresher {
	return &refresher{Coordinator: c, kick: make(chan struct{}, 1)}
}

// request asks the refresh loop for a new view without waiting.
func (r *refresher) request() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// run reads the view periodically and on request.
func (r *refresher) run(ctx context.Context) {
	t := time.NewTicker(refreshEvery(r.opts))
	defer t.Stop()
	for {
		_, _ = r.views.Load().get(ctx)
		// A minimum gap keeps a burst of membership changes from turning
		// into back-to-back store reads (a full LIST on Kubernetes).
		if backoff.Sleep(ctx, minRefreshGap(r.opts)) != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.kick:
		}
	}
}

// watch follows the store's change stream to push placement changes
// promptly. It recovers from compaction by re-reading and re-watching.
func (r *refresher) watch(ctx context.Context) {
	retry := backoff.New(r.retryPolicy())
	for ctx.Err() == nil {
		v, err := r.views.Load().get(ctx)
		if err != nil {
			if backoff.Sleep(ctx, retry.Next()) != nil {
				return
			}
			continue
		}
		wctx, cancel := context.WithCancel(ctx)
		for batch := range r.store.Watch(wctx, r.opts.ClusterID, v.Snapshot.Revision) {
			if batch.Err != nil {
				if errors.Is(batch.Err, state.ErrCompacted) {
					r.log.Info("watch revision compacted; re-reading the cluster", "revision", v.Snapshot.Revision.String())
				} else if ctx.Err() == nil {
					r.noteStoreError("watch", 0, batch.Err)
				}
				break
			}
			retry.Reset()
			if r.placementRelevant(batch.Events) {
				r.request()
			}
		}
		cancel()
		if backoff.Sleep(ctx, retry.Next()) != nil {
			return
		}
	}
}

// placementRelevant reports whether any event may change placement or
// the node counts: a removal, a new node, or a change of incarnation,
// address, readiness, reported health or the store's late mark. Plain
// heartbeats (only the sequence and counters move) do not need a new view.
func (r *refresher) placementRelevant(events []state.Event) bool {
	last := r.LastGood()
	if last == nil {
		return true
	}
	for _, ev := range events {
		if ev.Type != state.EventPut || ev.Record == nil {
			return true
		}
		old := last.record(ev.Key)
		r := ev.Record
		if old == nil || old.IncarnationID != r.IncarnationID || old.Address != r.Address || old.Ready != r.Ready ||
			old.Health != r.Health || old.Late != r.Late {
			return true
		}
	}
	return false
}

// retryPolicy is the coordinator's wait between failed background reads.
func (r *refresher) retryPolicy() backoff.Policy {
	return backoff.Policy{Initial: 100 * time.Millisecond, Max: r.opts.Timing.HeartbeatInterval, Jitter: 0.5}
}
