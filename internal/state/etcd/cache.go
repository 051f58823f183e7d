package etcd

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

// watchCache mirrors every record under the prefix through a
// state.Reflector fed by one watch: a range read of the prefix at revision
// R, then a watch from R+1. Its revision is the newest revision up to
// which it has applied every change: the revision of the last event
// applied, or the revision of a progress notification (etcd sends one only
// after every earlier event of the watch stream). A consistent read waits
// until the cache's revision reaches the revision a linearizable request
// returned; see Store.Snapshot. Store.Watch is served from it too, so a
// coordinator holds one etcd watch.
//
// The cache uses its own Watcher, so its progress requests and its stream
// are not shared with any other watch of the client.
type watchCache struct {
	s       *Store
	watcher clientv3.Watcher
	// streamCtx carries the metadata of the cache's watch stream: a progress
	// request must carry the same, or the client opens another stream.
	streamCtx context.Context
	r         *state.Reflector[*cacheEntry]
	// interner keeps the cached records compact: their strings shared
	// between workers or copied out of the value they were decoded from
	// (cluster.Interner). At 50,000 workers with a dozen labels each it
	// took the live heap from 172 MB to 127 MB.
	interner *cluster.Interner
}

// cacheEntry is one record slot. Entries are replaced, never modified;
// so are the records they point to.
type cacheEntry struct {
	key cluster.Key
	item
}

func (e *cacheEntry) MirrorName() string     { return e.slot }
func (e *cacheEntry) MirrorKey() cluster.Key { return e.key }

func newWatchCache(s *Store) *watchCache {
	c := &watchCache{
		s:         s,
		watcher:   clientv3.NewWatcher(s.client),
		streamCtx: clientv3.WithRequireLeader(s.lifetime),
		interner:  cluster.NewInterner(0),
	}
	c.r = state.NewReflector(s.lifetime, s.log, state.ReflectorSource[*cacheEntry]{
		Name:  "snapshot cache",
		List:  c.list,
		Watch: c.watch,
		Record: func(e *cacheEntry) (*cluster.Record, bool) {
			return e.stored.rec, e.stored.bad == nil && e.stored.rec != nil
		},
		Available: c.available,
		Go:        s.spawn,
	}, s.opts.ringSize)
	return c
}

func (c *watchCache) close() error { return c.watcher.Close() }

// run keeps the cache in sync until the store closes.
func (c *watchCache) run() { c.r.Run() }

// list reads every record under the prefix, a page at a time
// (rangePages), each page with its own request timeout.
func (c *watchCache) list(ctx context.Context) ([]*cacheEntry, uint64, string, error) {
	s := c.s
	var ci *callInfo
	pageCtx := func() (context.Context, func()) {
		lctx, cancel := context.WithTimeout(ctx, s.opts.RequestTimeout)
		lctx, ci = withCallInfo(lctx)
		return lctx, cancel
	}
	listed := s.clock()
	var entries []*cacheEntry
	rev, err := s.rangePages(pageCtx, s.keys.all(), func(kvs []*mvccpb.KeyValue, count int64, first bool) {
		if first {
			entries = make([]*cacheEntry, 0, count)
		}
		for _, kv := range kvs {
			if e := c.entry(kv, false); e != nil {
				entries = append(entries, e)
			}
		}
	})
	if err != nil {
		return nil, 0, "", s.mapError("snapshot cache list", err, ci)
	}
	s.stats.resyncs.Add(1)
	// The listing saw every record written before it was sent: forget the
	// observations of the rest.
	s.obs.Prune(listed)
	return entries, uint64(rev), strconv.FormatInt(rev, 10), nil
}

// watch applies the watch from the listing's revision until it fails.
func (c *watchCache) watch(ctx context.Context, stream state.Stream[*cacheEntry]) error {
	s := c.s
	wctx, wcancel := context.WithCancel(c.streamCtx)
	defer wcancel()
	from, _ := stream.Revision()
	wch := c.watcher.Watch(wctx, s.keys.all(), clientv3.WithPrefix(), clientv3.WithRev(int64(from)+1))
	// Established only now: the watch's stream exists, so a progress
	// request goes to it rather than opening another one.
	stream.Established()
	for wr := range wch {
		if err := wr.Err(); err != nil {
			return s.mapError("snapshot cache watch", err, nil)
		}
		if wr.IsProgressNotify() {
			rev := wr.Header.Revision
			stream.Apply([]state.MirrorChange[*cacheEntry]{{Rev: uint64(rev), Token: strconv.FormatInt(rev, 10)}})
			continue
		}
		stream.Apply(c.changes(wr.Events))
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("%w: snapshot cache watch ended", state.ErrUnavailable)
}

// available reports whether etcd still has revision after: a count-only
// read of a key that never exists, at that revision, fails with
// ErrCompacted once etcd has compacted it.
func (c *watchCache) available(ctx context.Context, after uint64) error {
	s := c.s
	ctx, cancel := context.WithTimeout(ctx, s.opts.RequestTimeout)
	defer cancel()
	ctx, ci := withCallInfo(ctx)
	if _, err := s.client.Get(ctx, s.keys.revisionProbe(), clientv3.WithRev(int64(after)), clientv3.WithCountOnly()); err != nil {
		return s.mapError("watch revision check", err, ci)
	}
	return nil
}

// entry decodes kv, or returns nil for a key outside the layout. live says
// kv is a change seen on the watch rather than a listing.
func (c *watchCache) entry(kv *mvccpb.KeyValue, live bool) *cacheEntry {
	slot := string(kv.Key)
	key, ok := c.s.keys.parse(slot)
	if !ok {
		return nil
	}
	st := c.s.decodeKV(kv, key, live)
	st.rec = c.interner.Compact(st.rec) // kept until replaced: not the decoded value's memory
	return &cacheEntry{key: key, item: item{slot: slot, stored: st}}
}

// changes converts one watch response's events (all of one or more whole
// revisions), decoding values before the reflector takes its lock:
// writers look slots up under it. A key outside the layout only advances
// the revision.
func (c *watchCache) changes(events []*clientv3.Event) []state.MirrorChange[*cacheEntry] {
	changes := make([]state.MirrorChange[*cacheEntry], len(events))
	for i, ev := range events {
		rev := ev.Kv.ModRevision
		ch := state.MirrorChange[*cacheEntry]{Rev: uint64(rev), Token: strconv.FormatInt(rev, 10)}
		slot := string(ev.Kv.Key)
		if _, ok := c.s.keys.parse(slot); ok {
			ch.Name = slot
			if ev.Type == mvccpb.PUT {
				ch.Entry = c.entry(ev.Kv, true)
			}
		}
		changes[i] = ch
	}
	return changes
}

// awaitReady reports whether the cache is ready, waiting first while a
// listing is in flight.
func (c *watchCache) awaitReady(ctx context.Context) bool { return c.r.AwaitReady(ctx) }

func (c *watchCache) isReady() bool { return c.r.Ready() }

// lookup returns the cache's view of one slot (absence included) as of its
// revision; ok is false while the cache is not ready.
func (c *watchCache) lookup(slot string) (v slotView, ok bool) {
	ok = c.r.Read(0, func(idx *state.Mirror[*cacheEntry], rev uint64, _ string) {
		v = slotView{asOf: int64(rev)}
		if e, found := idx.Get(slot); found {
			v.stored = e.stored
		}
	})
	return v, ok
}

// waitFor blocks until the cache has applied every change up to target.
// ok is false if the cache stops being ready first. Changes outside the
// prefix advance etcd's revision without an event here, so it asks for a
// progress notification at once and again now and then, in case the watch
// was being re-established or another member that is behind serves it.
func (c *watchCache) waitFor(ctx context.Context, target int64) (ok bool, err error) {
	reached, ready := c.r.Reached(uint64(target))
	for wait := 100 * time.Millisecond; ready && !reached; wait = 250 * time.Millisecond {
		c.requestProgress(ctx)
		if reached, ready, err = c.r.WaitFor(ctx, uint64(target), wait); err != nil {
			return false, err
		}
	}
	return reached, nil
}

func (c *watchCache) requestProgress(ctx context.Context) {
	pctx, cancel := context.WithCancel(c.streamCtx)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	if err := c.watcher.RequestProgress(pctx); err != nil && ctx.Err() == nil {
		c.s.log.Debug("snapshot cache progress request failed", "err", err)
	}
}

// snapshot waits for revision target and returns the cluster's records.
func (c *watchCache) snapshot(ctx context.Context, clusterID string, target int64) (*state.Snapshot, bool, error) {
	ok, err := c.waitFor(ctx, target)
	if !ok || err != nil {
		return nil, false, err
	}
	var snap *state.Snapshot
	ok = c.r.Read(uint64(target), func(idx *state.Mirror[*cacheEntry], rev uint64, _ string) {
		snap = &state.Snapshot{
			ClusterID:        clusterID,
			Records:          c.records(idx, clusterID),
			Revision:         revision(int64(rev)),
			ObservedAtUnixMs: c.s.clock().UnixMilli(),
		}
	})
	return snap, ok, nil
}

// records returns the cluster's usable records. Called under the
// reflector's read lock. A list that skipped unreadable values is rebuilt
// every time, so that every snapshot counts (and may log) what it left
// out.
func (c *watchCache) records(idx *state.Mirror[*cacheEntry], clusterID string) []*cluster.Record {
	return idx.Records(clusterID, func(es []*cacheEntry) ([]*cluster.Record, bool) {
		recs, skipped := c.s.usable(len(es), func(i int) *item { return &es[i].item })
		return recs, !skipped
	})
}

// subscribe serves Store.Watch from the cache; ok is false when the cache
// is off.
func (c *watchCache) subscribe(ctx context.Context, clusterID string, after int64) (<-chan state.WatchBatch, bool) {
	return c.r.Subscribe(ctx, clusterID, uint64(after))
}
