package harness

import (
	"testing"
	"time"

	"github.com/talonhq/talon/internal/cluster"
)

func TestCoordinatorTiming(t *testing.T) {
	tests := []struct {
		gap, requestTimeout time.Duration
		unhealthy, lease    time.Duration
	}{
		{10 * time.Second, 30 * time.Second, 70 * time.Second, 140 * time.Second},
		{time.Second, time.Second, 61 * time.Second, 122 * time.Second},
		{time.Second, time.Minute, 70 * time.Second, 140 * time.Second}, // 2 x heartbeat-interval + request-timeout
		{20 * time.Minute, 30 * time.Second, 21 * time.Minute, 42 * time.Minute},
		{2 * time.Hour, 30 * time.Second, time.Hour, 2 * time.Hour}, // config's bound on unhealthy-after
	}
	for _, tt := range tests {
		u, l := coordinatorTiming(tt.gap, tt.requestTimeout)
		if u != tt.unhealthy || l != tt.lease {
			t.Errorf("coordinatorTiming(%s, %s) = %s, %s; want %s, %s", tt.gap, tt.requestTimeout, u, l, tt.unhealthy, tt.lease)
		}
		timing := cluster.Timing{HeartbeatInterval: HeartbeatInterval, UnhealthyAfter: u, LeaseTTL: l, StatusInterval: time.Minute}
		if err := timing.Validate(); err != nil {
			t.Errorf("gap %s: %v", tt.gap, err)
		}
		if err := timing.ValidateTolerance(tt.requestTimeout); err != nil {
			t.Errorf("gap %s: %v", tt.gap, err)
		}
	}
}
