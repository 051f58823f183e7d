package dataserver

// This file bounds a new worker's warm-up: the rate at which it loads
// blocks from the store in its first minutes (see "Warm-up" in doc.go).

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"golang.org/x/time/rate"

	"github.com/talonhq/talon/internal/blob"
	"github.com/talonhq/talon/internal/datav1"
	"github.com/talonhq/talon/internal/worker/stats"
)

// Warm-up defaults.
const (
	// DefaultWarmupRate is the default Config.WarmupRate: block loads a
	// second while warming up.
	DefaultWarmupRate = 64
	// DefaultWarmupPeriod is the default Config.WarmupPeriod.
	DefaultWarmupPeriod = 5 * time.Minute
)

// warmup is the data server's warm-up bound. It is safe for concurrent use.
type warmup struct {
	until  time.Time // warm-up ends; zero: no bound
	limit  *rate.Limiter
	refuse bool // past the rate: refuse (the next owner serves), else wait
	now    func() time.Time
	stats  *stats.Stats
}

func newWarmup(cfg *Config) *warmup {
	w := &warmup{now: cfg.Clock, refuse: cfg.WarmupRefuse, stats: cfg.Stats}
	if cfg.WarmupRate > 0 && cfg.WarmupPeriod > 0 {
		w.until = cfg.Clock().Add(cfg.WarmupPeriod)
		w.limit = rate.NewLimiter(rate.Limit(cfg.WarmupRate), max(1, int(cfg.WarmupRate)))
		cfg.Stats.SetWarmup(w.until, cfg.Clock)
	}
	return w
}

// active reports whether the worker is warming up now.
func (w *warmup) active() bool { return w.limit != nil && w.now().Before(w.until) }

// admit takes tokens for the blocks of [off, end) that a read would load
// from the store (neither resident nor loading). Past the rate it refuses
// with 503 warming_up when another owner can serve the block (replicas 2
// or more, and the client has another owner to ask: no last=1), else
// waits for the rate.
func (s *Server) admit(ctx context.Context, req *request, info blob.Info, end int64) *apiError {
	w := s.warm
	if !w.active() {
		return nil
	}
	cold := 0
	for i := req.offset / s.blockSize; i <= (end-1)/s.blockSize; i++ {
		if s.cfg.Cache.Cold(req.key, info, i) {
			cold++
		}
	}
	if cold == 0 {
		return nil
	}
	if w.limit.AllowN(w.now(), cold) {
		w.stats.WarmupLoads(true, cold)
		return nil
	}
	if w.refuse && !req.last {
		w.stats.WarmupLoads(false, cold)
		return &apiError{status: http.StatusServiceUnavailable, code: datav1.CodeWarmingUp, retryAfter: true,
			msg: fmt.Sprintf("worker is warming up: it loads at most %g blocks a second from the store until %s; read the block from its next owner", float64(w.limit.Limit()), w.until.UTC().Format(time.RFC3339))}
	}
	if err := w.wait(ctx, min(cold, w.limit.Burst())); err != nil {
		return errorf(http.StatusServiceUnavailable, datav1.CodeCanceled, "waiting for the warm-up rate: %v", err)
	}
	w.stats.WarmupLoads(true, cold)
	return nil
}

// wait takes n tokens, waiting for them on w's clock (the limiter's
// WaitN would read the wall clock).
func (w *warmup) wait(ctx context.Context, n int) error {
	r := w.limit.ReserveN(w.now(), n)
	d := r.DelayFrom(w.now())
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		r.CancelAt(w.now())
		return ctx.Err()
	}
}

// budget reports whether the warm-up bound applies now and, if so, how
// many block loads it allows at once now.
func (w *warmup) budget() (warming bool, tokens int) {
	if !w.active() {
		return false, 0
	}
	return true, int(w.limit.TokensAt(w.now()))
}

// charge takes the token of one read-ahead load the cache is starting
// (Cache.Prefetch calls it, when it would start the load) and counts it
// admitted: always after warm-up, within the rate during it. A load it
// refuses does not start, and one the cache does not start is never
// charged.
func (w *warmup) charge() bool {
	if !w.active() {
		return true
	}
	if w.limit.AllowN(w.now(), 1) {
		w.stats.WarmupLoads(true, 1)
		return true
	}
	return false
}
