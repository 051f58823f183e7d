package ops

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/testenv"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// TestOneWatchPerCoordinator counts watches where etcd counts them: two
// coordinators with workers heartbeating hold a fixed number of etcd
// watchers each, however long they run and however many workers, clients
// and API watchers they serve: one of the records (the snapshot cache's,
// which also serves the coordinator's change stream), one of the shared
// event log and one of the renewal log (issues 47 and 48); a coordinator
// killed takes its watches with it, and one restarted holds as many again.
func TestOneWatchPerCoordinator(t *testing.T) {
	const perCoordinator = 3
	talontest.SkipShort(t)
	etcd := testenv.StartEtcd(t, testenv.EtcdOptions{})
	base := etcd.Watchers(t)
	store := []string{"--state-backend", "etcd", "--etcd-endpoints", strings.Join(etcd.Endpoints(), ","), "--ha", "--coordinator-replicas", "2"}
	coord := func(id string) *talontest.Proc {
		return talontest.Start(t, id, talontest.CoordinatorArgs(id, talontest.FreeAddr(t), talontest.FreeAddr(t), store...)...)
	}
	a, b := coord("coord-a"), coord("coord-b")
	testsupport.WaitFor(t, 60*time.Second, "both coordinators ready", func() bool { return talontest.Ready(t, a) && talontest.Ready(t, b) })
	blobs := t.TempDir()
	for i := 1; i <= 2; i++ {
		id := fmt.Sprintf("w-%d", i)
		w := talontest.Start(t, id, talontest.WorkerArgs(id, talontest.FreeAddr(t), talontest.FreeAddr(t), []string{a.Addr, b.Addr}, blobs, t.TempDir())...)
		testsupport.WaitFor(t, 60*time.Second, id+" ready", func() bool { return talontest.Ready(t, w) })
	}

	want := func(what string, n int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		got := etcd.Watchers(t) - base
		for got != n && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
			got = etcd.Watchers(t) - base
		}
		if got != n {
			t.Fatalf("%s: etcd counts %d watchers, want %d", what, got, n)
		}
		t.Logf("%s: %d etcd watchers", what, got)
	}
	want("two coordinators, two workers heartbeating", 2*perCoordinator)
	// Several heartbeat intervals and view refreshes later, still as many.
	time.Sleep(20 * 250 * time.Millisecond)
	want("after twenty heartbeat intervals", 2*perCoordinator)
	for _, p := range []*talontest.Proc{a, b} {
		if n := talontest.ScrapeGauge(t, p, "talon_coordinator_store_watches"); n != 1 {
			t.Errorf("%s: talon_coordinator_store_watches = %v, want 1", p.Name, n)
		}
	}
	b.Kill()
	want("coord-b killed", perCoordinator)
	b.Restart()
	testsupport.WaitFor(t, 60*time.Second, "coord-b ready again", func() bool { return talontest.Ready(t, b) })
	want("coord-b restarted", 2*perCoordinator)
}
