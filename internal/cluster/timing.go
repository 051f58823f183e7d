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

// Liveness classifies a record by the age of its last accepted update.
type Liveness uint8

// Liveness states.
const (
	LivenessFresh   Liveness = iota + 1 // updated within UnhealthyAfter
	LivenessLate                        // older than UnhealthyAfter: unhealthy, still visible
	LivenessExpired                     // older than LeaseTTL: excluded from placement and lists
)

// Classify returns the liveness of a record whose last accepted update is
// age old. A negative age (clock skew between observer and store) counts as
// fresh.
func (t Timing) Classify(age time.Duration) Liveness {
	switch {
	case age >= t.LeaseTTL:
		return LivenessExpired
	case age >= t.UnhealthyAfter:
		return LivenessLate
	default:
		return LivenessFresh
	}
}

// Age returns how long before now (Unix milliseconds) the record was last
// accepted by the store.
func (r *Record) Age(nowUnixMs int64) time.Duration {
	return time.Duration(nowUnixMs-r.UpdatedAtUnixMs) * time.Millisecond
}

// EffectiveHealth is the health a reader should show: the reported health,
// overridden to unhealthy once the record is late or expired, whatever the
// process last claimed.
func (t Timing) EffectiveHealth(r *Record, nowUnixMs int64) Health {
	if t.Classify(r.Age(nowUnixMs)) != LivenessFresh {
		return HealthUnhealthy
	}
	return r.Health
}
