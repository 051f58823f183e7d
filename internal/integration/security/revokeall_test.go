package security

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/pki"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// TestDenyListReachesEveryCoordinator: a worker deny-listed on one of two
// coordinators, which it never talks to, is out of placement on both
// within one heartbeat interval of the entry taking effect there, and
// stays out while it keeps heartbeating through the other. (On the old
// code a deny list was per process: the worker stayed eligible on both.)
func TestDenyListReachesEveryCoordinator(t *testing.T) {
	talontest.SkipShort(t)
	lt := talontest.LiveTiming{Heartbeat: time.Second, Request: time.Second, Unhealthy: 3 * time.Second, LeaseTTL: 6 * time.Second}
	c := talontest.NewEtcdCluster(t, lt, 2)
	deny := filepath.Join(t.TempDir(), "deny")
	if err := os.WriteFile(deny, []byte("# revoked credentials\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.CoordExtra = []string{"--tls-deny-file", deny}
	a := c.Coordinator("coord-a") // has the deny list
	c.CoordExtra = nil
	b := c.Coordinator("coord-b")
	testsupport.WaitFor(t, 60*time.Second, "both coordinators ready", func() bool { return talontest.Ready(t, a) && talontest.Ready(t, b) })
	// Both workers talk to coord-b only.
	c.Worker("worker-1", []string{b.Addr}, talontest.LiveTiming{})
	w2 := c.Worker("worker-2", []string{b.Addr}, talontest.LiveTiming{})
	talontest.WaitEligible(t, 60*time.Second, 2, a, b)

	if err := os.WriteFile(deny, []byte("# revoked credentials\n"+string(pki.RoleWorker)+"/worker-2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	written := time.Now()
	// The deny file reloads within a second (pki's check interval); the
	// bound is that plus one heartbeat interval, plus a refresh of each
	// view.
	bound := time.Second + lt.Heartbeat + 500*time.Millisecond
	var out time.Duration
	testsupport.WaitFor(t, 30*time.Second, "worker-2 out of placement on both coordinators", func() bool {
		for _, p := range []*talontest.Proc{a, b} {
			cl, err := p.API(t).Cluster(context.Background())
			if err != nil || cl.EligibleWorkers != 1 {
				return false
			}
		}
		out = time.Since(written)
		return true
	})
	t.Logf("deny entry on coord-a only: worker-2 out of placement on both coordinators %v after the file was written (bound %v)", out.Round(time.Millisecond), bound)
	if out > bound {
		t.Errorf("worker-2 left placement on both after %v, want within %v (deny-file reload + one heartbeat interval)", out, bound)
	}
	// It keeps heartbeating through coord-b, and stays out.
	beats := talontest.AcceptedHeartbeats(w2)
	testsupport.WaitFor(t, 10*time.Second, "worker-2 still heartbeating through coord-b", func() bool { return talontest.AcceptedHeartbeats(w2) >= beats+3 })
	for _, p := range []*talontest.Proc{a, b} {
		cl, err := p.API(t).Cluster(context.Background())
		if err != nil || cl.EligibleWorkers != 1 {
			t.Fatalf("%s: %d eligible (err %v) while revoked worker-2 heartbeats, want 1", p.Name, cl.EligibleWorkers, err)
		}
	}
}
