package faults

import (
	"context"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state/kube"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// TestEventsSurviveRestartsOnEtcd is issue 38 item 4 on real processes: a
// worker dies, both coordinators observe its expiry, then restart one
// after the other; each still lists the worker's expired/removed event,
// exactly once. On the old code events lived in each coordinator's
// memory only: after its restart a coordinator listed none.
func TestEventsSurviveRestartsOnEtcd(t *testing.T) {
	talontest.SkipShort(t)
	testEventsSurviveRestarts(t, talontest.NewEtcdCluster(t, blipTiming, 2))
}

// TestEventsSurviveRestartsOnKube is the same on a kube-apiserver, where
// the event is also a core/v1 Event on the worker's Lease, as `kubectl get
// events` lists it.
func TestEventsSurviveRestartsOnKube(t *testing.T) {
	talontest.SkipShort(t)
	c := talontest.NewKubeCluster(t, blipTiming, 2)
	testEventsSurviveRestarts(t, c)
	key := cluster.Key{ClusterID: "it", Role: cluster.RoleWorker, NodeID: "w-gone"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := c.Clientset.CoreV1().Events("talon").List(ctx, metav1.ListOptions{FieldSelector: fields.AndSelectors(
		fields.OneTermEqualSelector("reason", "NodeExpiredOrRemoved"),
		fields.OneTermEqualSelector("involvedObject.name", kube.LeaseName(key))).String()})
	if err != nil {
		t.Fatalf("list core/v1 Events: %v", err)
	}
	if len(list.Items) != 1 {
		t.Fatalf("core/v1 Events NodeExpiredOrRemoved of %s: %d, want 1: %+v", kube.LeaseName(key), len(list.Items), list.Items)
	}
	ev := list.Items[0]
	if ev.InvolvedObject.Kind != "Lease" || ev.Source.Component != kube.EventComponent || ev.Message == "" {
		t.Errorf("core/v1 Event %s: involved %+v, source %+v, message %q", ev.Name, ev.InvolvedObject, ev.Source, ev.Message)
	}
	t.Logf("kubectl get events would show: %s %s %s/%s: %s", ev.Type, ev.Reason, ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Message)
}

func testEventsSurviveRestarts(t *testing.T, c *talontest.LiveCluster) {
	a, b := c.Coordinator("coord-a"), c.Coordinator("coord-b")
	testsupport.WaitFor(t, 60*time.Second, "both coordinators ready", func() bool { return talontest.Ready(t, a) && talontest.Ready(t, b) })
	ctls := []string{a.Addr, b.Addr}
	_ = c.Worker("w-stay", ctls, talontest.LiveTiming{})
	gone := c.Worker("w-gone", ctls, talontest.LiveTiming{})
	talontest.WaitEligible(t, 60*time.Second, 2, a, b)

	gone.Kill()
	expiry := 3 * c.Timing.LeaseTTL
	for _, p := range []*talontest.Proc{a, b} {
		testsupport.WaitFor(t, expiry, p.Name+" lists w-gone's expiry", func() bool { return removedEvents(t, p) == 1 })
	}
	for _, p := range []*talontest.Proc{a, b} {
		p.Signal(syscall.SIGTERM)
		testsupport.WaitFor(t, 30*time.Second, p.Name+" stopped", p.Exited)
		p.Restart()
		testsupport.WaitFor(t, 60*time.Second, p.Name+" ready again", func() bool { return talontest.Ready(t, p) })
	}
	for _, p := range []*talontest.Proc{a, b} {
		testsupport.WaitFor(t, 30*time.Second, p.Name+" lists w-gone's expiry after the restarts", func() bool { return removedEvents(t, p) > 0 })
	}
	time.Sleep(2 * time.Second) // a second copy would have arrived by now
	for _, p := range []*talontest.Proc{a, b} {
		if n := removedEvents(t, p); n != 1 {
			t.Errorf("%s lists w-gone's expired/removed event %d times, want once", p.Name, n)
		}
	}
}

// removedEvents counts the node_expired_or_removed events of w-gone that
// coordinator p lists (-1 when it does not answer).
func removedEvents(t *testing.T, p *talontest.Proc) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list, err := p.API(t).Events(ctx, apiv1.EventFilter{NodeID: "w-gone", Types: []string{"node_expired_or_removed"}, Limit: apiv1.MaxEventLimit})
	if err != nil {
		return -1
	}
	return len(list.Items)
}
