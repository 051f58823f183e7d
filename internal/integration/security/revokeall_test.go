package security

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/pki"
	"github.com/talonhq/talon/internal/protocol"
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

// TestRevokedWorkerCannotReRegisterThroughAnother: a worker deny-listed on
// one of two coordinators (a deny file mid-rollout) re-registers, again
// and again, through the other one with the same credential, as a
// malicious worker would. The revocation is of the credential, so a new
// incarnation registered with it stays revoked: it is never placed. (On
// the old code each registration started unrevoked, and the worker was
// placed until the coordinator with the entry marked it again: a review
// saw it placed a third of the time.)
func TestRevokedWorkerCannotReRegisterThroughAnother(t *testing.T) {
	talontest.SkipShort(t)
	lt := talontest.LiveTiming{Heartbeat: time.Second, Request: time.Second, Unhealthy: 3 * time.Second, LeaseTTL: 6 * time.Second}
	c := talontest.NewEtcdCluster(t, lt, 2)
	deny := filepath.Join(t.TempDir(), "deny")
	if err := os.WriteFile(deny, []byte("# revoked credentials\n"+string(pki.RoleWorker)+"/w-sim\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.CoordExtra = []string{"--tls-deny-file", deny}
	a := c.Coordinator("coord-a") // has the deny entry
	c.CoordExtra = nil
	b := c.Coordinator("coord-b")
	testsupport.WaitFor(t, 60*time.Second, "both coordinators ready", func() bool { return talontest.Ready(t, a) && talontest.Ready(t, b) })
	c.Worker("worker-1", []string{b.Addr}, talontest.LiveTiming{})
	talontest.WaitEligible(t, 60*time.Second, 1, a, b)

	cn := c.PKI.DialAs(t, b.Addr, pki.RoleWorker, "w-sim")
	register := func(n int) {
		rec := talontest.SimRecord(0)
		rec.ClusterID, rec.IncarnationID, rec.StartTimeUnixMs = "it", fmt.Sprintf("sim-%d", n), time.Now().UnixMilli()
		msg, err := protocol.NewRegister(rec)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := cn.Call(ctx, msg); err != nil {
			t.Fatalf("registration %d through coord-b: %v", n, err)
		}
	}
	register(0)
	testsupport.WaitFor(t, 30*time.Second, "w-sim revoked by coord-a", func() bool {
		n, err := b.API(t).Node(context.Background(), "w-sim")
		return err == nil && n.Node.Revocation != nil
	})
	pl := talontest.StartPoller(t, c.Client, talontest.TargetOf(a), talontest.TargetOf(b))
	from := time.Now()
	for n := 1; n <= 40; n++ { // a new incarnation every 100 ms for 4 s
		register(n)
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second)
	pl.Stop()
	samples, placed := 0, 0
	for _, s := range pl.Since(from) {
		if s.Kind == talontest.KindCluster && s.Status == 200 {
			samples++
			if s.Eligible > 1 {
				placed++
			}
		}
	}
	t.Logf("40 re-registrations of the revoked w-sim through coord-b: placed in %d of %d cluster answers of both coordinators", placed, samples)
	if samples == 0 || placed != 0 {
		t.Fatalf("the revoked worker was placed in %d of %d answers; want none", placed, samples)
	}
}
