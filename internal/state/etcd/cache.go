package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/talonhq/talon/internal/backoff"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

// watchCache mirrors every record under the prefix, fed by one watch: a
// range read of the prefix at revision R, then a watch from R+1. Its
// revision is the newest revision up to which it has applied every change:
// the revision of the last event applied, or the revision of a progress
// notification (etcd sends one only after every earlier event of the watch
// stream). A consistent read waits until the cache's revision reaches the
// revision a linearizable request returned; see Store.Snapshot.
//
// The cache uses its own Watcher, so its progress requests and its stream
// are not shared with callers' watches.
type watchCache struct {
	s       *Store
	watcher clientv3.Watcher
	// streamCtx carries the metadata of the cache's watch stream: a progress
	// request must carry the same, or the client opens another stream.
	streamCtx context.Context

	mu    sync.RWMutex // guards the fields below; taken before Store.mu
	ready bool
	// listing is set while a listing of the prefix is in flight, until the
	// cache is ready or the attempt fails: a snapshot waits for it rather
	// than reading the prefix a second time (at 10,000 records, two copies
	// of the listing and of its gRPC buffers are most of the process's peak
	// memory).
	listing bool
	rev     int64
	idx     *state.Mirror[*cacheEntry] // the entries, by etcd key and per cluster
	changed chan struct{}              // closed and replaced whenever rev or ready changes
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
	return &watchCache{
		s:         s,
		watcher:   clientv3.NewWatcher(s.client),
		streamCtx: clientv3.WithRequireLeader(s.lifetime),
		idx:       state.NewMirror[*cacheEntry](),
		changed:   make(chan struct{}),
		listing:   true, // run's first listing is about to start
	}
}

func (c *watchCache) close() error { return c.watcher.Close() }

// run keeps the cache in sync until the store closes: list, watch, and on
// any watch failure (compaction, a lost stream) list again after a backoff.
func (c *watchCache) run() {
	retry := backoff.New(backoff.Policy{Initial: 50 * time.Millisecond, Max: 5 * time.Second, Jitter: 0.2})
	for c.s.lifetime.Err() == nil {
		synced, err := c.syncAndWatch()
		c.setNotReady()
		if c.s.lifetime.Err() != nil {
			return
		}
		if synced {
			retry.Reset()
		}
		wait := retry.Next()
		level := c.s.log.Warn
		if errors.Is(err, state.ErrCompacted) {
			level = c.s.log.Info
		}
		level("snapshot cache lost its watch; resynchronising", "err", err, "retryIn", wait)
		if backoff.Sleep(c.s.lifetime, wait) != nil {
			return
		}
	}
}

// syncAndWatch lists the prefix, then applies the watch until it fails.
// synced reports whether the list succeeded.
func (c *watchCache) syncAndWatch() (synced bool, err error) {
	s := c.s
	c.setListing()
	lctx, cancel := context.WithTimeout(s.lifetime, s.opts.RequestTimeout)
	lctx, ci := withCallInfo(lctx)
	listed := s.clock()
	resp, err := s.client.Get(lctx, s.keys.all(), clientv3.WithPrefix())
	cancel()
	if err != nil {
		return false, s.mapError("snapshot cache list", err, ci)
	}
	s.stats.resyncs.Add(1)
	c.reset(resp.Kvs, resp.Header.Revision)
	// The listing saw every record written before it was sent: forget the
	// observations of the rest.
	s.obs.Prune(listed)

	wctx, wcancel := context.WithCancel(c.streamCtx)
	defer wcancel()
	wch := c.watcher.Watch(wctx, s.keys.all(), clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
	// Ready only now: the watch's stream exists, so a progress request
	// goes to it rather than opening another one.
	c.setReady()
	for wr := range wch {
		if err := wr.Err(); err != nil {
			return true, s.mapError("snapshot cache watch", err, nil)
		}
		if wr.IsProgressNotify() {
			c.advance(wr.Header.Revision)
			continue
		}
		c.apply(wr.Events)
	}
	return true, errors.New("snapshot cache watch ended")
}

func (c *watchCache) isReady() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.ready
}

// setListing marks a listing in flight; setReady and setNotReady end it.
func (c *watchCache) setListing() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.listing = true
	c.broadcastLocked()
}

// awaitReady reports whether the cache is ready, waiting first while a
// listing is in flight (it ends within the request timeout). It returns
// false at once while the cache is backing off after a failure.
func (c *watchCache) awaitReady(ctx context.Context) bool {
	for {
		c.mu.RLock()
		ready, listing, changed := c.ready, c.listing, c.changed
		c.mu.RUnlock()
		if ready || !listing {
			return ready
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return false
		case <-c.s.lifetime.Done():
			return false
		}
	}
}

// broadcastLocked wakes every waiter; mu must be held for writing.
func (c *watchCache) broadcastLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *watchCache) setNotReady() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ready, c.listing = false, false
	c.broadcastLocked()
}

// reset replaces the contents with a full listing at revision rev; the
// cache is not ready until its watch is set up.
func (c *watchCache) reset(kvs []*mvccpb.KeyValue, rev int64) {
	entries := make([]*cacheEntry, 0, len(kvs))
	for _, kv := range kvs {
		if e := c.entry(kv, false); e != nil {
			entries = append(entries, e)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.idx.Reset(entries)
	c.rev = rev
	c.broadcastLocked()
}

func (c *watchCache) setReady() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ready, c.listing = true, false
	c.broadcastLocked()
}

// entry decodes kv, or returns nil for a key outside the layout. live says
// kv is a change seen on the watch rather than a listing.
func (c *watchCache) entry(kv *mvccpb.KeyValue, live bool) *cacheEntry {
	slot := string(kv.Key)
	key, ok := c.s.keys.parse(slot)
	if !ok {
		return nil
	}
	return &cacheEntry{key: key, item: item{slot: slot, stored: c.s.decodeKV(kv, key, live)}}
}

// apply applies one watch response's events (all of one or more whole
// revisions) and advances the revision. Values are decoded before the lock
// is taken: writers look slots up under it.
func (c *watchCache) apply(events []*clientv3.Event) {
	type change struct {
		slot  string
		put   *cacheEntry // nil for a delete
		rev   int64
		valid bool // the key is a record key
	}
	changes := make([]change, len(events))
	for i, ev := range events {
		ch := change{slot: string(ev.Kv.Key), rev: ev.Kv.ModRevision}
		if ev.Type == mvccpb.PUT {
			ch.put = c.entry(ev.Kv, true)
			ch.valid = ch.put != nil
		} else {
			_, ch.valid = c.s.keys.parse(ch.slot)
		}
		changes[i] = ch
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range changes {
		if ch.rev > c.rev {
			c.rev = ch.rev
		}
		switch {
		case !ch.valid:
		case ch.put != nil:
			c.idx.Put(ch.put)
		default:
			c.idx.Delete(ch.slot)
		}
	}
	c.broadcastLocked()
}

// advance records a progress notification: every change up to rev has
// been applied.
func (c *watchCache) advance(rev int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if rev > c.rev {
		c.rev = rev
		c.broadcastLocked()
	}
}

// lookup returns the cache's view of one slot (absence included) as of its
// revision; ok is false while the cache is not ready.
func (c *watchCache) lookup(slot string) (slotView, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if !c.ready {
		return slotView{}, false
	}
	v := slotView{asOf: c.rev}
	if e, ok := c.idx.Get(slot); ok {
		v.stored = e.stored
	}
	return v, true
}

// waitFor blocks until the cache has applied every change up to target.
// ok is false if the cache stops being ready first.
func (c *watchCache) waitFor(ctx context.Context, target int64) (ok bool, err error) {
	var retry *time.Timer
	defer func() {
		if retry != nil {
			retry.Stop()
		}
	}()
	for {
		c.mu.RLock()
		ready, rev, changed := c.ready, c.rev, c.changed
		c.mu.RUnlock()
		switch {
		case !ready:
			return false, nil
		case rev >= target:
			return true, nil
		}
		var retryC <-chan time.Time
		if retry == nil {
			// Changes outside the prefix advance etcd's revision without an
			// event here: ask for a progress notification. Ask again now and
			// then, in case the watch was being re-established or another
			// member that is behind serves it.
			c.requestProgress(ctx)
			retry = time.NewTimer(100 * time.Millisecond)
		}
		retryC = retry.C
		select {
		case <-changed:
		case <-retryC:
			c.requestProgress(ctx)
			retry.Reset(250 * time.Millisecond)
		case <-ctx.Done():
			return false, fmt.Errorf("snapshot cache at revision %d waiting for revision %d: %w", rev, target, ctx.Err())
		}
	}
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
	c.mu.RLock()
	defer c.mu.RUnlock()
	if !c.ready || c.rev < target {
		return nil, false, nil
	}
	now := c.s.clock().UnixMilli()
	return &state.Snapshot{
		ClusterID:        clusterID,
		Records:          c.records(clusterID),
		Revision:         revision(c.rev),
		ObservedAtUnixMs: now,
	}, true, nil
}

// records returns the cluster's usable records. Called with mu held for
// reading. A list that skipped unreadable values is rebuilt every time, so
// that every snapshot counts (and may log) what it left out.
func (c *watchCache) records(clusterID string) []*cluster.Record {
	return c.idx.Records(clusterID, func(es []*cacheEntry) ([]*cluster.Record, bool) {
		recs, skipped := c.s.usable(len(es), func(i int) *item { return &es[i].item })
		return recs, !skipped
	})
}
