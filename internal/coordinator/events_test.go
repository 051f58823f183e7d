package coordinator_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state/memory"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/coordtest"
)

// TestMembershipEvents: the coordinator logs one structured line when a
// worker joins, turns unhealthy and expires, and when the
// PlacementVersion changes.
func TestMembershipEvents(t *testing.T) {
	clock := testsupport.NewFakeClock(time.Now())
	store := memory.New(memory.Options{Clock: clock.Now})
	t.Cleanup(func() { store.Close() })
	var logs testsupport.SyncBuffer
	timing := cluster.Timing{HeartbeatInterval: 100 * time.Millisecond, UnhealthyAfter: time.Second, LeaseTTL: 2 * time.Second}
	c := coordtest.Start(t, coordtest.Options{Store: store, Timing: timing, WaitReady: true, StoreClock: clock.Now,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	lookup := func() { _, _, _ = c.Lookup(context.Background(), "k#0", 1) }
	has := func(substrs ...string) func() bool {
		return func() bool {
			lookup()
			for _, line := range strings.Split(logs.String(), "\n") {
				all := true
				for _, s := range substrs {
					all = all && strings.Contains(line, s)
				}
				if all {
					return true
				}
			}
			return false
		}
	}
	rec := &cluster.Record{ClusterID: "test", NodeID: "w1", Role: cluster.RoleWorker, IncarnationID: "i", Address: "10.0.0.1:7500", Version: "v", Health: cluster.HealthHealthy, Ready: true}
	if _, err := store.UpsertNode(context.Background(), rec, timing.LeaseTTL); err != nil {
		t.Fatal(err)
	}
	testsupport.WaitFor(t, 5*time.Second, "join logged", has(`msg="node joined"`, "node=w1", "address=10.0.0.1:7500"))
	testsupport.WaitFor(t, 5*time.Second, "version change logged", has(`msg="placement version changed"`, "eligible_workers=1"))
	// w1 falls silent: after unhealthy-after of observation the store marks
	// it late, after lease-ttl it is expired (the store's own clock stands
	// still: the coordinator's proposals do both).
	testsupport.WaitFor(t, 5*time.Second, "unhealthy logged", has(`msg="node health changed"`, "node=w1", "now=unhealthy"))
	testsupport.WaitFor(t, 5*time.Second, "expiry logged", has(`msg="node expired or removed"`, "node=w1"))
}
