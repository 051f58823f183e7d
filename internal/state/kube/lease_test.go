package kube

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

// TestKubeBackend holds the Kubernetes-specific integration cases. They
// run against a kube-apiserver with its watch cache on (as in a real
// cluster: consistent lists and watches are served from the cache) and
// one with it off (lists and watches read etcd, as the contract suite's
// compaction cases need), each case in its own namespace as the
// deployment's ServiceAccount.
func TestKubeBackend(t *testing.T) {
	for _, tc := range []struct {
		name       string
		watchCache bool
		args       []string
	}{
		{"watchcache=on", true, nil},
		{"watchcache=off", false, []string{"--watch-cache=false"}},
	} {
		t.Run(tc.name, func(t *testing.T) { testKubeBackend(t, startKube(t, tc.args...), tc.watchCache) })
	}
}

func testKubeBackend(t *testing.T, k *kubeEnv, watchCache bool) {
	setup := func(t *testing.T, edit func(*Options)) (*Store, *coordinator) {
		ns := k.namespace(t, "kube")
		c := k.applyRBAC(t, ns)
		return k.newStore(t, c.token, ns, edit), c
	}
	getLease := func(t *testing.T, ns string, key cluster.Key) *coordv1.Lease {
		t.Helper()
		l, err := k.admin.CoordinationV1().Leases(ns).Get(testCtx(t), LeaseName(key), metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get lease of %s: %v", key, err)
		}
		return l
	}
	// waitGone waits until key's Lease no longer exists.
	waitGone := func(t *testing.T, ns string, key cluster.Key, within time.Duration) {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			_, err := k.admin.CoordinationV1().Leases(ns).Get(testCtx(t), LeaseName(key), metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("lease of %s still there after %s (get: %v)", key, within, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	t.Run("LeaseObject", func(t *testing.T) {
		s, c := setup(t, nil)
		ctx := testCtx(t)
		// Uppercase, '_' and a trailing '.' are valid IDs but not DNS-1123
		// names or (at the end) label values.
		suffix := randomSuffix()
		clusterID := "Prod_EU." + suffix
		rec := record(clusterID, cluster.RoleWorker, "Node_A.", "inc-a", 1)
		res, err := s.UpsertNode(ctx, rec, 1500*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		l := getLease(t, c.namespace, rec.Key())
		if want := "talon-prod-eu-" + suffix + "-worker-node-a--"; !strings.HasPrefix(l.Name, want) || len(l.Name) != len(want)+16 {
			t.Errorf("lease name %q, want %q and 16 hex digits", l.Name, want)
		}
		wantLabels := map[string]string{
			LabelManagedBy: ManagedByValue,
			LabelCluster:   clusterID, // uppercase and '_' are fine in label values
			LabelRole:      "worker",
			LabelNode:      LabelValue("Node_A."),
		}
		for k, v := range wantLabels {
			if l.Labels[k] != v {
				t.Errorf("label %s = %q, want %q", k, l.Labels[k], v)
			}
		}
		if l.Labels[LabelNode] == "Node_A." {
			t.Errorf("label %s holds the invalid value as is", LabelNode)
		}
		wantAnn := map[string]string{AnnotationCluster: clusterID, AnnotationRole: "worker", AnnotationNode: "Node_A."}
		for k, v := range wantAnn {
			if l.Annotations[k] != v {
				t.Errorf("annotation %s = %q, want %q", k, l.Annotations[k], v)
			}
		}
		stored, err := cluster.Decode([]byte(l.Annotations[AnnotationStatus]))
		if err != nil {
			t.Fatalf("decode %s: %v", AnnotationStatus, err)
		}
		// The annotation holds the writer's stamp; the result, the time
		// this store saw its write land (the record's age origin here).
		if stored.HeartbeatSeq != 1 || stored.UpdatedAtUnixMs > res.Record.UpdatedAtUnixMs || res.Record.UpdatedAtUnixMs-stored.UpdatedAtUnixMs > 5000 {
			t.Errorf("annotation holds %+v, want the written record stamped at most 5 s before %d", stored, res.Record.UpdatedAtUnixMs)
		}
		spec := l.Spec
		if spec.HolderIdentity == nil || *spec.HolderIdentity != "inc-a" {
			t.Errorf("holderIdentity = %v, want inc-a", spec.HolderIdentity)
		}
		if spec.LeaseDurationSeconds == nil || *spec.LeaseDurationSeconds != 2 {
			t.Errorf("leaseDurationSeconds = %v, want 1.5s rounded up to 2", spec.LeaseDurationSeconds)
		}
		if spec.RenewTime == nil || spec.RenewTime.UnixMilli() != stored.UpdatedAtUnixMs {
			t.Errorf("renewTime = %v, want the accept time %d", spec.RenewTime, res.Record.UpdatedAtUnixMs)
		}
		if spec.AcquireTime == nil || !spec.AcquireTime.Equal(spec.RenewTime) {
			t.Errorf("acquireTime = %v, want the first renewTime %v", spec.AcquireTime, spec.RenewTime)
		}
		if spec.LeaseTransitions == nil || *spec.LeaseTransitions != 0 {
			t.Errorf("leaseTransitions = %v, want 0", spec.LeaseTransitions)
		}
		if l.ResourceVersion != res.Revision.String() {
			t.Errorf("write revision %s, lease resourceVersion %s", res.Revision, l.ResourceVersion)
		}
		acquired := *spec.AcquireTime

		// Same incarnation: renewed, same tenure.
		time.Sleep(5 * time.Millisecond)
		if _, err := s.UpsertNode(ctx, record(clusterID, cluster.RoleWorker, "Node_A.", "inc-a", 2), time.Minute); err != nil {
			t.Fatal(err)
		}
		l = getLease(t, c.namespace, rec.Key())
		if !l.Spec.AcquireTime.Equal(&acquired) || *l.Spec.LeaseTransitions != 0 || *l.Spec.LeaseDurationSeconds != 60 {
			t.Errorf("after an advance: acquireTime %v (was %v), transitions %d, duration %d", l.Spec.AcquireTime, acquired, *l.Spec.LeaseTransitions, *l.Spec.LeaseDurationSeconds)
		}
		if !l.Spec.RenewTime.After(acquired.Time) {
			t.Errorf("renewTime %v not after acquireTime %v", l.Spec.RenewTime, acquired)
		}

		// New incarnation: a transition and a new tenure.
		time.Sleep(5 * time.Millisecond)
		if _, err := s.UpsertNode(ctx, record(clusterID, cluster.RoleWorker, "Node_A.", "inc-b", 0), time.Minute); err != nil {
			t.Fatal(err)
		}
		l = getLease(t, c.namespace, rec.Key())
		if *l.Spec.HolderIdentity != "inc-b" || *l.Spec.LeaseTransitions != 1 || !l.Spec.AcquireTime.After(acquired.Time) {
			t.Errorf("after a restart: holder %s, transitions %d, acquireTime %v (was %v)", *l.Spec.HolderIdentity, *l.Spec.LeaseTransitions, l.Spec.AcquireTime, acquired)
		}
		snap, err := s.Snapshot(ctx, clusterID)
		if err != nil || len(snap.Records) != 1 || snap.Records[0].IncarnationID != "inc-b" {
			t.Fatalf("Snapshot = %+v, %v; want the restarted record", snap, err)
		}
	})

	// No reader's clock expires a Lease: past its duration it is still in
	// every snapshot, through any store, until a coordinator proposes the
	// expiry. A late mark keeps the holder's renewTime and duration.
	t.Run("ExpiryOnlyByProposal", func(t *testing.T) {
		a, c := setup(t, nil)
		ahead := k.newStore(t, c.token, c.namespace, func(o *Options) {
			o.Clock = func() time.Time { return time.Now().Add(10 * time.Minute) }
		})
		clusterID := uniqueCluster(t)
		rec := record(clusterID, cluster.RoleWorker, "w1", "inc-a", 1)
		if _, err := a.UpsertNode(testCtx(t), rec, time.Second); err != nil {
			t.Fatal(err)
		}
		before := getLease(t, c.namespace, rec.Key())
		time.Sleep(1100 * time.Millisecond)
		for name, s := range map[string]*Store{"writer": a, "clock ten minutes ahead": ahead} {
			snap, err := s.Snapshot(testCtx(t), clusterID)
			if err != nil || len(snap.Records) != 1 {
				t.Fatalf("snapshot through the %s store after the lease ran out = %+v, %v; want the record", name, snap, err)
			}
		}
		res, err := ahead.ProposeTransition(testCtx(t), rec.Key(), "inc-a", 1, state.TransitionLate)
		if err != nil || res.Outcome != state.OutcomeAccepted || !res.Record.Late {
			t.Fatalf("ProposeTransition(late) = %+v, %v; want accepted with Late", res, err)
		}
		late := getLease(t, c.namespace, rec.Key())
		if !late.Spec.RenewTime.Equal(before.Spec.RenewTime) || *late.Spec.LeaseDurationSeconds != *before.Spec.LeaseDurationSeconds {
			t.Errorf("late mark changed the lease spec: renewTime %v -> %v, duration %d -> %d",
				before.Spec.RenewTime, late.Spec.RenewTime, *before.Spec.LeaseDurationSeconds, *late.Spec.LeaseDurationSeconds)
		}
		if res, err := a.ProposeTransition(testCtx(t), rec.Key(), "inc-a", 1, state.TransitionExpire); err != nil || res.Outcome != state.OutcomeAccepted {
			t.Fatalf("ProposeTransition(expire) = %+v, %v; want accepted", res, err)
		}
		if res, err := ahead.ProposeTransition(testCtx(t), rec.Key(), "inc-a", 1, state.TransitionExpire); err != nil || res.Outcome != state.OutcomeNotFound {
			t.Fatalf("second ProposeTransition(expire) = %+v, %v; want not_found", res, err)
		}
		for _, m := range []struct {
			s                  *Store
			operation, outcome string
			want               float64
		}{
			{ahead, "late", "accepted", 1}, {ahead, "expire", "not_found", 1},
			{a, "expire", "accepted", 1}, {a, "late", "accepted", 0},
		} {
			if got := testutil.ToFloat64(m.s.transitions.WithLabelValues(m.operation, m.outcome)); got != m.want {
				t.Errorf("talon_state_kube_transitions_total{operation=%q,outcome=%q} = %v, want %v", m.operation, m.outcome, got, m.want)
			}
		}
		waitGone(t, c.namespace, rec.Key(), 10*time.Second)
	})

	t.Run("OneDecodePerHeartbeat", func(t *testing.T) {
		s, _ := setup(t, nil)
		clusterID := uniqueCluster(t)
		ctx := testCtx(t)
		if _, err := s.UpsertNode(ctx, record(clusterID, cluster.RoleWorker, "w1", "inc-a", 1), time.Hour); err != nil {
			t.Fatal(err)
		}
		before := s.Stats().RecordDecodes
		for seq := uint64(2); seq <= 11; seq++ {
			res, err := s.UpsertNode(ctx, record(clusterID, cluster.RoleWorker, "w1", "inc-a", seq), time.Hour, state.Heartbeat())
			if err != nil || res.Outcome != state.OutcomeAccepted {
				t.Fatalf("heartbeat %d = %+v, %v", seq, res, err)
			}
		}
		if n := s.Stats().RecordDecodes - before; n != 0 {
			t.Errorf("10 heartbeats through the store that wrote the lease decoded %d records, want 0 (the write cache holds the record)", n)
		}
	})

	t.Run("RemovalRevisionIsTheDeleteEventRevision", func(t *testing.T) {
		s, _ := setup(t, nil)
		clusterID := uniqueCluster(t)
		rec := record(clusterID, cluster.RoleWorker, "w1", "inc-a", 1)
		res, err := s.UpsertNode(testCtx(t), rec, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(testCtx(t))
		defer cancel()
		ch := s.Watch(ctx, clusterID, res.Revision)
		rm, err := s.RemoveNode(testCtx(t), rec.Key(), "inc-a")
		if err != nil || rm.Outcome != state.OutcomeAccepted {
			t.Fatalf("RemoveNode = %+v, %v", rm, err)
		}
		evs := nextEvents(t, ch, 1)
		if evs[0].Type != state.EventDelete || evs[0].Revision != rm.Revision {
			t.Fatalf("event %s %s @%s, want delete @%s (the removal's revision)", evs[0].Type, evs[0].Key, evs[0].Revision, rm.Revision)
		}
	})

	t.Run("WatchResumesAcrossRequests", func(t *testing.T) {
		s, _ := setup(t, nil)
		s.watchSession = time.Second // the API server ends each watch request after a second
		clusterID := uniqueCluster(t)
		snap, err := s.Snapshot(testCtx(t), clusterID)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(testCtx(t))
		defer cancel()
		ch := s.Watch(ctx, clusterID, snap.Revision)
		var want []state.Revision
		for seq := uint64(1); seq <= 8; seq++ {
			res, err := s.UpsertNode(testCtx(t), record(clusterID, cluster.RoleWorker, "w1", "inc-a", seq), time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, res.Revision)
			time.Sleep(400 * time.Millisecond) // 3.2s in all: several watch requests
		}
		got := nextEvents(t, ch, len(want))
		for i, ev := range got {
			if ev.Type != state.EventPut || ev.Revision != want[i] || ev.Record.HeartbeatSeq != uint64(i+1) {
				t.Fatalf("event %d: %s seq %d @%s, want put seq %d @%s", i, ev.Type, ev.Record.HeartbeatSeq, ev.Revision, i+1, want[i])
			}
		}
	})

	t.Run("UnreadableLeases", func(t *testing.T) {
		s, c := setup(t, nil)
		clusterID := uniqueCluster(t)
		ctx := testCtx(t)
		good := record(clusterID, cluster.RoleWorker, "good", "inc-a", 1)
		res, err := s.UpsertNode(ctx, good, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		ch := s.Watch(wctx, clusterID, res.Revision)

		// A newer build's record and a corrupted one, written as admin
		// with Talon's labels and a live lease.
		put := func(node, status string) {
			key := cluster.Key{ClusterID: clusterID, Role: cluster.RoleWorker, NodeID: node}
			rec := record(clusterID, cluster.RoleWorker, node, "inc-x", 1)
			enc, _ := cluster.Encode(rec)
			l, _ := buildLease(nil, LeaseName(key), c.namespace, state.Change{Decision: cluster.DecisionInsert, Record: rec, Encoded: enc, TTL: time.Hour}, time.Now())
			l.Annotations[AnnotationStatus] = status
			if _, err := k.admin.CoordinationV1().Leases(c.namespace).Create(ctx, l, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		put("newer", `{"schemaVersion":2,"whatever":true}`)
		put("corrupt", `{"schemaVersion":1,"nodeId":`)

		snap, err := s.Snapshot(ctx, clusterID)
		if err != nil || len(snap.Records) != 1 || snap.Records[0].NodeID != "good" {
			t.Fatalf("Snapshot = %+v, %v; want only the readable record", snap, err)
		}
		// Watchers see what a snapshot would: no record in those slots.
		for i, ev := range nextEvents(t, ch, 2) {
			if ev.Type != state.EventDelete || ev.Key.NodeID != []string{"newer", "corrupt"}[i] {
				t.Fatalf("event %d: %s %s, want delete of newer then corrupt", i, ev.Type, ev.Key)
			}
		}
		// A newer build's record cannot be ordered against: refused.
		_, err = s.UpsertNode(ctx, record(clusterID, cluster.RoleWorker, "newer", "inc-x", 2), time.Hour)
		if !errors.Is(err, state.ErrUnsupportedVersion) {
			t.Fatalf("UpsertNode over a newer schema: %v, want ErrUnsupportedVersion", err)
		}
		// A corrupt one holds no sequence: overwritten as an insert.
		w, err := s.UpsertNode(ctx, record(clusterID, cluster.RoleWorker, "corrupt", "inc-x", 1), time.Hour)
		if err != nil || w.Decision != cluster.DecisionInsert {
			t.Fatalf("UpsertNode over a corrupt record = %+v, %v; want an insert", w, err)
		}
	})

	t.Run("WatchEndsWhenServerStops", func(t *testing.T) {
		s, _ := setup(t, nil)
		clusterID := uniqueCluster(t)
		snap, err := s.Snapshot(testCtx(t), clusterID)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(testCtx(t))
		defer cancel()
		ch := s.Watch(ctx, clusterID, snap.Revision)
		k.srv.Stop()
		defer k.srv.Start()
		var last error
		timeout := time.After(20 * time.Second)
		for done := false; !done; {
			select {
			case b, ok := <-ch:
				if !ok {
					done = true
					break
				}
				if len(b.Events) > 0 {
					t.Fatalf("events from a stopped server: %d", len(b.Events))
				}
				last = b.Err
			case <-timeout:
				t.Fatal("watch still open 20s after the server stopped")
			}
		}
		if !errors.Is(last, state.ErrUnavailable) {
			t.Fatalf("watch ended with %v, want ErrUnavailable", last)
		}
	})

	t.Run("MaximalRecord", func(t *testing.T) {
		// Every field at its limit: 256-byte IDs make a shortened name and
		// hashed label values, and the API server accepts the annotation.
		s, c := setup(t, nil)
		rec := maximalRecord(strings.Repeat("C", 250) + randomSuffix()[:6])
		rec.UpdatedAtUnixMs = 0
		res, err := s.UpsertNode(testCtx(t), rec, time.Hour)
		if err != nil {
			t.Fatalf("UpsertNode(maximal record): %v", err)
		}
		snap, err := s.Snapshot(testCtx(t), rec.ClusterID)
		if err != nil || len(snap.Records) != 1 {
			t.Fatalf("Snapshot = %+v, %v", snap, err)
		}
		want, _ := cluster.Encode(res.Record)
		got, _ := cluster.Encode(snap.Records[0])
		if string(got) != string(want) {
			t.Fatalf("snapshot holds\n%s\nwant\n%s", got, want)
		}
		l := getLease(t, c.namespace, rec.Key())
		if len(l.Name) > 253 || l.Labels[LabelCluster] == rec.ClusterID || l.Labels[LabelNode] == rec.NodeID {
			t.Fatalf("lease %q labels %v: want a bounded name and hashed label values", l.Name, l.Labels)
		}
	})

	t.Run("WriteCache", func(t *testing.T) {
		// Two coordinators relay one worker's heartbeats. Each decides
		// first on the Lease as it last wrote it; a stale guess must cost
		// a retry, never a wrong decision.
		var gets, puts atomic.Int64
		count := func(o *Options) {
			o.RESTConfig.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
				return roundTripFunc(func(r *http.Request) (*http.Response, error) {
					if strings.Contains(r.URL.Path, "/leases/") {
						switch r.Method {
						case http.MethodGet:
							gets.Add(1)
						case http.MethodPut, http.MethodPatch:
							puts.Add(1)
						}
					}
					return rt.RoundTrip(r)
				})
			}
		}
		a, c := setup(t, count)
		b := k.newStore(t, c.token, c.namespace, nil)
		clusterID := uniqueCluster(t)
		ctx := testCtx(t)
		up := func(s *Store, inc string, seq uint64, ttl time.Duration, want cluster.Decision) {
			t.Helper()
			res, err := s.UpsertNode(ctx, record(clusterID, cluster.RoleWorker, "w1", inc, seq), ttl)
			if err != nil || res.Decision != want {
				t.Fatalf("UpsertNode(%s seq %d) = %v, %v; want %s", inc, seq, res.Decision, err, want)
			}
		}
		up(a, "inc-a", 1, time.Hour, cluster.DecisionInsert)
		gets.Store(0)
		puts.Store(0)
		for seq := uint64(2); seq <= 11; seq++ {
			up(a, "inc-a", seq, time.Hour, cluster.DecisionAdvance)
		}
		if g, p := gets.Load(), puts.Load(); g != 0 || p != 10 {
			t.Errorf("10 heartbeats through one store took %d GETs and %d writes (PUT or PATCH), want 0 and 10", g, p)
		}
		if n := a.cache.len(); n != 1 {
			t.Errorf("write cache holds %d entries, want 1", n)
		}

		// b advances the Lease: a's guess is stale and its write conflicts.
		up(b, "inc-a", 12, time.Hour, cluster.DecisionAdvance)
		up(a, "inc-a", 13, time.Hour, cluster.DecisionAdvance)
		// b restarts the process: a's guess (inc-a seq 13) is stale. A
		// registration of inc-a now is refused (inc-b superseded it), and
		// one of a third incarnation is a restart, decided on the stored
		// record, not the guess.
		up(b, "inc-b", 0, time.Hour, cluster.DecisionRestart)
		up(a, "inc-a", 14, time.Hour, cluster.DecisionSuperseded)
		up(a, "inc-c", 0, time.Hour, cluster.DecisionRestart)
		// Rejections on a fresh guess are confirmed by a read.
		gets.Store(0)
		up(a, "inc-c", 0, time.Hour, cluster.DecisionDuplicate)
		if g := gets.Load(); g != 1 {
			t.Errorf("a duplicate took %d GETs, want the 1 that confirms it", g)
		}
		// Removed by b: a's guess is gone and the same sequence inserts.
		if res, err := b.RemoveNode(ctx, cluster.Key{ClusterID: clusterID, Role: cluster.RoleWorker, NodeID: "w1"}, "inc-c"); err != nil || res.Outcome != state.OutcomeAccepted {
			t.Fatalf("RemoveNode = %+v, %v", res, err)
		}
		up(a, "inc-c", 13, time.Second, cluster.DecisionInsert)
		// Expired through b: a's guess is gone, and the write is an insert.
		if res, err := b.ProposeTransition(ctx, cluster.Key{ClusterID: clusterID, Role: cluster.RoleWorker, NodeID: "w1"}, "inc-c", 13, state.TransitionExpire); err != nil || res.Outcome != state.OutcomeAccepted {
			t.Fatalf("ProposeTransition(expire) = %+v, %v", res, err)
		}
		up(a, "inc-d", 1, time.Hour, cluster.DecisionInsert)
		snap, err := b.Snapshot(ctx, clusterID)
		if err != nil || len(snap.Records) != 1 || snap.Records[0].HeartbeatSeq != 1 || snap.Records[0].IncarnationID != "inc-d" {
			t.Fatalf("Snapshot = %+v, %v; want inc-d seq 1", snap, err)
		}
	})

	if watchCache {
		t.Run("WatchFromBeforeAPIServerRestartIsCompacted", func(t *testing.T) {
			// A restarted API server fills its watch cache from a fresh
			// list: the history before it is gone, as after compaction.
			// This is how "too old resource version" reaches a store in a
			// real cluster; the caller relists and watches again.
			s, _ := setup(t, nil)
			clusterID := uniqueCluster(t)
			old, err := s.Snapshot(testCtx(t), clusterID)
			if err != nil {
				t.Fatal(err)
			}
			rec := record(clusterID, cluster.RoleWorker, "w1", "inc-a", 1)
			if _, err := s.UpsertNode(testCtx(t), rec, time.Hour); err != nil {
				t.Fatal(err)
			}
			k.srv.Stop()
			k.srv.Start()
			ctx, cancel := context.WithCancel(testCtx(t))
			defer cancel()
			var last error
			for b := range s.Watch(ctx, clusterID, old.Revision) {
				if len(b.Events) > 0 {
					t.Fatalf("watch from before the restart delivered %d events", len(b.Events))
				}
				last = b.Err
			}
			if !errors.Is(last, state.ErrCompacted) {
				t.Fatalf("watch from before the restart ended with %v, want ErrCompacted", last)
			}
			snap, err := s.Snapshot(testCtx(t), clusterID)
			if err != nil || len(snap.Records) != 1 {
				t.Fatalf("Snapshot after the restart = %+v, %v", snap, err)
			}
			ch := s.Watch(ctx, clusterID, snap.Revision)
			res, err := s.UpsertNode(testCtx(t), record(clusterID, cluster.RoleWorker, "w1", "inc-a", 2), time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			if ev := nextEvents(t, ch, 1)[0]; ev.Type != state.EventPut || ev.Revision != res.Revision {
				t.Fatalf("event %s @%s after relisting, want put @%s", ev.Type, ev.Revision, res.Revision)
			}
		})
	}

	t.Run("Kubeconfig", func(t *testing.T) {
		_, c := setup(t, nil)
		s, err := New(context.Background(), Options{Kubeconfig: k.srv.WriteKubeconfig(t, c.token), Namespace: c.namespace})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.CheckReady(testCtx(t)); err != nil {
			t.Fatalf("CheckReady through a kubeconfig: %v", err)
		}
	})
}

// roundTripFunc adapts a function to http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// nextEvents reads n events from ch, failing on an error, a close or a
// ten-second wait.
func nextEvents(t *testing.T, ch <-chan state.WatchBatch, n int) []state.Event {
	t.Helper()
	var got []state.Event
	timeout := time.After(10 * time.Second)
	for len(got) < n {
		select {
		case b, ok := <-ch:
			if !ok {
				t.Fatalf("watch closed after %d of %d events", len(got), n)
			}
			if b.Err != nil {
				t.Fatalf("watch ended with %v after %d of %d events", b.Err, len(got), n)
			}
			got = append(got, b.Events...)
		case <-timeout:
			t.Fatalf("%d of %d events within 10s", len(got), n)
		}
	}
	if len(got) > n {
		t.Fatalf("got %d events, want %d", len(got), n)
	}
	return got
}
