package faults

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/talonhq/talon/internal/protocol"
	"github.com/talonhq/talon/internal/testenv"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// TestActiveActiveOnKubernetes runs two coordinators on a real
// kube-apiserver (Lease backend) with two real workers: both see the
// workers, answer lookups identically, fail closed while the API server is
// down and recover when it returns.
func TestActiveActiveOnKubernetes(t *testing.T) {
	talontest.SkipShort(t)
	kube := testenv.StartKubeAPIServer(t, testenv.KubeOptions{})
	cs, err := kubernetes.NewForConfig(kube.RestConfig(kube.AdminToken()))
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "talon"}}
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubeconfig := kube.WriteKubeconfig(t, kube.AdminToken())
	store := []string{"--state-backend", "kubernetes", "--kubeconfig", kubeconfig, "--kube-namespace", "talon", "--ha", "--coordinator-replicas", "2"}
	ctlA, ctlB := talontest.FreeAddr(t), talontest.FreeAddr(t)
	a := talontest.Start(t, "coordinator-a", talontest.CoordinatorArgs("coord-a", ctlA, talontest.FreeAddr(t), store...)...)
	b := talontest.Start(t, "coordinator-b", talontest.CoordinatorArgs("coord-b", ctlB, talontest.FreeAddr(t), store...)...)
	testsupport.WaitFor(t, 30*time.Second, "both coordinators ready", func() bool { return talontest.Ready(t, a) && talontest.Ready(t, b) })
	blobs := t.TempDir()
	for i := 1; i <= 2; i++ {
		id := fmt.Sprintf("worker-%d", i)
		talontest.Start(t, id, talontest.WorkerArgs(id, talontest.FreeAddr(t), talontest.FreeAddr(t), []string{ctlA, ctlB}, blobs, t.TempDir())...)
	}
	healthy := func(p *talontest.Proc) int {
		c, err := p.API(t).Cluster(context.Background())
		if err != nil {
			return -1
		}
		return c.Nodes.Workers.Healthy
	}
	testsupport.WaitFor(t, 30*time.Second, "two healthy workers on both coordinators", func() bool { return healthy(a) == 2 && healthy(b) == 2 })

	ca, cb := talontest.Conn(t, ctlA), talontest.Conn(t, ctlB)
	for i := range 10 {
		key := fmt.Sprintf("k8s/object-%d#0", i)
		testsupport.WaitFor(t, 10*time.Second, "identical answers", func() bool {
			x, err1 := ca.Call(context.Background(), &protocol.PlacementLookup{Key: []byte(key), Replicas: 2})
			y, err2 := cb.Call(context.Background(), &protocol.PlacementLookup{Key: []byte(key), Replicas: 2})
			if err1 != nil || err2 != nil {
				return false
			}
			ra, rb := x.(*protocol.PlacementResponse), y.(*protocol.PlacementResponse)
			return ra.Version == rb.Version && len(ra.Owners) == 2 && ra.Owners[0] == rb.Owners[0] && ra.Owners[1] == rb.Owners[1]
		})
	}

	// Idle workers' heartbeats only renew their Leases (issue 36). The
	// renewals show in the records' versions, so for three unhealthy-after
	// periods neither coordinator counts a worker other than healthy.
	for end := time.Now().Add(4500 * time.Millisecond); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if ha, hb := healthy(a), healthy(b); ha == 0 || ha == 1 || hb == 0 || hb == 1 {
			t.Fatalf("healthy workers %d and %d while their heartbeats renew their Leases; want 2 on both", ha, hb)
		}
	}
	renewals := talontest.SumMetric([]byte(talontest.ScrapeText(t, a)), "talon_coordinator_heartbeat_renewals_total") +
		talontest.SumMetric([]byte(talontest.ScrapeText(t, b)), "talon_coordinator_heartbeat_renewals_total")
	if renewals == 0 {
		t.Fatal("no heartbeat only renewed its Lease: idle workers' heartbeats wrote their records in full")
	}

	kube.Stop()
	testsupport.WaitFor(t, 30*time.Second, "both coordinators unready", func() bool { return !talontest.Ready(t, a) && !talontest.Ready(t, b) })
	if !talontest.Live(t, a) || !talontest.Live(t, b) {
		t.Fatal("coordinators not live while the API server is down")
	}
	_, err = ca.Call(context.Background(), &protocol.PlacementLookup{Key: []byte("k"), Replicas: 1})
	if err == nil || !protocol.Retryable(err) {
		t.Fatalf("lookup with the API server down: %v, want a retryable error", err)
	}
	kube.Start()
	testsupport.WaitFor(t, 60*time.Second, "both coordinators ready again", func() bool { return talontest.Ready(t, a) && talontest.Ready(t, b) })
	testsupport.WaitFor(t, 30*time.Second, "workers healthy again", func() bool { return healthy(a) == 2 && healthy(b) == 2 })
}
