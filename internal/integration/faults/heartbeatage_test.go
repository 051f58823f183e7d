package faults

// Issue 38, "times that mean what they say": a stopped worker's heartbeat
// age grows with its silence on every coordinator, whatever marks the
// coordinators write to its record meanwhile. Before, the late mark moved
// the time a heartbeat was "accepted": a worker stopped for 18 s showed
// 5.6 s.

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// ageTiming renews leases without writes (etcd renews silently only
// leases of 5 s and more) and keeps a silent worker's record for longer
// than the 20 s the test stops it for.
var ageTiming = talontest.LiveTiming{Heartbeat: time.Second, Request: time.Second, Unhealthy: 5 * time.Second, LeaseTTL: 40 * time.Second}

func TestSilentWorkerHeartbeatAgeEtcd(t *testing.T) {
	talontest.SkipShort(t)
	testSilentWorkerHeartbeatAge(t, talontest.NewEtcdCluster(t, ageTiming, 2))
}

func TestSilentWorkerHeartbeatAgeKube(t *testing.T) {
	talontest.SkipShort(t)
	testSilentWorkerHeartbeatAge(t, talontest.NewKubeCluster(t, ageTiming, 2))
}

// testSilentWorkerHeartbeatAge: a worker heartbeating to coordinator A
// only is stopped (SIGSTOP: no goodbye) for 20 s. Every second both
// coordinators are asked for it; the heartbeat age each answers must be
// at least the time since the stop at its observation. Before the stop,
// A (which accepts its heartbeats) and B (which learns of renewals from
// the store) must not call the live worker silent for longer than
// unhealthy-after plus a heartbeat interval and a second.
func testSilentWorkerHeartbeatAge(t *testing.T, c *talontest.LiveCluster) {
	a, b := c.Coordinator("coord-a"), c.Coordinator("coord-b")
	testsupport.WaitFor(t, 60*time.Second, "both coordinators ready", func() bool { return talontest.Ready(t, a) && talontest.Ready(t, b) })
	w := c.Worker("worker-1", []string{a.Addr}, talontest.LiveTiming{})
	talontest.WaitEligible(t, 60*time.Second, 1, a, b)

	// Live: a few unhealthy-after periods of renewals.
	liveLimit := c.Timing.Unhealthy + c.Timing.Heartbeat + time.Second
	var liveMax [2]time.Duration
	for end := time.Now().Add(2 * c.Timing.Unhealthy); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		for i, p := range []*talontest.Proc{a, b} {
			n, err := p.API(t).Node(context.Background(), "worker-1")
			if err != nil {
				t.Fatalf("%s: describe the live worker: %v", p.Name, err)
			}
			liveMax[i] = max(liveMax[i], time.Duration(n.Node.HeartbeatAgeMs)*time.Millisecond)
		}
	}

	w.Signal(syscall.SIGSTOP)
	stopped := time.Now().UnixMilli()
	t.Cleanup(func() { w.Signal(syscall.SIGCONT) })
	const silence = 20 * time.Second
	var asked, short int
	var worst time.Duration // the most an answer understated the silence
	var last [2]time.Duration
	for end := time.Now().Add(silence + time.Second); time.Now().Before(end); time.Sleep(time.Second) {
		for i, p := range []*talontest.Proc{a, b} {
			n, err := p.API(t).Node(context.Background(), "worker-1")
			if err != nil {
				t.Fatalf("%s: describe the stopped worker: %v", p.Name, err)
			}
			asked++
			age := time.Duration(n.Node.HeartbeatAgeMs) * time.Millisecond
			silent := time.Duration(n.ObservedAtUnixMs-stopped) * time.Millisecond
			last[i] = age
			if age < silent {
				short++
				worst = max(worst, silent-age)
				t.Errorf("%s: %s after the stop (at observation) the heartbeat age is %s (health %s, late mark written %dms after the stop)",
					p.Name, silent.Round(time.Millisecond), age, n.Node.Health, n.Node.UpdatedAtUnixMs-stopped)
			}
		}
	}
	t.Logf("live worker: max heartbeat age coord-a (accepts its heartbeats) %s, coord-b %s (limit %s); stopped %s: %d answers, %d understated the silence (worst by %s); last ages coord-a %s, coord-b %s",
		liveMax[0], liveMax[1], liveLimit, silence, asked, short, worst, last[0], last[1])
	for i, p := range []*talontest.Proc{a, b} {
		if liveMax[i] > liveLimit {
			t.Errorf("%s called the live worker silent for %s, above unhealthy-after + heartbeat-interval + 1s = %s", p.Name, liveMax[i], liveLimit)
		}
		if last[i] < silence {
			t.Errorf("%s: after %s stopped the heartbeat age is %s", p.Name, silence, last[i])
		}
	}
}
