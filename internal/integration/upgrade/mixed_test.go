package upgrade

import (
	"context"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/apiv1"

	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// Issue 46's case: a coordinator of the previous release beside one of
// HEAD on one store, three HEAD workers listing HEAD's coordinator first.
// The previous release judges liveness by the record's version alone, so
// while it is live HEAD must write the whole record on every heartbeat
// (the cluster's feature level is 0): every worker stays eligible on both
// coordinators in every sample, with the same placement at every shared
// revision, and HEAD's coordinator renews no lease without a write.
func TestMixedCoordinators(t *testing.T) { onEachBackend(t, testMixedCoordinators) }

func testMixedCoordinators(t *testing.T, s *suite) {
	s.start([]string{"", s.prev}, repeat("", workers), false)
	before := s.renewals()
	s.phase("previous and HEAD coordinators, HEAD workers listing HEAD first, "+window().String(), func() { time.Sleep(window()) })
	if n := s.renewals() - before; n != 0 {
		t.Errorf("HEAD's coordinator renewed %v leases without a write while a level-0 coordinator was live", n)
	}
	s.table()
	s.expectLevel(0, true)
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
	if n := s.renewals() - before; n != 0 {
		t.Errorf("HEAD's coordinators renewed %v leases without a write while level-0 workers were live", n)
	}
	s.table()
	s.expectLevel(0, true)
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
		s.expectLevel(0, true)
		time.Sleep(hold())
		s.roll(s.workers, "")()
	})
	s.expectVersions(head, head)
	s.expectLevel(1, false)
	s.expectRenewals()
	s.phase("rollback HEAD → previous, workers first", func() {
		s.roll(s.workers, s.prev)()
		s.expectLevel(0, true)
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
	s.expectLevel(1, false)
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
