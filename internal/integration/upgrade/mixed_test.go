package upgrade

import (
	"context"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// prevLevel is the feature level of the previous release: the level
// before this build's (the version-skew policy lets nothing older run
// beside HEAD). While it is live the cluster's level is prevLevel, so
// HEAD starts no cache job (cluster.LevelJobs), and HEAD's workers, whose
// Jobs requests a previous coordinator answers invalid_argument, stop
// asking it for a minute at a time.
const prevLevel = cluster.BuildLevel - 1

// Issue 46's case, a coordinator of the previous release beside one of
// HEAD on one store, three HEAD workers listing HEAD's coordinator first:
// every worker stays eligible on both coordinators in every sample, with
// the same placement at every shared revision; HEAD's coordinator renews
// leases without writes exactly when the previous release's level has
// renewals (cluster.LevelRenewals).
func TestMixedCoordinators(t *testing.T) { onEachBackend(t, testMixedCoordinators) }

func testMixedCoordinators(t *testing.T, s *suite) {
	s.start([]string{"", s.prev}, repeat("", workers), false)
	before := s.renewals()
	s.phase("previous and HEAD coordinators, HEAD workers listing HEAD first, "+window().String(), func() { time.Sleep(window()) })
	s.checkRenewals(s.renewals()-before, "a previous-release coordinator")
	s.table()
	s.expectLevel(prevLevel, true)
}

// checkRenewals checks n, the leases HEAD renewed without a write while
// a previous-release process (what) was live, against what its level
// allows.
func (s *suite) checkRenewals(n float64, what string) {
	s.t.Helper()
	switch allowed := prevLevel >= cluster.LevelRenewals; {
	case !allowed && n != 0:
		s.t.Errorf("HEAD renewed %v leases without a write while %s of level %d was live; want none", n, what, prevLevel)
	case allowed && n == 0:
		s.t.Errorf("HEAD renewed no lease without a write while %s of level %d was live; that level has renewals", what, prevLevel)
	}
}

// onEachBackend runs test on a 3-member etcd with mutual TLS and on a
// kube-apiserver, as subtests etcd and kubernetes.
func onEachBackend(t *testing.T, test func(*testing.T, *suite)) {
	talontest.SkipShort(t)
	t.Run("etcd", func(t *testing.T) { test(t, newSuite(t, "etcd", talontest.NewEtcdCluster(t, upgradeTiming, 2))) })
	t.Run("kubernetes", func(t *testing.T) { test(t, newSuite(t, "kubernetes", talontest.NewKubeCluster(t, upgradeTiming, 2))) })
}

// The reverse: HEAD coordinators, workers of the previous release.
func TestPreviousWorkers(t *testing.T) { onEachBackend(t, testPreviousWorkers) }

func testPreviousWorkers(t *testing.T, s *suite) {
	s.start([]string{"", ""}, repeat(s.prev, workers), true)
	before := s.renewals()
	s.phase("HEAD coordinators, previous workers, "+window().String(), func() { time.Sleep(window()) })
	s.checkRenewals(s.renewals()-before, "previous-release workers")
	s.table()
	s.expectLevel(prevLevel, true)
}

// A rolling upgrade previous → HEAD (coordinators first, then workers), a
// rollback HEAD → previous (workers, then coordinators), and an upgrade
// workers first, with lookups and heartbeats throughout.
func TestRollingUpgrade(t *testing.T) { onEachBackend(t, testRollingUpgrade) }

func testRollingUpgrade(t *testing.T, s *suite) {
	prev, head := talontest.BinaryVersion(t, s.prev), talontest.BinaryVersion(t, talontest.Binary(t))
	if prev == head {
		t.Fatalf("the previous release and HEAD both report version %q: the suite could not tell them apart", head)
	}
	s.start(repeat(s.prev, 2), repeat(s.prev, workers), true)
	s.expectVersions(prev, prev)
	s.phase("upgrade previous → HEAD, coordinators first", func() {
		s.roll(s.coords, "")()
		s.expectLevel(prevLevel, true)
		time.Sleep(hold())
		s.roll(s.workers, "")()
	})
	s.expectVersions(head, head)
	s.expectLevel(cluster.BuildLevel, false)
	s.expectRenewals()
	s.phase("rollback HEAD → previous, workers first", func() {
		s.roll(s.workers, s.prev)()
		s.expectLevel(prevLevel, true)
		time.Sleep(hold())
		s.roll(s.coords, s.prev)()
	})
	s.expectVersions(prev, prev)
	s.phase("upgrade previous → HEAD, workers first", func() {
		s.roll(s.workers, "")()
		s.expectVersions(prev, head)
		time.Sleep(hold())
		s.roll(s.coords, "")()
	})
	s.expectVersions(head, head)
	s.expectLevel(cluster.BuildLevel, false)
	s.expectRenewals()
	s.restartStore()
	s.table()
}

// restartStore restarts the store under the upgraded cluster as its own
// upgrade would: etcd's members one by one (each killed, restarted and
// healthy before the next), which must cost no lookup; or the one
// kube-apiserver (stopped, started), during which the coordinators fail
// closed.
func (s *suite) restartStore() {
	if e := s.c.Etcd; e != nil {
		s.phase("rolling restart of etcd's 3 members", func() {
			for i := range e.Members() {
				e.Kill(i)
				e.Restart(i)
				e.WaitHealthy(s.t, settleTimeout)
				time.Sleep(upgradeTiming.Heartbeat)
			}
		})
		return
	}
	s.phaseFailClosed("kube-apiserver restart", func() {
		s.c.Kube.Stop()
		s.c.Kube.Start()
	}, true)
}

// expectRenewals checks that, once every process speaks the renewals'
// level, HEAD's coordinators renew leases without writes again.
func (s *suite) expectRenewals() {
	s.t.Helper()
	before := s.renewals()
	time.Sleep(5 * upgradeTiming.Heartbeat)
	if s.renewals() <= before {
		s.t.Errorf("%s: no lease renewed without a write in %v after the upgrade: the cluster's level should allow it", s.backend, 5*upgradeTiming.Heartbeat)
	}
}

// expectVersions checks, in the first coordinator's node list, that every
// live coordinator runs version coord and every worker version worker.
func (s *suite) expectVersions(coord, worker string) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nodes, err := s.coords[0].API(s.t).AllNodes(ctx, apiv1.NodeFilter{})
	if err != nil {
		s.t.Fatalf("list nodes: %v", err)
	}
	got := map[string]int{}
	for _, n := range nodes.Items {
		got[n.Role+" "+n.Version]++
	}
	if got["coordinator "+coord] != len(s.coords) || got["worker "+worker] != len(s.workers) {
		s.t.Fatalf("%s: live versions %v; want %d coordinators at %s and %d workers at %s", s.backend, got, len(s.coords), coord, len(s.workers), worker)
	}
}
