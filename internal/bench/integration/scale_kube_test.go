package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/talonhq/talon/internal/bench"
	"github.com/talonhq/talon/internal/state/kube"
	"github.com/talonhq/talon/internal/testenv"
)

// kubeScaleWorkers is the cluster size of the Kubernetes LIST row: the
// Kubernetes backend has no scale row of its own (issue 30), only this
// measurement of what every snapshot costs it today.
const kubeScaleWorkers = 10_000

// kubeListRow writes 10,000 worker records as Leases on a real
// kube-apiserver and times the Kubernetes store's snapshot: a paginated
// LIST of every Lease (DefaultListPageSize each), which every lookup
// batch and every coordinator refresh issues.
func kubeListRow(t *testing.T) reportRow {
	t.Helper()
	k := testenv.StartKubeAPIServer(t, testenv.KubeOptions{})
	const ns, clusterID = "scale", "kscale"
	cs, err := kubernetes.NewForConfig(k.RestConfig(k.AdminToken()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s, err := kube.New(context.Background(), kube.Options{RESTConfig: k.RestConfig(k.AdminToken()), Namespace: ns, QPS: -1, MaxInflightWrites: -1, RequestTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	var mu sync.Mutex
	var firstErr error
	for i := range kubeScaleWorkers {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if _, err := s.UpsertNode(context.Background(), reportRecord(clusterID, fmt.Sprintf("worker-%05d", i), 1), 30*time.Minute); err != nil {
				mu.Lock()
				firstErr = cmpErr(firstErr, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatalf("seeding %d Leases: %v", kubeScaleWorkers, firstErr)
	}
	one, err := cs.CoordinationV1().Leases(ns).List(context.Background(), metav1.ListOptions{Limit: 1})
	if err != nil || len(one.Items) != 1 {
		t.Fatalf("one Lease: %v", err)
	}
	leaseBytes := one.Items[0].Size() // protobuf size, as stored in etcd
	r := bench.Run(context.Background(), 1, 10*time.Second, func(ctx context.Context, _ int) error {
		sn, err := s.Snapshot(ctx, clusterID)
		if err == nil && len(sn.Records) != kubeScaleWorkers {
			err = fmt.Errorf("snapshot has %d records, want %d", len(sn.Records), kubeScaleWorkers)
		}
		return err
	})
	if n := r.FailureCount(); n > 0 {
		t.Errorf("kube snapshots: %d failures, first %v", n, r.FirstErr)
	}
	pages := (kubeScaleWorkers + kube.DefaultListPageSize - 1) / kube.DefaultListPageSize
	return reportRow{path: "Kubernetes snapshot (paginated Lease LIST), 10,000 workers, one caller",
		talon: fmt.Sprintf("p50 %s p99 %s, %.1f/s", r.P50().Round(time.Millisecond), r.P99().Round(time.Millisecond), r.PerSecond()),
		limit: fmt.Sprintf("%d LIST pages of %d; %d-byte Leases (~%d MB per snapshot)", pages, kube.DefaultListPageSize, leaseBytes, kubeScaleWorkers*leaseBytes/1e6),
		ratio: "—", goal: "(measured)", met: true}
}
