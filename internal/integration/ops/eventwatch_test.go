package ops

import (
	"context"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/coordinator"
	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/state/etcd"
	"github.com/talonhq/talon/internal/testenv"
	"github.com/talonhq/talon/internal/testsupport/coordtest"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// TestEventsFromAPeerWithinASecond: an event one coordinator writes to the
// shared log (one only it observed) is listed by another coordinator on
// the same etcd within a second, not at its next full read of the log (30
// s), for five events in a row.
func TestEventsFromAPeerWithinASecond(t *testing.T) {
	talontest.SkipShort(t)
	e := testenv.StartEtcd(t, testenv.EtcdOptions{})
	open := func() *etcd.Store {
		o := etcd.DefaultOptions()
		o.Endpoints, o.CacheSnapshots = e.Endpoints(), true
		s, err := etcd.New(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	writer, reader := open(), open()
	b := coordtest.Start(t, coordtest.Options{ClusterID: "ev", NodeID: "coord-b", Store: reader, WaitReady: true})
	defer b.Stop()
	var worst time.Duration
	for i := range 5 {
		id := state.EventID(state.EventIdentity{ClusterID: "ev", Type: "coordinator_ready", Role: "coordinator", NodeID: "coord-a", Seq: uint64(i + 1)})
		written := time.Now()
		if _, err := writer.AppendEvent(context.Background(), state.NodeEvent{ID: id, ClusterID: "ev", Time: written, Type: "coordinator_ready", Role: "coordinator", NodeID: "coord-a", Coordinator: "coord-a"}); err != nil {
			t.Fatal(err)
		}
		for {
			page, _ := b.Events(coordinator.EventQuery{})
			found := false
			for _, ev := range page.Events {
				found = found || ev.ID == id
			}
			if found {
				break
			}
			if time.Since(written) > 40*time.Second {
				t.Fatalf("event %d written by a peer not listed after 40s", i)
			}
			time.Sleep(10 * time.Millisecond)
		}
		took := time.Since(written)
		worst = max(worst, took)
		t.Logf("event %d: listed by coord-b %s after coord-a wrote it", i, took.Round(time.Millisecond))
		time.Sleep(500 * time.Millisecond)
	}
	if worst > time.Second {
		t.Errorf("a peer's event took up to %s to be listed: want within a second", worst)
	}
}
