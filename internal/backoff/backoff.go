// Package backoff is Talon's one retry schedule: exponential growth from an
// initial delay, capped, with relative jitter. Policy.Delay is a pure
// function (the jitter's random value is an argument), so schedules are
// tested without sleeping; Backoff adds the attempt count and the random
// source for loops; Sleep waits a delay or until a context ends.
//
// Concurrency: a Policy is a value and safe to share; a Backoff belongs to
// one loop and is not safe for concurrent use.
package backoff

import (
	"context"
	"math"
	"math/rand/v2"
	"time"
)

// Policy is a retry schedule. Zero fields mean: Multiplier 2, Max equal to
// Initial times 2^10, Jitter none.
type Policy struct {
	// Initial is the delay after the first failure.
	Initial time.Duration
	// Max caps every delay, jitter included; never below Initial.
	Max time.Duration
	// Multiplier is the growth per consecutive failure; values below 1
	// mean 1.
	Multiplier float64
	// Jitter is the relative spread: a delay d becomes a uniform value in
	// [d*(1-Jitter), d*(1+Jitter)], clipped to [0, Max]. 0 to 1.
	Jitter float64
}

// Delay returns the wait after attempt consecutive failures (1 for the
// first; smaller values count as 1), with r in [0, 1) choosing the jitter:
// r = 0.5 gives the unjittered delay. The result lies in [0, Max].
func (p Policy) Delay(attempt int, r float64) time.Duration {
	mult := p.Multiplier
	if mult == 0 {
		mult = 2
	}
	mult = max(mult, 1)
	limit := p.Max
	if limit <= 0 {
		limit = p.Initial << 10
	}
	limit = max(limit, p.Initial)
	jitter := min(max(p.Jitter, 0), 1)
	attempt = max(attempt, 1)
	d := float64(p.Initial) * math.Pow(mult, float64(attempt-1))
	d = min(d, float64(limit))
	d *= 1 + jitter*(2*r-1)
	return time.Duration(min(max(d, 0), float64(limit)))
}

// Backoff walks a Policy: each Next is the delay after one more failure.
// The zero value is not usable; use New.
type Backoff struct {
	p        Policy
	attempts int
	rand     func() float64
}

// New returns a Backoff at zero failures, jittered by math/rand/v2.
func New(p Policy) *Backoff { return &Backoff{p: p, rand: rand.Float64} }

// Next counts one more failure and returns the delay before the next try.
func (b *Backoff) Next() time.Duration {
	b.attempts++
	return b.p.Delay(b.attempts, b.rand())
}

// Attempts returns the failures counted since New or Reset.
func (b *Backoff) Attempts() int { return b.attempts }

// Reset starts the schedule over, after a success.
func (b *Backoff) Reset() { b.attempts = 0 }

// Sleep waits d, or until ctx ends, which it reports as ctx.Err().
func Sleep(ctx context.Context, d time.Duration) error { return SleepOrWake(ctx, d, nil) }

// SleepOrWake is Sleep that also returns early, with nil, when wake
// delivers (a loop asked to act now). A nil wake never delivers.
func SleepOrWake(ctx context.Context, d time.Duration, wake <-chan struct{}) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	case <-wake:
		return nil
	}
}
