package kube

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

// requestLog records the method and body size of every request a store
// sends.
type requestLog struct {
	mu   sync.Mutex
	reqs []string // "METHOD size"
}

func (l *requestLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		l.mu.Lock()
		l.reqs = append(l.reqs, r.Method+" "+strconv.FormatInt(r.ContentLength, 10))
		l.mu.Unlock()
		return rt.RoundTrip(r)
	})
}

func (l *requestLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.reqs
	l.reqs = nil
	return r
}

// TestRenewals checks, on a real kube-apiserver and with the deployment's
// RBAC, that a heartbeat that changes nothing within a status interval
// is one small PATCH, that every reader (a LIST snapshot, another
// coordinator's snapshot cache, a watch) sees its sequence, that the
// ordering rule and transitions count it, and that a full write drops the
// renewal annotation.
func TestRenewals(t *testing.T) {
	k := startKube(t)
	ns := k.namespace(t, "renew")
	c := k.applyRBAC(t, ns)
	log := &requestLog{}
	s := k.newStore(t, c.token, ns, func(o *Options) { o.RESTConfig.WrapTransport = log.wrap })
	peer := k.newStore(t, c.token, ns, func(o *Options) { o.CacheSnapshots = true; o.Identity = "peer-" + randomSuffix() })
	clusterID := uniqueCluster(t)
	ctx := testCtx(t)
	hb := func(seq uint64, every uint64) state.WriteResult {
		t.Helper()
		rec := typicalRecord(clusterID, "w1")
		rec.HeartbeatSeq, rec.Counters.RequestsTotal = seq, seq*100
		res, err := s.UpsertNode(ctx, rec, 30*time.Second, state.Heartbeat(), state.StatusEvery(every))
		if err != nil {
			t.Fatalf("heartbeat %d: %v", seq, err)
		}
		return res
	}
	reg := typicalRecord(clusterID, "w1")
	reg.HeartbeatSeq = 0
	res, err := s.UpsertNode(ctx, reg, 30*time.Second)
	if err != nil || res.Outcome != state.OutcomeAccepted {
		t.Fatalf("register = %+v, %v", res, err)
	}
	waitCacheServing(t, peer, clusterID)
	w := peer.Watch(ctx, clusterID, res.Revision)
	log.take()

	for seq := uint64(1); seq <= 3; seq++ {
		if r := hb(seq, 5); !r.Renewed || r.Outcome != state.OutcomeAccepted || r.Record.HeartbeatSeq != seq || r.Record.Counters.RequestsTotal != reg.Counters.RequestsTotal {
			t.Fatalf("quiet heartbeat %d = %+v; want accepted, renewed, the registered status at seq %d", seq, r, seq)
		}
	}
	reqs := log.take()
	for _, r := range reqs {
		method, size, _ := cutSize(r)
		if method != http.MethodPatch || size > 200 {
			t.Fatalf("a renewal sent %q (all: %v); want one PATCH of at most 200 bytes each", r, reqs)
		}
	}
	if len(reqs) != 3 || s.Stats().Renewals != 3 {
		t.Fatalf("three renewals sent %v, Stats.Renewals %d; want three PATCHes", reqs, s.Stats().Renewals)
	}

	l, err := k.admin.CoordinationV1().Leases(ns).Get(ctx, LeaseName(reg.Key()), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	status, _, err := decodeStatus(l, reg.Key())
	if err != nil || status.HeartbeatSeq != 0 || l.Annotations[AnnotationRenewSeq] != "3" {
		t.Fatalf("after three renewals the Lease holds status seq %v (%v) and %s %q; want 0 and \"3\"", status, err, AnnotationRenewSeq, l.Annotations[AnnotationRenewSeq])
	}
	// Every reader sees the renewals: a LIST, another coordinator's cache
	// and its watch.
	for name, st := range map[string]*Store{"list": s, "peer's cache": peer} {
		snap, err := st.Snapshot(ctx, clusterID)
		if err != nil || len(snap.Records) != 1 || snap.Records[0].HeartbeatSeq != 3 {
			t.Fatalf("%s snapshot after three renewals = %+v, %v; want the record at seq 3", name, snap, err)
		}
	}
	for i, e := range nextEvents(t, w, 3) {
		if e.Type != state.EventPut || e.Record.HeartbeatSeq != uint64(i+1) {
			t.Fatalf("watch event %d = %+v; want a put at seq %d", i, e, i+1)
		}
	}

	// The ordering rule and transitions count the renewals.
	if r := hb(2, 5); r.Outcome != state.OutcomeStale {
		t.Fatalf("heartbeat 2 after the renewal of 3 = %+v; want stale", r)
	}
	pr, err := s.ProposeTransition(ctx, reg.Key(), reg.IncarnationID, 2, state.TransitionLate, state.MinSilence(time.Second))
	if err != nil || pr.Outcome != state.OutcomeStale {
		t.Fatalf("late proposed for seq 2 after the renewal of 3 = %+v, %v; want stale", pr, err)
	}

	// A renewal decided on a Lease someone changed since fails its
	// precondition, reads again and renews what is there.
	if _, err := k.admin.CoordinationV1().Leases(ns).Patch(ctx, l.Name, types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"example.com/owner":"ops"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if r := hb(4, 5); !r.Renewed || r.Record.HeartbeatSeq != 4 {
		t.Fatalf("renewal after a change by someone else = %+v; want renewed at seq 4", r)
	}

	// The status interval (5 heartbeats after the status at 0) writes the
	// record and drops the renewal annotation; other owners' keys stay.
	if r := hb(5, 5); r.Renewed || r.Record.HeartbeatSeq != 5 || r.Record.Counters.RequestsTotal != 500 {
		t.Fatalf("heartbeat 5, a status interval after the status = %+v; want the record written", r)
	}
	l, err = k.admin.CoordinationV1().Leases(ns).Get(ctx, l.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := l.Annotations[AnnotationRenewSeq]; ok || l.Annotations["example.com/owner"] != "ops" {
		t.Fatalf("after a full write the Lease's annotations are %v; want no %s and example.com/owner kept", keys(l.Annotations), AnnotationRenewSeq)
	}
	if r := hb(6, 5); !r.Renewed {
		t.Fatalf("quiet heartbeat 6 after the status write = %+v; want renewed", r)
	}

	// A renewal annotation that is not a sequence makes the Lease
	// unreadable, as a malformed status does.
	if _, err := k.admin.CoordinationV1().Leases(ns).Patch(ctx, l.Name, types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"`+AnnotationRenewSeq+`":"seven"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if snap, err := s.Snapshot(ctx, clusterID); err != nil || len(snap.Records) != 0 {
		t.Fatalf("snapshot with a malformed %s = %+v, %v; want the Lease skipped", AnnotationRenewSeq, snap, err)
	}
	if r := hb(7, 5); r.Outcome != state.OutcomeNotFound {
		t.Fatalf("heartbeat to a Lease with a malformed %s = %+v; want not_found (register again)", AnnotationRenewSeq, r)
	}
}

func cutSize(r string) (method string, size int64, err error) {
	for i := range len(r) {
		if r[i] == ' ' {
			size, err = strconv.ParseInt(r[i+1:], 10, 64)
			return r[:i], size, err
		}
	}
	return r, 0, nil
}

func keys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// TestWritePatch checks the merge patch of a full write: only what
// changed, a removed annotation as null, the precondition always.
func TestWritePatch(t *testing.T) {
	rec := typicalRecord("c1", "w1")
	enc, err := cluster.Encode(rec)
	if err != nil {
		t.Fatal(err)
	}
	ch := state.Change{Decision: cluster.DecisionInsert, Record: rec, Encoded: enc, TTL: 30 * time.Second}
	cur, err := buildLease(nil, LeaseName(rec.Key()), "ns", ch, time.Unix(100, 0))
	if err != nil {
		t.Fatal(err)
	}
	cur.ResourceVersion = "41"
	cur.Annotations[AnnotationRenewSeq] = "9"
	late := rec.Clone()
	late.Late = true
	lenc, _ := cluster.Encode(late)
	next, err := buildLease(cur, cur.Name, "ns", state.Change{Record: late, Encoded: lenc, KeepLease: true}, time.Unix(200, 0))
	if err != nil {
		t.Fatal(err)
	}
	got, err := writePatch(cur, next)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"metadata": map[string]any{
		"resourceVersion": "41",
		"annotations":     map[string]any{AnnotationRenewSeq: nil, AnnotationStatus: string(lenc)},
	}}
	var decoded map[string]any
	if err := json.Unmarshal(got, &decoded); err != nil || !reflect.DeepEqual(decoded, want) {
		t.Fatalf("late mark patch =\n%s\nwant\n%s", got, want)
	}
}
