package ops

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// agesTiming renews leases without writing (leases of 5 s and more) and
// keeps a worker stopped for 20 s listed (lease 30 s): the default status
// interval (1 m) makes 29 of 30 heartbeats renewals.
var agesTiming = talontest.LiveTiming{Heartbeat: 2 * time.Second, Request: time.Second, Unhealthy: 6 * time.Second, LeaseTTL: 30 * time.Second}

// TestHeartbeatAgesOnEveryCoordinator: two coordinators, a worker that
// heartbeats through the first only. For a minute, the second must show
// the worker's last heartbeat within one heartbeat interval of the first
// (which accepted every one, so knows the truth) in every sample, on etcd
// (where renewals show in no record: the renewal log carries them) and on
// Kubernetes (the Lease's renewTime). Then the worker is stopped for 20 s
// and must show an age of at least 20 s on both.
func TestHeartbeatAgesOnEveryCoordinator(t *testing.T) {
	talontest.SkipShort(t)
	for _, backend := range []string{"etcd", "kubernetes"} {
		t.Run(backend, func(t *testing.T) {
			var c *talontest.LiveCluster
			if backend == "etcd" {
				c = talontest.NewEtcdCluster(t, agesTiming, 2)
			} else {
				c = talontest.NewKubeCluster(t, agesTiming, 2)
			}
			testAges(t, backend, c)
		})
	}
}

func testAges(t *testing.T, backend string, c *talontest.LiveCluster) {
	a, b := c.Coordinator("coord-a"), c.Coordinator("coord-b")
	testsupport.WaitFor(t, 60*time.Second, "two coordinators ready", func() bool { return talontest.Ready(t, a) && talontest.Ready(t, b) })
	w := c.Worker("worker-1", []string{a.Addr}, talontest.LiveTiming{})
	talontest.WaitEligible(t, 60*time.Second, 1, a, b)
	apiA, apiB := a.API(t), b.API(t)
	interval := agesTiming.Heartbeat
	// A worker's heartbeats are an interval apart plus their own round
	// trip and scheduling; a peer that has not yet learned the latest
	// shows the one before, that far behind. The bound is one interval
	// plus that slack.
	bound := interval + 250*time.Millisecond
	var samples, beyond, previous int
	var maxLag time.Duration
	coordLag := time.Duration(0)
	end := time.Now().Add(time.Minute)
	for time.Now().Before(end) {
		ra, errA := apiA.Node(context.Background(), "worker-1")
		rb, errB := apiB.Node(context.Background(), "worker-1")
		if errA != nil || errB != nil {
			t.Fatalf("describe worker-1: coord-a %v, coord-b %v", errA, errB)
		}
		samples++
		lag := time.Duration(ra.Node.HeartbeatAtUnixMs-rb.Node.HeartbeatAtUnixMs) * time.Millisecond
		maxLag = max(maxLag, lag)
		if lag > 0 {
			previous++
		}
		if lag > bound {
			beyond++
			if beyond <= 3 {
				t.Logf("sample %d: coord-b shows worker-1 heard at %d, %s before coord-a's %d", samples, rb.Node.HeartbeatAtUnixMs, lag, ra.Node.HeartbeatAtUnixMs)
			}
		}
		// Each coordinator's own record, as its peer shows it: the same
		// renewals, published the same way.
		if rc, err := apiB.Node(context.Background(), "coord-a"); err == nil {
			coordLag = max(coordLag, time.Duration(max(0, rc.Node.HeartbeatAgeMs)-int64(interval/time.Millisecond))*time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("%s, heartbeat %s: %d samples over 1m | coord-b behind coord-a (the truth) by at most %s | samples showing the heartbeat before the latest %d | more than %s behind %d | coord-a's own record on coord-b: age beyond one interval at most %s",
		backend, interval, samples, maxLag, previous, bound, beyond, coordLag)
	if beyond != 0 {
		t.Errorf("coord-b showed worker-1's heartbeat more than one interval and its slack (%s) behind coord-a's in %d of %d samples (max %s)", bound, beyond, samples, maxLag)
	}

	w.Signal(syscall.SIGSTOP)
	defer w.Signal(syscall.SIGCONT)
	time.Sleep(20 * time.Second)
	for _, p := range []*talontest.Proc{a, b} {
		r, err := p.API(t).Node(context.Background(), "worker-1")
		if err != nil {
			t.Fatalf("%s: describe worker-1 after 20 s stopped: %v", p.Name, err)
		}
		age := time.Duration(r.Node.HeartbeatAgeMs) * time.Millisecond
		t.Logf("%s: worker-1 stopped for 20s shows heartbeat age %s (health %s)", p.Name, age, r.Node.Health)
		if age < 20*time.Second {
			t.Errorf("%s shows a worker stopped for 20s heard %s ago; want at least 20s", p.Name, age)
		}
	}
}
