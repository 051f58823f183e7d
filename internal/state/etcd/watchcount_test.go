package etcd

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/testenv"
)

// waitWatchers waits until etcd counts want watchers and returns its
// last count.
func waitWatchers(t *testing.T, e *testenv.Etcd, want int) int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		n := e.Watchers(t)
		if n == want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestOneWatchPerStore counts watches on etcd's side: a store with the
// snapshot cache serves any number of Store.Watch callers from the
// cache's one watch (which also delivers their events), where a store
// without it opens one per caller. A watcher behind the cache's revision
// is replayed what it missed.
func TestOneWatchPerStore(t *testing.T) {
	testenv.SkipIfShort(t)
	e := testenv.StartEtcd(t, testenv.EtcdOptions{})
	base := e.Watchers(t)
	const callers = 3
	for _, tc := range []struct {
		cache bool
		want  int
	}{{cache: true, want: 1}, {cache: false, want: callers}} {
		t.Run(map[bool]string{true: "cache", false: "direct"}[tc.cache], func(t *testing.T) {
			ctx, cancel := context.WithCancel(testCtx(t))
			defer cancel()
			s := newStore(t, optionsFor(e, tc.cache))
			cid := uniqueCluster(t)
			if _, err := s.UpsertNode(ctx, record(cid, cluster.RoleWorker, "w0", "inc", 1), time.Minute); err != nil {
				t.Fatal(err)
			}
			snap, err := s.Snapshot(ctx, cid)
			if err != nil {
				t.Fatal(err)
			}
			// A write between the snapshot and the watches: each must
			// still see it, the cache's watchers from its ring.
			if _, err := s.UpsertNode(ctx, record(cid, cluster.RoleWorker, "w0", "inc", 2), time.Minute); err != nil {
				t.Fatal(err)
			}
			var chans []<-chan state.WatchBatch
			for range callers {
				chans = append(chans, s.Watch(ctx, cid, snap.Revision))
			}
			for i := 1; i <= 3; i++ {
				if _, err := s.UpsertNode(ctx, record(cid, cluster.RoleWorker, fmt.Sprintf("w%d", i), "inc", 1), time.Minute); err != nil {
					t.Fatal(err)
				}
			}
			for i, ch := range chans {
				var got []string
				for len(got) < 4 {
					select {
					case b := <-ch:
						if b.Err != nil {
							t.Fatalf("watch %d: %v", i, b.Err)
						}
						for _, ev := range b.Events {
							got = append(got, fmt.Sprintf("%s %s/%d", ev.Type, ev.Record.NodeID, ev.Record.HeartbeatSeq))
						}
					case <-time.After(20 * time.Second):
						t.Fatalf("watch %d: %v after 20 s", i, got)
					}
				}
				if want := "put w0/2,put w1/1,put w2/1,put w3/1"; strings.Join(got, ",") != want {
					t.Errorf("watch %d: %v, want %s", i, got, want)
				}
			}
			if n := waitWatchers(t, e, base+tc.want); n != base+tc.want {
				t.Errorf("etcd counts %d watchers for %d Store.Watch callers, want %d", n-base, callers, tc.want)
			}
			t.Logf("%d Store.Watch callers: %d etcd watchers", callers, tc.want)
			cancel()
		})
		if n := waitWatchers(t, e, base); n != base {
			t.Errorf("%d watchers left after the store closed", n-base)
		}
	}
}
