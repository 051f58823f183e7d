package bench_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/talonhq/talon/internal/bench"
	"github.com/talonhq/talon/internal/state/kube"
	"github.com/talonhq/talon/internal/testenv"
)

// kubeRequests counts what the raw writers send to a fake API server:
// renewal patches, status patches and updates, with the largest renewal.
type kubeRequests struct {
	mu                                sync.Mutex
	renewals, statusPatches, updates  int
	other                             []string
	largestRenewal, smallestStatusLen int
}

func (k *kubeRequests) react(a k8stesting.Action) (bool, runtime.Object, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	switch a := a.(type) {
	case k8stesting.PatchAction:
		var p struct {
			Metadata struct {
				ResourceVersion *string            `json:"resourceVersion"`
				Annotations     map[string]*string `json:"annotations"`
			} `json:"metadata"`
		}
		// The fake API server issues no resourceVersions; the patch must
		// still carry the one the writer read, as its precondition.
		if err := json.Unmarshal(a.GetPatch(), &p); err != nil || p.Metadata.ResourceVersion == nil {
			k.other = append(k.other, "patch without a resourceVersion: "+string(a.GetPatch()))
			return false, nil, nil
		}
		_, status := p.Metadata.Annotations[kube.AnnotationStatus]
		seq, renew := p.Metadata.Annotations[kube.AnnotationRenewSeq]
		switch {
		case status && renew && seq == nil: // a status write drops the renewal's sequence
			k.statusPatches++
			if n := len(a.GetPatch()); k.smallestStatusLen == 0 || n < k.smallestStatusLen {
				k.smallestStatusLen = n
			}
		case renew && seq != nil && len(p.Metadata.Annotations) == 1:
			k.renewals++
			k.largestRenewal = max(k.largestRenewal, len(a.GetPatch()))
		default:
			k.other = append(k.other, string(a.GetPatch()))
		}
	case k8stesting.UpdateAction:
		k.updates++
	}
	return false, nil, nil // the tracker applies it
}

// TestRawKubeMix drives the raw Kubernetes writers against a fake API
// server that counts what they send: with the renew mix at the default
// status interval, 11 small renewal patches to 1 status patch per writer;
// with the write mix, an update per heartbeat.
func TestRawKubeMix(t *testing.T) {
	cs := fake.NewClientset()
	reqs := &kubeRequests{}
	cs.PrependReactor("patch", "leases", reqs.react)
	cs.PrependReactor("update", "leases", reqs.react)
	ctx := context.Background()
	const writers = 4
	r, created, err := bench.PrepareRawKube(ctx, cs, bench.RawKubeOptions{Namespace: "ns", NamePrefix: "raw-", Writers: writers, LeaseTTL: 2 * time.Minute})
	if err != nil || created != writers || r.Created() != writers {
		t.Fatalf("prepare: %v, created %d", err, created)
	}
	l, err := cs.CoordinationV1().Leases("ns").Get(ctx, "raw-w00003", metav1.GetOptions{})
	if err != nil || l.Annotations[kube.AnnotationStatus] == "" || *l.Spec.LeaseDurationSeconds != 120 || l.Labels[bench.RawLabel] != "true" {
		t.Fatalf("lease %+v: %v", l, err)
	}

	// Phases of a second until there are enough heartbeats to check the
	// mix: the fake API server is slow under -race on a loaded machine.
	var phases []bench.Result
	for total := 0; total < 24*writers && len(phases) < 60; {
		p := r.Run(ctx, time.Second, bench.MixRenew, 12)
		phases, total = append(phases, p), total+p.Ops
	}
	res := bench.Merge(phases...)
	checkMix(t, "renew", res, reqs.renewals, reqs.statusPatches, writers)
	if len(reqs.other) > 0 || reqs.updates != 0 {
		t.Fatalf("unexpected requests: %d updates, %q", reqs.updates, reqs.other)
	}
	if reqs.largestRenewal > 200 || reqs.smallestStatusLen < bench.RecordBytes() {
		t.Fatalf("renewal patches up to %d bytes (want about 140), status patches from %d (want the record's %d and more)",
			reqs.largestRenewal, reqs.smallestStatusLen, bench.RecordBytes())
	}
	l, err = cs.CoordinationV1().Leases("ns").Get(ctx, "raw-w00000", metav1.GetOptions{})
	if err != nil || l.Annotations[kube.AnnotationStatus] == "" || l.Spec.RenewTime == nil {
		t.Fatalf("lease after the renew mix %+v: %v", l, err)
	}

	reqs.renewals, reqs.statusPatches = 0, 0
	res = r.Run(ctx, 200*time.Millisecond, bench.MixWrite, 12)
	if res.Ops == 0 || res.Renewals != 0 || reqs.updates != res.Ops || reqs.renewals+reqs.statusPatches != 0 || res.FailureCount() != 0 {
		t.Fatalf("write mix: %d ok, %d renewals, %d failures (%v); sent %d updates, %d patches",
			res.Ops, res.Renewals, res.FailureCount(), res.FirstErr, reqs.updates, reqs.renewals+reqs.statusPatches)
	}
	r.Close()
}

// checkMix checks a renew-mix phase at the default status interval:
// every heartbeat counted by the backend, and per writer 11 renewals to
// each write (give or take the interval each writer was in when the
// phase ended).
func checkMix(t *testing.T, name string, res bench.Result, renewals, writes, writers int) {
	t.Helper()
	if res.FailureCount() != 0 || res.Ops < 24*writers {
		t.Fatalf("%s: %d ok, failures %v (first %v): too few to check the mix", name, res.Ops, res.Failures, res.FirstErr)
	}
	if renewals != res.Renewals || renewals+writes != res.Ops {
		t.Fatalf("%s: the backend saw %d renewals and %d writes; the phase counted %d ok, %d renewals", name, renewals, writes, res.Ops, res.Renewals)
	}
	if renewals < 11*writes || renewals > 11*writes+11*writers {
		t.Fatalf("%s: %d renewals to %d writes, want 11 to 1 per writer", name, renewals, writes)
	}
}

// TestRawEtcdMix runs the raw etcd writers against a real etcd and reads
// what etcd itself counted: LeaseKeepAlive requests received and puts;
// each writer on a keepalive stream of its own, and the writers sharing
// two.
func TestRawEtcdMix(t *testing.T) {
	testenv.SkipIfShort(t)
	e := testenv.StartEtcd(t, testenv.EtcdOptions{})
	cli := e.Client(t)
	ctx := context.Background()
	const writers = 4
	for _, streams := range []int{0, 2} {
		t.Run(fmt.Sprintf("streams=%d", streams), func(t *testing.T) {
			prefix := fmt.Sprintf("/raw%d", streams)
			r, err := bench.PrepareRawEtcd(ctx, cli, bench.RawEtcdOptions{Prefix: prefix, Writers: writers, LeaseTTL: time.Minute, Streams: streams})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if r.Created() != writers {
				t.Fatalf("created %d leases", r.Created())
			}
			ka0, puts0 := etcdCounts(t, e.Endpoints()[0])
			res := r.Run(ctx, 500*time.Millisecond, bench.MixRenew, 12)
			ka1, puts1 := etcdCounts(t, e.Endpoints()[0])
			checkMix(t, "renew", res, ka1-ka0, puts1-puts0, writers)

			res = r.Run(ctx, 300*time.Millisecond, bench.MixWrite, 12)
			ka2, puts2 := etcdCounts(t, e.Endpoints()[0])
			if res.Ops == 0 || res.FailureCount() != 0 || res.Renewals != 0 || ka2 != ka1 || puts2-puts1 != res.Ops {
				t.Fatalf("write mix: %d ok, %d renewals, failures %v; etcd saw %d keepalives and %d puts", res.Ops, res.Renewals, res.Failures, ka2-ka1, puts2-puts1)
			}
			if keys, leases, err := bench.CleanEtcd(ctx, cli, prefix+"/"); err != nil || keys != writers || leases != writers {
				t.Fatalf("clean: %d keys, %d leases: %v", keys, leases, err)
			}
		})
	}
}

// etcdCounts reads the LeaseKeepAlive requests etcd received and the puts
// it applied from its metrics.
func etcdCounts(t *testing.T, endpoint string) (keepAlives, puts int) {
	t.Helper()
	resp, err := http.Get(endpoint + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	found := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var n *int
		switch {
		case strings.HasPrefix(line, "grpc_server_msg_received_total{") && strings.Contains(line, `grpc_method="LeaseKeepAlive"`):
			n = &keepAlives
		case strings.HasPrefix(line, "etcd_mvcc_put_total "):
			n = &puts
		default:
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		*n = int(v)
		found++
	}
	if err := sc.Err(); err != nil || found != 2 {
		t.Fatalf("etcd metrics: found %d of the 2 counters: %v", found, err)
	}
	return keepAlives, puts
}
