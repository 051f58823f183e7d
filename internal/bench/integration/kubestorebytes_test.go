package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/state/kube"
	"github.com/talonhq/talon/internal/testenv"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// kubeStoreBytesEnv turns TestKubeHeartbeatStoreBytes on alone (make
// bench-report runs the same rows inside TestBenchReport).
const kubeStoreBytesEnv = "TALON_KUBE_STORE_BYTES"

// TestKubeHeartbeatStoreBytes measures what heartbeats cost a
// Kubernetes API server and its etcd, per worker per hour at default
// timing, beside a kubelet's node Lease renewals, and prints the table.
// It asserts nothing.
func TestKubeHeartbeatStoreBytes(t *testing.T) {
	if os.Getenv(kubeStoreBytesEnv) == "" {
		t.Skipf("measurement: set %s=1 (make bench-report runs it too)", kubeStoreBytesEnv)
	}
	k := testenv.StartKubeAPIServer(t, testenv.KubeOptions{})
	var b strings.Builder
	b.WriteString("\n| path | Talon | limit | ratio | goal | met |\n|---|---|---|---|---|---|\n")
	for _, r := range kubeStoreBytesRows(t, k) {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %t |\n", r.path, r.talon, r.limit, r.ratio, r.goal, r.met)
	}
	fmt.Print(b.String())
}

// storeCost is what one phase cost the API server and its etcd, read from
// their own metrics before and after: request bodies of Lease writes
// (apiserver_request_body_size_bytes_sum, every verb), key+value bytes
// etcd stored (etcd_debugging_mvcc_total_put_size_in_bytes), bytes etcd
// received from its clients (etcd_network_client_grpc_received_bytes_total:
// the API server, whose writes carry the whole object) and the growth of
// etcd's database in use (etcd_mvcc_db_total_size_in_use_in_bytes; no
// compaction runs in the test), and, beside them, the request bodies the
// client sent (a counting RoundTripper).
type storeCost struct {
	requests, requestBody, etcdPut, etcdReceived, dbInUse, clientBody float64
}

// perHour scales a phase's cost of nodes×writes to one node's hour of
// perHour writes.
func (c storeCost) perHour(nodes, writes, perHour int) storeCost {
	f := float64(perHour) / float64(nodes*writes)
	return storeCost{c.requests * f, c.requestBody * f, c.etcdPut * f, c.etcdReceived * f, c.dbInUse * f, c.clientBody * f}
}

// costMeter reads the figures storeCost holds.
type costMeter struct {
	t      *testing.T
	admin  *kubernetes.Clientset
	etcd   *testenv.Etcd
	client *countingTransport
}

func (m *costMeter) read() storeCost {
	m.t.Helper()
	raw, err := m.admin.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		m.t.Fatalf("kube-apiserver /metrics: %v", err)
	}
	var c storeCost
	lease := []string{`group="coordination.k8s.io"`, `resource="leases"`}
	c.requestBody = talontest.SumMetric(raw, "apiserver_request_body_size_bytes_sum", lease...)
	c.requests = talontest.SumMetric(raw, "apiserver_request_body_size_bytes_count", lease...)
	em := m.etcdMetrics()
	c.etcdPut = talontest.SumMetric(em, "etcd_debugging_mvcc_total_put_size_in_bytes")
	c.etcdReceived = talontest.SumMetric(em, "etcd_network_client_grpc_received_bytes_total")
	c.dbInUse = talontest.SumMetric(em, "etcd_mvcc_db_total_size_in_use_in_bytes")
	c.clientBody = float64(m.client.sent())
	return c
}

func (m *costMeter) etcdMetrics() []byte {
	m.t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second}
	url := m.etcd.Endpoints()[0] + "/metrics"
	if strings.HasPrefix(url, "https://") {
		hc.Transport = &http.Transport{TLSClientConfig: m.etcd.TLSConfig()}
	}
	res, err := hc.Get(url)
	if err != nil {
		m.t.Fatalf("etcd /metrics: %v", err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		m.t.Fatalf("etcd /metrics: %v", err)
	}
	return raw
}

// countingTransport counts the request bodies sent through the
// transports it wraps.
type countingTransport struct {
	n chan int64 // a one-slot lock holding the count
}

func newCountingTransport() *countingTransport {
	c := &countingTransport{n: make(chan int64, 1)}
	c.n <- 0
	return c
}

// wrap is a rest.Config WrapTransport.
func (c *countingTransport) wrap(rt http.RoundTripper) http.RoundTripper {
	return countedRoundTripper{c: c, next: rt}
}

func (c *countingTransport) sent() int64 {
	n := <-c.n
	c.n <- n
	return n
}

type countedRoundTripper struct {
	c    *countingTransport
	next http.RoundTripper
}

func (r countedRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.ContentLength > 0 {
		r.c.n <- <-r.c.n + req.ContentLength
	}
	return r.next.RoundTrip(req)
}

// kubeStoreBytesRows measures, on k, the Kubernetes rows of issue 36:
// store bytes per worker per hour at default timing (heartbeat 5 s,
// status interval 1 m) in one run, side by side:
//
//   - Talon before renewals: every heartbeat an UPDATE of the whole Lease
//     (status annotation and managedFields included), as the store sent
//     before issue 36 (a client-go UPDATE loop over the store's Lease);
//   - Talon after: the store with StatusEvery(12): renewals are merge
//     patches of renewTime and talon.io/renew-seq, status writes merge
//     patches of what changed;
//   - the status in a secondary object (simulated, the design ADR 0001
//     section 6 allows): a liveness Lease with Talon's labels and slot
//     annotations but no status, patched every heartbeat, and a status
//     Lease patched once a status interval;
//   - a kubelet's node Lease renewals as the reference: GET once, then an
//     UPDATE with a new renewTime every 10 s, in protobuf, user agent
//     kubelet, leaseDurationSeconds 40, owned by its Node.
//
// Time is compressed: each phase writes back to back and is scaled to an
// hour by its counts.
func kubeStoreBytesRows(t *testing.T, k *testenv.KubeAPIServer) []reportRow {
	t.Helper()
	admin, err := kubernetes.NewForConfig(k.RestConfig(k.AdminToken()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ns := "store-bytes"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	counter := newCountingTransport()
	m := &costMeter{t: t, admin: admin, etcd: k.Etcd(), client: counter}
	cfg := k.RestConfig(k.AdminToken())
	cfg.WrapTransport, cfg.UserAgent = counter.wrap, "talon-state-kube"
	raw, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := kube.New(ctx, kube.Options{RESTConfig: cfg, Namespace: ns, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	scale := func(c storeCost) storeCost {
		return c.perHour(talontest.StoreBytesNodes, talontest.StoreBytesBeats, talontest.HbPerHour)
	}
	before := scale(updatePhase(t, m, s, raw))
	after := scale(talonPhase(t, m, s))
	split := scale(splitPhase(t, m, s, raw))
	kubelet := kubeletPhase(t, m, k).perHour(talontest.StoreBytesNodes, talontest.KubeletBeats, talontest.KubeletPerHour)
	t.Logf("per worker (kubelet) per hour: before %+v; after %+v; status in a secondary Lease %+v; kubelet %+v", before, after, split, kubelet)

	kb := func(v float64) string { return fmt.Sprintf("%.0f KB", v/1000) }
	row := func(what string, get func(storeCost) float64) reportRow {
		a, l := get(after), get(kubelet)
		return reportRow{
			path: "Kubernetes heartbeats, per worker per hour at default timing: " + what,
			talon: fmt.Sprintf("%s (before renewals: %s; status in a secondary Lease, simulated: %s)",
				kb(a), kb(get(before)), kb(get(split))),
			limit: kb(l) + " a kubelet's node Lease renewals",
			ratio: fmt.Sprintf("%.2f", a/l),
			goal:  "<= kubelet", met: a <= l,
		}
	}
	return []reportRow{
		row("request bodies (API server's apiserver_request_body_size_bytes)", func(c storeCost) float64 { return c.requestBody }),
		row("bytes etcd stored (etcd_debugging_mvcc_total_put_size_in_bytes)", func(c storeCost) float64 { return c.etcdPut }),
		row("bytes etcd received (etcd_network_client_grpc_received_bytes_total)", func(c storeCost) float64 { return c.etcdReceived }),
	}
}

// measure returns what beat(w, seq) for every worker and seq in
// 1..storeBytesBeats cost.
func measure(t *testing.T, m *costMeter, name string, beat func(w int, seq uint64)) storeCost {
	t.Helper()
	start := m.read()
	for seq := uint64(1); seq <= talontest.StoreBytesBeats; seq++ {
		for w := range talontest.StoreBytesNodes {
			beat(w, seq)
		}
	}
	cost := diff(m.read(), start)
	t.Logf("%s: %d heartbeats: %+v", name, talontest.StoreBytesNodes*talontest.StoreBytesBeats, cost)
	return cost
}

// talonPhase sends heartbeats through s with StatusEvery(statusEvery).
func talonPhase(t *testing.T, m *costMeter, s *kube.Store) storeCost {
	t.Helper()
	const clusterID = "bytes-after"
	talontest.Register(t, s, clusterID)
	renewed := 0
	cost := measure(t, m, "talon after", func(w int, seq uint64) {
		res, err := s.UpsertNode(context.Background(), talontest.HeartbeatRecord(clusterID, w, seq), 30*time.Second, state.Heartbeat(), state.StatusEvery(talontest.StatusEvery))
		if err != nil || res.Outcome != state.OutcomeAccepted {
			t.Fatalf("heartbeat %d of worker %d = %+v, %v", seq, w, res, err)
		}
		if res.Renewed {
			renewed++
		}
	})
	t.Logf("talon after: %d of %d heartbeats renewed", renewed, talontest.StoreBytesNodes*talontest.StoreBytesBeats)
	logLeaseSize(t, "talon after", getLease(t, m, s.Namespace(), talontest.HeartbeatRecord(clusterID, 0, 0).Key()))
	return cost
}

func getLease(t *testing.T, m *costMeter, ns string, key cluster.Key) *coordv1.Lease {
	t.Helper()
	l, err := m.admin.CoordinationV1().Leases(ns).Get(context.Background(), kube.LeaseName(key), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// updatePhase is the store before renewals: every heartbeat an UPDATE of
// the whole Lease with the new status and renewTime.
func updatePhase(t *testing.T, m *costMeter, s *kube.Store, raw *kubernetes.Clientset) storeCost {
	t.Helper()
	const clusterID = "bytes-before"
	talontest.Register(t, s, clusterID)
	leases := raw.CoordinationV1().Leases(s.Namespace())
	held := make([]*coordv1.Lease, talontest.StoreBytesNodes)
	for w := range held {
		held[w] = getLease(t, m, s.Namespace(), talontest.HeartbeatRecord(clusterID, w, 0).Key())
	}
	cost := measure(t, m, "talon before (UPDATE)", func(w int, seq uint64) {
		enc, err := cluster.Encode(talontest.HeartbeatRecord(clusterID, w, seq))
		if err != nil {
			t.Fatal(err)
		}
		next := held[w].DeepCopy()
		now := metav1.NewMicroTime(time.Now())
		next.Annotations[kube.AnnotationStatus], next.Spec.RenewTime = string(enc), &now
		if held[w], err = leases.Update(context.Background(), next, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	logLeaseSize(t, "talon before", held[0])
	return cost
}

// splitPhase simulates the status in a secondary object: each worker's
// Lease without its status (labels and slot annotations kept) is renewed
// by a merge patch every heartbeat, and a second Lease holding the status
// is patched once a status interval.
func splitPhase(t *testing.T, m *costMeter, s *kube.Store, raw *kubernetes.Clientset) storeCost {
	t.Helper()
	const clusterID = "bytes-split"
	talontest.Register(t, s, clusterID)
	ctx := context.Background()
	leases := raw.CoordinationV1().Leases(s.Namespace())
	names := make([]string, talontest.StoreBytesNodes)
	for w := range names {
		l := getLease(t, m, s.Namespace(), talontest.HeartbeatRecord(clusterID, w, 0).Key())
		names[w] = l.Name
		status := &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: l.Name + "-status", Labels: l.Labels,
			Annotations: map[string]string{kube.AnnotationStatus: l.Annotations[kube.AnnotationStatus]}}}
		if _, err := leases.Create(ctx, status, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := leases.Patch(ctx, l.Name, types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+kube.AnnotationStatus+`":null}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	patch := func(name string, p map[string]any) {
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := leases.Patch(ctx, name, types.MergePatchType, b, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cost := measure(t, m, "status in a secondary Lease (simulated)", func(w int, seq uint64) {
		patch(names[w], map[string]any{
			"metadata": map[string]any{"annotations": map[string]string{kube.AnnotationRenewSeq: strconv.FormatUint(seq, 10)}},
			"spec":     map[string]any{"renewTime": metav1.NewMicroTime(time.Now())},
		})
		if seq%talontest.StatusEvery == 0 {
			enc, err := cluster.Encode(talontest.HeartbeatRecord(clusterID, w, seq))
			if err != nil {
				t.Fatal(err)
			}
			patch(names[w]+"-status", map[string]any{"metadata": map[string]any{"annotations": map[string]string{kube.AnnotationStatus: string(enc)}}})
		}
	})
	logLeaseSize(t, "liveness-only", getLease(t, m, s.Namespace(), talontest.HeartbeatRecord(clusterID, 0, 0).Key()))
	return cost
}

// kubeletPhase creates talontest.StoreBytesNodes Nodes and their node Leases in
// kube-node-lease (not measured), then renews each kubeletBeats times as
// the kubelet does: one GET, then UPDATEs of the Lease it got back with a
// new renewTime, in protobuf, as user agent kubelet.
func kubeletPhase(t *testing.T, m *costMeter, k *testenv.KubeAPIServer) storeCost {
	t.Helper()
	ctx := context.Background()
	cfg := k.RestConfig(k.AdminToken())
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.UserAgent = "kubelet/v1.37.0 (linux/amd64) kubernetes/0000000"
	cfg.WrapTransport = m.client.wrap
	kubelet, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	leases := kubelet.CoordinationV1().Leases("kube-node-lease")
	if _, err := m.admin.CoreV1().Namespaces().Get(ctx, "kube-node-lease", metav1.GetOptions{}); err != nil {
		if _, err := m.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-node-lease"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	held := make([]*coordv1.Lease, talontest.StoreBytesNodes)
	for i := range held {
		name := fmt.Sprintf("ip-10-42-17-%d.eu-west-1.compute.internal", 100+i)
		node, err := m.admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		secs := int32(40)
		now := metav1.NewMicroTime(time.Now())
		if _, err := leases.Create(ctx, &coordv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: name, UID: node.UID}}},
			Spec: coordv1.LeaseSpec{HolderIdentity: &name, LeaseDurationSeconds: &secs, RenewTime: &now},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	start := m.read()
	for i := range held {
		l, err := leases.Get(ctx, fmt.Sprintf("ip-10-42-17-%d.eu-west-1.compute.internal", 100+i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		held[i] = l
	}
	for range talontest.KubeletBeats {
		for i, l := range held {
			next := l.DeepCopy()
			now := metav1.NewMicroTime(time.Now())
			next.Spec.RenewTime = &now
			if held[i], err = leases.Update(ctx, next, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	cost := diff(m.read(), start)
	logLeaseSize(t, "kubelet", held[0])
	t.Logf("kubelet: %d renewals: %+v", talontest.StoreBytesNodes*talontest.KubeletBeats, cost)
	return cost
}

func diff(a, b storeCost) storeCost {
	return storeCost{a.requests - b.requests, a.requestBody - b.requestBody, a.etcdPut - b.etcdPut,
		a.etcdReceived - b.etcdReceived, a.dbInUse - b.dbInUse, a.clientBody - b.clientBody}
}

// logLeaseSize logs the protobuf size of l and of its parts.
func logLeaseSize(t *testing.T, what string, l *coordv1.Lease) {
	mf := 0
	for _, f := range l.ManagedFields {
		mf += f.Size()
	}
	ann := 0
	for k, v := range l.Annotations {
		ann += len(k) + len(v)
	}
	lab := 0
	for k, v := range l.Labels {
		lab += len(k) + len(v)
	}
	t.Logf("%s Lease: %d bytes protobuf; managedFields %d (%d entries), annotations %d, labels %d, spec %d", what, l.Size(), mf, len(l.ManagedFields), ann, lab, l.Spec.Size())
}
