package etcd

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/testenv"
)

// TestPagedReads: the range snapshot and the snapshot cache's listing read
// the prefix a page at a time, every page at the first page's revision:
// all records across page boundaries, none written between pages, and a
// revision compacted between pages makes the read start again, so neither
// a snapshot nor the listing fails for it.
func TestPagedReads(t *testing.T) {
	testenv.SkipIfShort(t)
	e := testenv.StartEtcd(t, testenv.EtcdOptions{})
	ctx := testCtx(t)
	writer := newStore(t, optionsFor(e, false))
	upsert := func(clusterID, node string) {
		t.Helper()
		if _, err := writer.UpsertNode(ctx, record(clusterID, cluster.RoleWorker, node, "inc", 1), time.Minute); err != nil {
			t.Fatalf("upsert %s/%s: %v", clusterID, node, err)
		}
	}
	cid, other := uniqueCluster(t), uniqueCluster(t)
	var want []string
	for i := range 30 {
		want = append(want, fmt.Sprintf("w%02d", i))
		upsert(cid, want[i])
	}
	for i := range 5 { // read by the cache's listing, not by cid's range
		upsert(other, fmt.Sprintf("o%d", i))
	}
	names := func(recs []*cluster.Record) []string {
		var n []string
		for _, r := range recs {
			n = append(n, r.NodeID)
		}
		return n
	}

	t.Run("range snapshot", func(t *testing.T) {
		c := newRPCCounter()
		o := optionsFor(e, false)
		o.pageSize, o.dialOptions = 7, c.dialOptions()
		var once sync.Once
		o.afterPage = func() { once.Do(func() { upsert(cid, "w99") }) } // sorts into the last page
		s := newStore(t, o)
		c.take()
		snap, err := s.Snapshot(ctx, cid)
		if err != nil {
			t.Fatal(err)
		}
		// 30 records in pages of 7, 7, 7, 7 and 2; w99, written after
		// the first page, is after the revision read at.
		if n := c.take()[methodRange]; n != 5 {
			t.Errorf("%d range requests for 30 records in pages of 7, want 5", n)
		}
		if got := names(snap.Records); !slices.Equal(got, want) {
			t.Fatalf("snapshot read in pages: %v, want %v", got, want)
		}
		snap, err = s.Snapshot(ctx, cid)
		if err != nil {
			t.Fatal(err)
		}
		if got := names(snap.Records); !slices.Equal(got, append(want, "w99")) {
			t.Fatalf("the next snapshot: %v, want w99 too", got)
		}
	})
	want = append(want, "w99")

	// listing counts the pages of a cache's whole listing of the prefix.
	listing := func(t *testing.T, afterPage func()) (*Store, int) {
		o := optionsFor(e, true)
		o.pageSize = 7
		var mu sync.Mutex
		pages := 0
		o.afterPage = func() {
			mu.Lock()
			pages++
			mu.Unlock()
			if afterPage != nil {
				afterPage()
			}
		}
		s := newStore(t, o)
		waitCacheReady(t, s)
		mu.Lock()
		defer mu.Unlock()
		return s, pages
	}
	_, clean := listing(t, nil)
	if clean < 5 { // 36 records under the prefix, and the probe keys
		t.Fatalf("a listing of 36 records in pages of 7 called afterPage %d times, want at least 5", clean)
	}

	// compactAfterFirstPage returns an afterPage that, once, writes node
	// and compacts etcd to its current revision: the page after fails.
	compactAfterFirstPage := func(t *testing.T, node string) func() {
		admin := e.Client(t)
		var once sync.Once
		return func() {
			once.Do(func() {
				upsert(cid, node)
				resp, err := admin.Get(ctx, "/talon-paged-probe")
				if err != nil {
					t.Errorf("revision: %v", err)
					return
				}
				if _, err := admin.Compact(ctx, resp.Header.Revision); err != nil {
					t.Errorf("compact: %v", err)
				}
			})
		}
	}

	t.Run("range snapshot reads again after a compaction between pages", func(t *testing.T) {
		c := newRPCCounter()
		o := optionsFor(e, false)
		o.pageSize, o.dialOptions = 7, c.dialOptions()
		o.afterPage = compactAfterFirstPage(t, "w97")
		s := newStore(t, o)
		c.take()
		snap, err := s.Snapshot(ctx, cid)
		if err != nil {
			t.Fatalf("snapshot with its revision compacted between pages: %v", err)
		}
		// One page, one refused, then 32 records in 5 pages.
		if n := c.take()[methodRange]; n != 7 {
			t.Errorf("%d range requests, want 7: a page, the page refused as compacted, and 5 pages read again", n)
		}
		want := slices.Insert(slices.Clone(want), 30, "w97")
		if got := names(snap.Records); !slices.Equal(got, want) {
			t.Fatalf("snapshot read again: %v, want %v", got, want)
		}
	})
	want = slices.Insert(want, 30, "w97")

	t.Run("cache lists again after a compaction between pages", func(t *testing.T) {
		s, pages := listing(t, compactAfterFirstPage(t, "w98"))
		// The first read got one page; the second was refused, its
		// revision compacted. The read started again and read the whole
		// prefix, w98 too, with no failed listing.
		if want := 1 + clean; pages != want {
			t.Errorf("afterPage called %d times, want %d: one page of the failed listing and a whole listing (%d)", pages, want, clean)
		}
		snap, err := s.Snapshot(ctx, cid)
		if err != nil {
			t.Fatal(err)
		}
		want := slices.Insert(slices.Clone(want), 31, "w98")
		if got := names(snap.Records); !slices.Equal(got, want) {
			t.Fatalf("cache after listing again: %v, want %v", got, want)
		}
		if st := s.Stats(); st.CacheResyncs != 1 {
			t.Errorf("%d listings completed, want 1", st.CacheResyncs)
		}
	})
}
