package faults

// Issue 38, "expected against present": with one of two coordinators
// stopped, `talonctl coordinators list` exits 1 naming it and `cluster
// status` says 1 of 2. Before, once its record expired it was invisible:
// "coordinators 1: 1 healthy, 1 ready" and exit 0.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

func TestMissingCoordinatorEtcd(t *testing.T) {
	talontest.SkipShort(t)
	c := talontest.NewEtcdCluster(t, talontest.FastTiming, 2)
	a, b := c.Coordinator("coord-a"), c.Coordinator("coord-b")
	testsupport.WaitFor(t, 60*time.Second, "both coordinators ready", func() bool { return talontest.Ready(t, a) && talontest.Ready(t, b) })
	servers := []string{"http://" + a.Admin}
	testsupport.WaitFor(t, 30*time.Second, "coordinators list exits 0 with both", func() bool {
		code, _, _ := talontest.Ctl(t, servers, "coordinators", "list")
		return code == 0
	})

	// Agreement through the answering coordinator: each publishes its
	// placement in its record, and a's API marks b's against its own.
	testsupport.WaitFor(t, 30*time.Second, "coord-a's API says coord-b agrees", func() bool {
		cl, err := a.API(t).Cluster(context.Background())
		if err != nil {
			return false
		}
		n, err := a.API(t).Node(context.Background(), "coord-b")
		return err == nil && n.Node.Agree == "yes" && n.Node.PlacementVersion == cl.PlacementVersion
	})

	b.Kill()
	stopped := time.Now()
	testsupport.WaitFor(t, 60*time.Second, "coord-b's record gone from coord-a's view", func() bool {
		cl, err := a.API(t).Cluster(context.Background())
		return err == nil && cl.Coordinators.Present == 1
	})
	gone := time.Since(stopped)
	code, stdout, stderr := talontest.Ctl(t, servers, "coordinators", "list")
	t.Logf("coord-b killed; its record left coord-a's view after %s; coordinators list exit %d\n%s%s", gone.Round(time.Millisecond), code, stdout, stderr)
	if code != 1 || !strings.Contains(stderr, "1 of 2 expected coordinators present") || !strings.Contains(stderr, "coord-b is missing") || !strings.Contains(stdout, "missing") {
		t.Fatalf("coordinators list with coord-b stopped: exit %d, want 1 naming coord-b missing", code)
	}
	code, stdout, _ = talontest.Ctl(t, servers, "cluster", "status")
	if code != 0 || !strings.Contains(stdout, "1 of 2 present, 1 ready; missing: coord-b") {
		t.Fatalf("cluster status: exit %d:\n%s", code, stdout)
	}
	code, stdout, _ = talontest.Ctl(t, servers, "cluster", "status", "-o", "jsonpath={.coordinators.missing[0].nodeId}")
	if code != 0 || strings.TrimSpace(stdout) != "coord-b" {
		t.Fatalf("cluster status -o jsonpath: exit %d, %q", code, stdout)
	}
}
