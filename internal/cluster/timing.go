package cluster

import (
	"fmt"
	"time"
)

// Default timing (ADR section 3).
const (
	DefaultHeartbeatInterval = 5 * time.Second
	DefaultUnhealthyAfter    = 15 * time.Second
	DefaultLeaseTTL          = 30 * time.Second
	// DefaultStatusInterval is how often a heartbeat that changes nothing
	// placement, health or an operator's view depends on still writes the
	// whole record, to refresh the counters; the heartbeats in between
	// only renew the record's lease (NeedsStatusWrite).
	DefaultStatusInterval = time.Minute
)

// Timing holds the heartbeat, unhealthy and lease settings.
type Timing struct {
	HeartbeatInterval time.Duration
	UnhealthyAfter    time.Duration
	LeaseTTL          time.Duration
	// StatusInterval is how old the stored counters may grow before a
	// heartbeat writes the whole record again (NeedsStatusWrite); 0 makes
	// every heartbeat write it.
	StatusInterval time.Duration
}

// DefaultTiming returns the ADR defaults.
func DefaultTiming() Timing {
	return Timing{
		HeartbeatInterval: DefaultHeartbeatInterval,
		UnhealthyAfter:    DefaultUnhealthyAfter,
		LeaseTTL:          DefaultLeaseTTL,
		StatusInterval:    DefaultStatusInterval,
	}
}

// Validate enforces heartbeat_interval < unhealthy_after < lease_ttl, all
// positive, naming both settings of a broken comparison.
func (t Timing) Validate() error {
	if t.HeartbeatInterval <= 0 {
		return fmt.Errorf("heartbeat-interval %s: must be positive", t.HeartbeatInterval)
	}
	if t.HeartbeatInterval >= t.UnhealthyAfter {
		return fmt.Errorf("heartbeat-interval %s must be less than unhealthy-after %s (rule: heartbeat-interval < unhealthy-after < lease-ttl)", t.HeartbeatInterval, t.UnhealthyAfter)
	}
	if t.UnhealthyAfter >= t.LeaseTTL {
		return fmt.Errorf("unhealthy-after %s must be less than lease-ttl %s (rule: heartbeat-interval < unhealthy-after < lease-ttl)", t.UnhealthyAfter, t.LeaseTTL)
	}
	if t.StatusInterval < 0 || (t.StatusInterval > 0 && t.StatusInterval < t.HeartbeatInterval) {
		return fmt.Errorf("status-interval %s must be 0 (every heartbeat writes the record) or at least heartbeat-interval %s", t.StatusInterval, t.HeartbeatInterval)
	}
	return nil
}

// ValidateTolerance enforces the lost-heartbeat rule: unhealthy-after must
// leave room for one missed heartbeat plus one request timeout, that is
// unhealthy-after >= 2 x heartbeat-interval + request-timeout. A worker's
// heartbeat may be lost (a store leader election, a coordinator restart),
// and its retry may take up to a request timeout; neither alone may make
// a live record late.
func (t Timing) ValidateTolerance(requestTimeout time.Duration) error {
	if need := 2*t.HeartbeatInterval + requestTimeout; t.UnhealthyAfter < need {
		return fmt.Errorf("unhealthy-after %s must be at least %s, 2 x heartbeat-interval %s + request-timeout %s (rule: unhealthy-after >= 2 x heartbeat-interval + request-timeout, so one lost heartbeat and its retry never make a live record late)",
			t.UnhealthyAfter, need, t.HeartbeatInterval, requestTimeout)
	}
	return nil
}

// EffectiveHealth is the health a reader should show: unhealthy while the
// store marks the record late (Late), whatever the process last claimed;
// otherwise the reported health. It depends on the record alone, so every
// reader of the same revision shows the same health.
func (r *Record) EffectiveHealth() Health {
	if r.Late {
		return HealthUnhealthy
	}
	return r.Health
}

// Age returns how long before now (Unix milliseconds) the reading store
// first saw the record's current version (UpdatedAtUnixMs): for display
// only; no decision depends on it.
func (r *Record) Age(nowUnixMs int64) time.Duration {
	return time.Duration(nowUnixMs-r.UpdatedAtUnixMs) * time.Millisecond
}
