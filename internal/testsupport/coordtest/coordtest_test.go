package coordtest_test

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/state/memory"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/coordtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestStart(t *testing.T) {
	c := coordtest.Start(t, coordtest.Options{WaitReady: true, Admin: &config.AdminConfig{ExposeHealth: true}})
	if c.Memory == nil || c.Store != c.Memory {
		t.Fatalf("Store %v, Memory %v: want a new memory store in both", c.Store, c.Memory)
	}
	if !c.Readiness().Ready {
		t.Fatalf("not ready after Start with WaitReady: %v", c.Readiness().Reasons)
	}
	r := c.Record()
	if r == nil || r.ClusterID != "test" || r.NodeID != "coord-a" || r.Address != c.ControlAddr || !r.Ready {
		t.Fatalf("own record %+v, want ready coord-a of test at %s", r, c.ControlAddr)
	}
	nc, err := net.Dial("tcp", c.ControlAddr)
	if err != nil {
		t.Fatalf("control listener: %v", err)
	}
	nc.Close()
	resp, err := http.Get(c.AdminURL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /readyz: %d, want 200", resp.StatusCode)
	}
	families, err := c.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range families {
		names[f.GetName()] = true
	}
	for _, want := range []string{"talon_build_info", "talon_ready", "talon_coordinator_snapshot_age_seconds", "talon_admin_requests_total"} {
		if !names[want] {
			t.Errorf("registry lacks %s", want)
		}
	}

	c.Stop()
	if c.Readiness().Ready {
		t.Error("ready after Stop")
	}
	if r := c.Record(); r != nil {
		t.Errorf("own record left after Stop: %+v", r)
	}
	c.Stop() // a second Stop (and the cleanup's) does nothing
}

// TestStartGivenStore runs a coordinator over the caller's store, with
// names, labels, an advertised address and clocks, in a subtest: when the
// subtest ends the coordinator has gone and the store is still open.
func TestStartGivenStore(t *testing.T) {
	storeClock := testsupport.NewFakeClock(time.Now().Add(-time.Hour).Truncate(time.Millisecond))
	store := memory.New(memory.Options{Clock: storeClock.Now})
	defer store.Close()
	key := cluster.Key{ClusterID: "given", Role: cluster.RoleCoordinator, NodeID: "coord-z"}
	t.Run("running", func(t *testing.T) {
		c := coordtest.Start(t, coordtest.Options{
			ClusterID: "given", NodeID: "coord-z", Advertise: "coord-z.test:7400", Labels: map[string]string{"zone": "z"},
			Timing: cluster.Timing{HeartbeatInterval: 50 * time.Millisecond, UnhealthyAfter: time.Second, LeaseTTL: time.Hour},
			Store:  store, WaitReady: true,
		})
		if c.Memory != nil || c.Store != store {
			t.Fatalf("Store %v, Memory %v: want the given store and no memory store of Start's", c.Store, c.Memory)
		}
		if c.AdminServer != nil || c.AdminURL != "" {
			t.Fatalf("admin server %v at %q without Options.Admin", c.AdminServer, c.AdminURL)
		}
		r := c.Record()
		if r == nil || r.Address != "coord-z.test:7400" || r.Labels["zone"] != "z" || r.UpdatedAtUnixMs != storeClock.Now().UnixMilli() {
			t.Fatalf("own record %+v, want coord-z.test:7400, zone z, updated at the store clock %v", r, storeClock.Now())
		}
	})
	snap, err := store.Snapshot(context.Background(), "given")
	if err != nil {
		t.Fatalf("the given store after the test: %v", err)
	}
	if r := snap.Find(key); r != nil {
		t.Fatalf("own record left after the test: %+v", r)
	}
}
