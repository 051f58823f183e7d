package tui

import (
	"time"

	"github.com/talonhq/talon/internal/backoff"
)

// Backoff defaults.
const (
	// DefaultBackoffMax is no longer the cap: the cap defaults to the
	// refresh interval (see Backoff.Max), so that top is current within
	// one interval of the coordinators' recovery. It bounds an explicit
	// Max that is larger.
	DefaultBackoffMax = 30 * time.Second
	// DefaultBackoffMultiplier is the growth factor per consecutive failure.
	DefaultBackoffMultiplier = 2.0
	// DefaultBackoffJitter is the relative jitter applied to each delay.
	DefaultBackoffJitter = 0.2
)

// Backoff is the retry schedule while the API fails: exponential with
// jitter, capped. The zero value of a field means its default.
type Backoff struct {
	// Initial is the delay after the first failure; default the refresh
	// interval.
	Initial time.Duration
	// Max caps every delay, jitter included; default the refresh
	// interval (a retry is never further away than the next refresh
	// would be, so the view is current within one interval of the API's
	// return), at most DefaultBackoffMax, and never below Initial.
	Max time.Duration
	// Multiplier is the growth per consecutive failure; default
	// DefaultBackoffMultiplier. Values below 1 are treated as 1.
	Multiplier float64
	// Jitter is the relative spread: a delay d becomes a uniform value in
	// [d*(1-Jitter), d*(1+Jitter)]; default DefaultBackoffJitter, at most 1.
	Jitter float64
}

// withDefaults fills in the zero fields; refresh is the refresh interval.
func (b Backoff) withDefaults(refresh time.Duration) Backoff {
	if b.Initial <= 0 {
		b.Initial = refresh
	}
	if b.Max <= 0 {
		b.Max = refresh
	}
	b.Max = max(min(b.Max, DefaultBackoffMax), b.Initial)
	if b.Multiplier == 0 {
		b.Multiplier = DefaultBackoffMultiplier
	}
	b.Multiplier = max(b.Multiplier, 1)
	if b.Jitter == 0 {
		b.Jitter = DefaultBackoffJitter
	}
	b.Jitter = min(max(b.Jitter, 0), 1)
	return b
}

// Delay returns the wait after failures consecutive failures (1 for the
// first), with r in [0, 1) choosing the jitter: r = 0.5 gives the
// unjittered delay. The result lies in [0, Max]. Zero fields of b must have
// been filled in (the model does so); the schedule is internal/backoff's.
func (b Backoff) Delay(failures int, r float64) time.Duration {
	return backoff.Policy(b).Delay(failures, r)
}
