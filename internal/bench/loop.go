package bench

import (
	"context"
	"errors"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/talonhq/talon/internal/backoff"
	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/protocol"
)

// ErrBackedOff marks an operation that was refused as retryable
// (unavailable) and after which the caller backed off before the next
// attempt, as a real worker does. Run counts these apart from failures.
var ErrBackedOff = errors.New("backed off after unavailable")

// Result is what one closed-loop run measured.
type Result struct {
	// Ops counts the operations that succeeded.
	Ops int
	// Elapsed is the run's wall time.
	Elapsed time.Duration
	// Latencies are the successful operations' latencies, sorted.
	Latencies []time.Duration
	// Failures counts failed operations by code (see Code).
	Failures map[string]int
	// BackedOff counts operations refused with unavailable after which
	// the caller backed off (ErrBackedOff); they are not in Failures.
	BackedOff int
	// Renewals counts the successful heartbeats that only renewed their
	// record's lease (a keepalive, a renewal patch) instead of writing the
	// record; the phases that know it fill it in, Run does not.
	Renewals int
	// FirstErr is the first failure, for diagnosis.
	FirstErr error
}

// PerSecond returns the successful operations per second.
func (r Result) PerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Ops) / r.Elapsed.Seconds()
}

// Quantile returns the latency at quantile q (0 to 1), or 0 without
// samples.
func (r Result) Quantile(q float64) time.Duration {
	n := len(r.Latencies)
	if n == 0 {
		return 0
	}
	return r.Latencies[min(n-1, int(q*float64(n)))]
}

// P50 returns the median latency.
func (r Result) P50() time.Duration { return r.Quantile(.5) }

// P99 returns the 99th percentile latency.
func (r Result) P99() time.Duration { return r.Quantile(.99) }

// Max returns the largest latency.
func (r Result) Max() time.Duration {
	if len(r.Latencies) == 0 {
		return 0
	}
	return r.Latencies[len(r.Latencies)-1]
}

// FailureCount returns the number of failed operations.
func (r Result) FailureCount() int {
	n := 0
	for _, v := range r.Failures {
		n += v
	}
	return n
}

// Summary is a Result in the form `talon bench -o json` prints.
type Summary struct {
	Ops       int            `json:"ops"`
	PerSecond float64        `json:"perSecond"`
	ElapsedS  float64        `json:"elapsedSeconds"`
	P50Ms     float64        `json:"p50Ms"`
	P99Ms     float64        `json:"p99Ms"`
	MaxMs     float64        `json:"maxMs"`
	Failures  map[string]int `json:"failures"`
	BackedOff int            `json:"backedOff"`
	Renewals  int            `json:"renewals"`
}

// Summary returns r's figures for JSON output.
func (r Result) Summary() Summary {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	f := r.Failures
	if f == nil {
		f = map[string]int{}
	}
	return Summary{Ops: r.Ops, PerSecond: r.PerSecond(), ElapsedS: r.Elapsed.Seconds(), P50Ms: ms(r.P50()), P99Ms: ms(r.P99()), MaxMs: ms(r.Max()),
		Failures: f, BackedOff: r.BackedOff, Renewals: r.Renewals}
}

// FailureCodes returns the failure codes in order.
func (r Result) FailureCodes() []string { return slices.Sorted(maps.Keys(r.Failures)) }

// Run calls op from callers goroutines back to back for d (caller is the
// goroutine's index, 0 to callers-1) and measures the successful calls.
// The clock, not ctx, ends the loop; ctx ending stops it early. Failures
// that end after d are not counted: they are the run's end cutting a
// call short.
func Run(ctx context.Context, callers int, d time.Duration, op func(ctx context.Context, caller int) error) Result {
	end := time.Now().Add(d)
	var (
		mu  sync.Mutex // guards res below
		res = Result{Failures: map[string]int{}}
		wg  sync.WaitGroup
	)
	start := time.Now()
	for c := range callers {
		wg.Go(func() {
			var lat []time.Duration
			fails := map[string]int{}
			backedOff := 0
			var first error
			for time.Now().Before(end) && ctx.Err() == nil {
				t0 := time.Now()
				err := op(ctx, c)
				switch {
				case err == nil:
					lat = append(lat, time.Since(t0))
				case errors.Is(err, ErrBackedOff):
					backedOff++
				case time.Now().Before(end):
					fails[Code(err)]++
					if first == nil {
						first = err
					}
				}
			}
			mu.Lock()
			res.Latencies = append(res.Latencies, lat...)
			for k, v := range fails {
				res.Failures[k] += v
			}
			res.BackedOff += backedOff
			if res.FirstErr == nil {
				res.FirstErr = first
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	res.Ops = len(res.Latencies)
	slices.Sort(res.Latencies)
	return res
}

// Code names an error's class for the failure counts: the wire code of a
// protocol error, "no_coordinator" when no coordinator answered, "conflict"
// for a lost compare-and-swap, else the protocol's classification of local
// errors (timeout, unavailable, internal).
func Code(err error) string {
	switch {
	case errors.Is(err, client.ErrNoCoordinator):
		return "no_coordinator"
	case errors.Is(err, errConflict):
		return "conflict"
	}
	return protocol.CodeOf(err).String()
}

// errConflict is a raw compare-and-swap that found another revision.
var errConflict = errors.New("compare-and-swap lost: the stored revision changed")

// Backoff sleeps about d with ±50% jitter, or until ctx ends.
func Backoff(ctx context.Context, d time.Duration) {
	_ = backoff.Sleep(ctx, backoff.Policy{Initial: d, Jitter: 0.5}.Delay(1, rand.Float64()))
}
