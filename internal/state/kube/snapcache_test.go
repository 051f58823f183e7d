package kube

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/testenv"
)

// TestSnapshotCache holds the snapshot cache's cases against a real
// kube-apiserver, with its watch cache on (the cache's watch and the probes
// are served from the API server's watch cache) and off (they read etcd).
func TestSnapshotCache(t *testing.T) {
	for _, tc := range []struct {
		name         string
		noWatchCache bool
	}{
		{"watchcache=on", false},
		{"watchcache=off", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testSnapshotCache(t, startKubeWith(t, testenv.KubeOptions{NoWatchCache: tc.noWatchCache}))
		})
	}
}

func testSnapshotCache(t *testing.T, k *kubeEnv) {
	setup := func(t *testing.T) (cached, plain *Store, c *coordinator) {
		ns := k.namespace(t, "snapcache")
		c = k.applyRBAC(t, ns)
		cached = k.newStore(t, c.token, ns, func(o *Options) { o.CacheSnapshots = true; o.Identity = "coord-" + randomSuffix() })
		plain = k.newStore(t, c.token, ns, nil)
		return cached, plain, c
	}
	// unrelated advances the revision with a write the cache's watch never
	// sees (a ConfigMap) and returns its resourceVersion.
	unrelated := func(t *testing.T, ns string) uint64 {
		t.Helper()
		cm, err := k.admin.CoreV1().ConfigMaps(ns).Create(testCtx(t), &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "unrelated-"}, Data: map[string]string{"k": "v"},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create ConfigMap: %v", err)
		}
		return mustRevision(t, cm.ResourceVersion)
	}

	// ReadAfterWriteAcrossStores: a Lease written through another store,
	// then an unrelated write that advances the revision past it with no
	// event for the cache, then a Snapshot through the caching store: the
	// answer holds the write and its revision is at least the unrelated
	// write's, so it came from a cache that had caught up with the probed
	// revision (which takes a fence: nothing else would arrive on its
	// watch), not from one that served whatever it had.
	t.Run("ReadAfterWriteAcrossStores", func(t *testing.T) {
		cached, plain, c := setup(t)
		ctx := testCtx(t)
		clusterID := uniqueCluster(t)
		waitCacheServing(t, cached, clusterID)
		for i := range 20 {
			seq := uint64(i + 1)
			if _, err := plain.UpsertNode(ctx, record(clusterID, cluster.RoleWorker, "w1", "inc-a", seq), time.Minute); err != nil {
				t.Fatal(err)
			}
			after := unrelated(t, c.namespace)
			before := cached.Stats()
			snap, err := cached.Snapshot(ctx, clusterID)
			if err != nil {
				t.Fatal(err)
			}
			st := cached.Stats()
			if len(snap.Records) != 1 || snap.Records[0].HeartbeatSeq != seq {
				t.Fatalf("round %d: snapshot %v, want w1 at seq %d", i, snap.Records, seq)
			}
			if st.CacheSnapshots == before.CacheSnapshots {
				continue // fell back to a LIST (a slow fence): correct, proves nothing
			}
			if rev := mustRevision(t, snap.Revision.String()); rev < after {
				t.Fatalf("round %d: cached snapshot at revision %d, before the unrelated write at %d", i, rev, after)
			}
			if st.FenceWrites == before.FenceWrites {
				t.Fatalf("round %d: the cache caught up with an unrelated write without a fence (stats %+v)", i, st)
			}
		}
		if st := cached.Stats(); st.CacheSnapshots < 10 {
			t.Fatalf("only %d of 20 snapshots came from the cache (stats %+v)", st.CacheSnapshots, st)
		}
	})

	// Fences: the fence is a Lease of the namespace with Talon's managed-by
	// label and the fence role, and no snapshot (cached or listed), watch,
	// or record count ever includes it; Close deletes it.
	t.Run("Fences", func(t *testing.T) {
		cached, plain, c := setup(t)
		ctx := testCtx(t)
		clusterID := uniqueCluster(t)
		for _, n := range []string{"w1", "w2"} {
			if _, err := plain.UpsertNode(ctx, record(clusterID, cluster.RoleWorker, n, "inc-"+n, 1), time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		start, err := plain.Snapshot(ctx, clusterID)
		if err != nil {
			t.Fatal(err)
		}
		events := plain.Watch(ctx, clusterID, start.Revision)
		waitCacheServing(t, cached, clusterID)
		before := cached.Stats().FenceWrites
		unrelated(t, c.namespace)
		if _, err := cached.Snapshot(ctx, clusterID); err != nil {
			t.Fatal(err)
		}
		if cached.Stats().FenceWrites == before {
			t.Fatalf("no fence written after an unrelated write (stats %+v)", cached.Stats())
		}
		fence, err := k.admin.CoordinationV1().Leases(c.namespace).Get(ctx, cached.fenceName, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get fence %s: %v", cached.fenceName, err)
		}
		if fence.Labels[LabelManagedBy] != ManagedByValue || fence.Labels[LabelRole] != FenceRole || fence.Labels[LabelCluster] != "" {
			t.Errorf("fence labels %v", fence.Labels)
		}
		for name, s := range map[string]*Store{"cached": cached, "list": plain} {
			snap, err := s.Snapshot(ctx, clusterID)
			if err != nil {
				t.Fatal(err)
			}
			if len(snap.Records) != 2 || snap.Records[0].NodeID != "w1" || snap.Records[1].NodeID != "w2" {
				t.Errorf("%s snapshot: %v, want w1 and w2 only", name, snap.Records)
			}
		}
		// The fence was written after the watch began: it sends nothing.
		if _, err := plain.UpsertNode(ctx, record(clusterID, cluster.RoleWorker, "w3", "inc-w3", 1), time.Minute); err != nil {
			t.Fatal(err)
		}
		select {
		case b := <-events:
			if b.Err != nil || len(b.Events) != 1 || b.Events[0].Key.NodeID != "w3" {
				t.Fatalf("watch batch %+v, want only w3's put", b)
			}
		case <-ctx.Done():
			t.Fatal("no watch batch")
		}
		if err := cached.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := k.admin.CoordinationV1().Leases(c.namespace).Get(ctx, cached.fenceName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("fence after Close: %v, want NotFound", err)
		}
	})

	// RelistAfterGone: the cache's watch is cut (the API server restarts)
	// and cannot resume, because its resourceVersion has been compacted
	// (410 Gone): the cache lists again, snapshots fall back to LISTs
	// meanwhile, and once it is back it serves writes made while it was
	// away.
	t.Run("RelistAfterGone", func(t *testing.T) {
		cached, plain, c := setup(t)
		ctx := testCtx(t)
		clusterID := uniqueCluster(t)
		waitCacheServing(t, cached, clusterID)
		resyncs := cached.Stats().CacheResyncs
		unrelated(t, c.namespace) // the cache's revision is now below the current one
		k.srv.Etcd().Compact(t, 0)
		k.srv.Stop()
		k.srv.Start()
		k.waitAccess(t, c, true)
		if _, err := plain.UpsertNode(ctx, record(clusterID, cluster.RoleWorker, "w1", "inc-a", 1), time.Minute); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			before := cached.Stats().CacheSnapshots
			snap, err := cached.Snapshot(ctx, clusterID)
			if err == nil && (len(snap.Records) != 1 || snap.Records[0].NodeID != "w1") {
				t.Fatalf("snapshot %v, want w1", snap.Records)
			}
			if err == nil && cached.Stats().CacheSnapshots > before {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("cache not serving 30s after the restart (stats %+v, last error %v)", cached.Stats(), err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if st := cached.Stats(); st.CacheResyncs <= resyncs {
			t.Fatalf("cache resyncs %d, want more than %d: it resumed a compacted watch", st.CacheResyncs, resyncs)
		}
	})

	// ObservedTimes: a record's age starts when the store first saw its
	// version, on the cache's watch or a LIST alike, and survives the
	// pruning of observations (which the cache marks as still listed
	// first, since it observes a version once).
	t.Run("ObservedTimes", func(t *testing.T) {
		ns := k.namespace(t, "snapcache")
		c := k.applyRBAC(t, ns)
		var offset atomic.Int64
		clock := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
		cached := k.newStore(t, c.token, ns, func(o *Options) { o.CacheSnapshots = true; o.Clock = clock })
		plain := k.newStore(t, c.token, ns, nil)
		ctx := testCtx(t)
		clusterID := uniqueCluster(t)
		waitCacheServing(t, cached, clusterID)
		if _, err := plain.UpsertNode(ctx, record(clusterID, cluster.RoleWorker, "w1", "inc-a", 1), time.Hour); err != nil {
			t.Fatal(err)
		}
		seen := func(t *testing.T, list bool) int64 {
			t.Helper()
			var snap *state.Snapshot
			var err error
			if list {
				snap, err = cached.listSnapshot(ctx, "test list", clusterID)
			} else {
				snap, err = cached.Snapshot(ctx, clusterID)
			}
			if err != nil || len(snap.Records) != 1 {
				t.Fatalf("snapshot: %v, %v", snap, err)
			}
			return snap.Records[0].UpdatedAtUnixMs
		}
		first := seen(t, false)
		offset.Store(int64(2 * time.Second))
		if again, listed := seen(t, false), seen(t, true); again != first || listed != first {
			t.Fatalf("observed at %d, then %d (cache) and %d (list); want the first sighting every time", first, again, listed)
		}
		// Past the prune interval and the observations' keep time.
		offset.Store(int64(obsKeep + obsPruneInterval + time.Minute))
		cached.pruned.Store(0)
		_ = seen(t, false) // prunes
		if listed := seen(t, true); listed != first {
			t.Fatalf("after pruning, a LIST observed the unchanged record at %d, want %d", listed, first)
		}
	})

	// Concurrent: snapshots from many goroutines while another store
	// writes: every snapshot holds at least the sequence that was
	// acknowledged before it began, and they share probes.
	t.Run("Concurrent", func(t *testing.T) {
		cached, plain, _ := setup(t)
		ctx := testCtx(t)
		clusterID := uniqueCluster(t)
		waitCacheServing(t, cached, clusterID)
		var acked atomic.Uint64
		done := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := uint64(1); ; seq++ {
				select {
				case <-done:
					return
				default:
				}
				if _, err := plain.UpsertNode(ctx, record(clusterID, cluster.RoleWorker, "w1", "inc-a", seq), time.Minute); err != nil {
					t.Errorf("upsert seq %d: %v", seq, err)
					return
				}
				acked.Store(seq)
			}
		}()
		errs := make(chan error, 8)
		before := cached.Stats()
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 25 {
					min := acked.Load()
					snap, err := cached.Snapshot(ctx, clusterID)
					if err != nil {
						errs <- err
						return
					}
					if min > 0 && (len(snap.Records) != 1 || snap.Records[0].HeartbeatSeq < min) {
						errs <- fmt.Errorf("snapshot %v after seq %d was acknowledged", snap.Records, min)
						return
					}
				}
			}()
		}
		go func() {
			time.Sleep(3 * time.Second)
			close(done)
		}()
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		st := cached.Stats()
		snaps := st.CacheSnapshots + st.ListSnapshots - before.CacheSnapshots - before.ListSnapshots
		t.Logf("%d snapshots: %d from the cache, %d probes, %d fences", snaps, st.CacheSnapshots-before.CacheSnapshots,
			st.RevisionProbes-before.RevisionProbes, st.FenceWrites-before.FenceWrites)
	})
}

// waitCacheServing waits until s answers a snapshot from its cache.
func waitCacheServing(t *testing.T, s *Store, clusterID string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		before := s.Stats().CacheSnapshots
		_, err := s.Snapshot(testCtx(t), clusterID)
		if err == nil && s.Stats().CacheSnapshots > before {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("snapshot cache not serving after 30s (stats %+v, last error %v)", s.Stats(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func mustRevision(t testing.TB, rv string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q: %v", rv, err)
	}
	return n
}

func TestFenceName(t *testing.T) {
	seen := map[string]string{}
	for _, id := range []string{"coord-1", "Coord_1.", "", "-", "a-very-long-identity-" + string(make([]byte, 300)), "coordinator-0.talon.svc"} {
		n := FenceName(id)
		if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
			t.Errorf("FenceName(%q) = %q: %v", id, n, errs)
		}
		if prev, ok := seen[n]; ok {
			t.Errorf("FenceName(%q) = FenceName(%q) = %q", id, prev, n)
		}
		seen[n] = id
		if !isFence(&coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: n}}) {
			t.Errorf("isFence(%q) = false", n)
		}
	}
	// No record's Lease is ever taken for a fence: LeaseName has no '.'.
	if n := LeaseName(cluster.Key{ClusterID: "talon-fence", Role: cluster.RoleWorker, NodeID: "x"}); isFence(&coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: n}}) {
		t.Errorf("isFence(LeaseName) = true for %q", n)
	}
}

func TestParseRevision(t *testing.T) {
	for rv, want := range map[string]uint64{"1": 1, "123456789012": 123456789012} {
		if got, err := parseRevision(rv); err != nil || got != want {
			t.Errorf("parseRevision(%q) = %d, %v", rv, got, err)
		}
	}
	for _, rv := range []string{"", "0", "abc", "-1", "1.5"} {
		if _, err := parseRevision(rv); !errors.Is(err, errOpaqueRevision) {
			t.Errorf("parseRevision(%q): %v, want errOpaqueRevision", rv, err)
		}
	}
}

// TestSharedCall checks the sharing rule: a caller gets the outcome of a
// run that started after it asked, never of one already in flight, and
// callers that ask while one run is in flight share the next.
func TestSharedCall(t *testing.T) {
	s, err := New(context.Background(), Options{RESTConfig: &rest.Config{Host: "https://127.0.0.1:1"}, Namespace: "talon"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var runs atomic.Uint64
	started := make(chan uint64, 4)
	release := make(chan struct{})
	c := newSharedCall(s, 1, func(ctx context.Context) (uint64, error) {
		n := runs.Add(1)
		started <- n
		<-release
		return n, nil
	})
	ctx := testCtx(t)
	first := make(chan uint64, 1)
	go func() { v, _ := c.do(ctx); first <- v }()
	if n := <-started; n != 1 {
		t.Fatalf("first run %d", n)
	}
	// Run 1 is in flight: these callers join run 2.
	later := make(chan uint64, 5)
	for range 5 {
		go func() { v, _ := c.do(ctx); later <- v }()
	}
	time.Sleep(50 * time.Millisecond) // let them join
	close(release)
	if v := <-first; v != 1 {
		t.Errorf("first caller got run %d, want 1", v)
	}
	for range 5 {
		if v := <-later; v != 2 {
			t.Errorf("a caller that asked during run 1 got run %d, want 2", v)
		}
	}
	if n := runs.Load(); n != 2 {
		t.Errorf("%d runs, want 2", n)
	}
	<-started // run 2's

	// With two in flight, a second caller starts its own run at once; a
	// third waits for the next.
	runs.Store(0)
	release = make(chan struct{})
	two := newSharedCall(s, 2, func(ctx context.Context) (uint64, error) {
		n := runs.Add(1)
		started <- n
		<-release
		return n, nil
	})
	got := make(chan uint64, 3)
	go func() { v, _ := two.do(ctx); got <- v }()
	<-started
	go func() { v, _ := two.do(ctx); got <- v }()
	<-started // the second run started while the first is in flight
	go func() { v, _ := two.do(ctx); got <- v }()
	time.Sleep(50 * time.Millisecond)
	if n := runs.Load(); n != 2 {
		t.Fatalf("%d runs in flight, want 2", n)
	}
	close(release)
	sum := uint64(0)
	for range 3 {
		sum += <-got
	}
	if sum != 1+2+3 {
		t.Errorf("callers got runs summing to %d, want 1+2+3", sum)
	}
}
