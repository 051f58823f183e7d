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
)

// Timing holds the heartbeat, unhealthy and lease settings.
type Timing struct {
	HeartbeatInterval time.Duration
	UnhealthyAfter    time.Duration
	LeaseTTL          time.Duration
}

// DefaultTiming returns the ADR defaults.
func DefaultTiming() Timing {
	return Timing{
		HeartbeatInterval: DefaultHeartbeatInterval,
		UnhealthyAfter:    DefaultUnhealthyAfter,
		LeaseTTL:          DefaultLeaseTTL,
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
