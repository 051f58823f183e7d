package kube

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/talonhq/talon/internal/backoff"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

// errOpaqueRevision: a resourceVersion is not a decimal integer, so the
// cache cannot tell whether it has caught up with a probed one. The API
// server's storage is then not etcd (resourceVersions are opaque by
// contract); snapshots are LISTs.
var errOpaqueRevision = errors.New("resourceVersion is not an integer")

// parseRevision reads a resourceVersion as etcd's revision.
func parseRevision(rv string) (uint64, error) {
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("%w: %q", errOpaqueRevision, rv)
	}
	return n, nil
}

// fenceAfter is how long a snapshot waits for the cache to reach the
// probed revision on its own before it writes a fence. A write of a Talon
// Lease just before the probe arrives on the watch within a few
// milliseconds; a write of anything else (another namespace, another
// resource: the revision is etcd's, global) never does, and bookmarks come
// about once a minute. Waiting a little first keeps a busy namespace (its
// heartbeats keep the cache moving) from writing a fence per snapshot.
const fenceAfter = 10 * time.Millisecond

// probesInflight bounds the revision probes in flight: two, as the
// coordinator's snapshot reads (one overlaps the other's round trip).
const probesInflight = 2

// snapCache mirrors every Talon Lease of the namespace (managedSelector),
// fed by one watch: a consistent LIST at resourceVersion R, then a watch
// from R with bookmarks; on any watch failure (410 Gone, a lost stream) it
// lists again. Its revision C is the resourceVersion of the last event or
// bookmark applied; the API server sends a watch's events in
// resourceVersion order, so the mirror is the namespace's Talon Leases as
// of C. Store.Snapshot answers from it once C has reached a revision
// probed after the call began (snapshot).
//
// Each Lease version is decoded once, when it arrives (not at all when it
// is the version this store wrote, which the write cache holds), and
// observed then: its UpdatedAtUnixMs is when this store first saw it.
type snapCache struct {
	s *Store
	// probes and fences are the shared revision probe and fence write.
	probes, fences *sharedCall
	// fenceSeq makes every fence write a change (an unchanged object
	// would get no new resourceVersion).
	fenceSeq atomic.Uint64
	// fenced is set once this store has written its fence: Close deletes it.
	fenced atomic.Bool
	// warned is when (unix ns) a fallback was last logged.
	warned atomic.Int64

	mu      sync.RWMutex                // guards the fields below
	ready   bool                        // the watch is established: rev advances
	rev     uint64                      // C, the revision of the mirror
	revStr  string                      // C as the API server wrote it
	idx     *state.Mirror[*cachedLease] // by Lease name and per cluster
	changed chan struct{}               // closed and replaced when rev or ready changes
}

// cachedLease is the record one Talon Lease holds at one resourceVersion.
// Entries are replaced, never modified; so are their records.
type cachedLease struct {
	name string
	key  cluster.Key
	rv   string
	rec  *cluster.Record
}

func (e *cachedLease) MirrorName() string     { return e.name }
func (e *cachedLease) MirrorKey() cluster.Key { return e.key }

func newSnapCache(s *Store) *snapCache {
	c := &snapCache{
		s:       s,
		idx:     state.NewMirror[*cachedLease](),
		changed: make(chan struct{}),
	}
	c.probes = newSharedCall(s, probesInflight, s.probeRevision)
	c.fences = newSharedCall(s, 1, c.writeFence)
	return c
}

// run keeps the cache in sync until the store closes: list, watch, and on
// any watch failure list again after a backoff.
func (c *snapCache) run() {
	s := c.s
	retry := backoff.New(backoff.Policy{Initial: 50 * time.Millisecond, Max: 5 * time.Second, Jitter: 0.2})
	for s.ctx.Err() == nil {
		synced, err := c.syncAndWatch()
		c.setNotReady()
		if s.ctx.Err() != nil {
			return
		}
		if errors.Is(err, errOpaqueRevision) {
			s.log.Info("snapshot cache off: the API server's resourceVersions are not integers; snapshots are LISTs", "err", err)
			return
		}
		if synced {
			retry.Reset()
		}
		wait := retry.Next()
		level := s.log.Warn
		if errors.Is(err, state.ErrCompacted) {
			level = s.log.Info
		}
		level("snapshot cache lost its watch; listing again", "err", err, "retryIn", wait)
		if backoff.Sleep(s.ctx, wait) != nil {
			return
		}
	}
}

// syncAndWatch lists, then applies the watch (resumed from the cache's
// revision whenever a watch request ends normally) until it fails. synced
// reports whether the list succeeded.
func (c *snapCache) syncAndWatch() (synced bool, err error) {
	s := c.s
	listed := s.now()
	items, rv, err := s.list(s.ctx, s.cacheLeases, managedSelector)
	if err != nil {
		return false, mapError("kube snapshot cache list", err)
	}
	n, err := parseRevision(rv)
	if err != nil {
		return false, err
	}
	s.stats.resyncs.Add(1)
	c.reset(items, rv, n)
	// The listing saw every Lease still there: forget the observations of
	// the rest.
	s.obs.Prune(listed)

	first := true
	for {
		from := c.revision()
		w, err := s.startWatch(s.ctx, s.cacheLeases, managedSelector, from)
		if err != nil {
			return true, mapError("kube snapshot cache watch from "+from, err)
		}
		if first {
			// Ready only now: from here on, every change after the listing
			// arrives on the watch.
			c.setReady()
			first = false
		}
		started := time.Now()
		events, err := c.pump(w)
		w.Stop()
		if err != nil || s.ctx.Err() != nil {
			return true, err
		}
		if events == 0 && time.Since(started) < quickEnd {
			// client-go turns a refused or reset stream into an empty watch.
			return true, fmt.Errorf("%w: snapshot cache watch from %s ended at once", state.ErrUnavailable, from)
		}
	}
}

// pump applies one watch request's events until its result channel closes
// (the request ended: resume from the cache's revision), the store closes,
// or the server sends an error. It returns how many events (bookmarks
// included) arrived.
func (c *snapCache) pump(w watch.Interface) (int, error) {
	res := w.ResultChan()
	n := 0
	for {
		var ev watch.Event
		var ok bool
		select {
		case <-c.s.ctx.Done():
			return n, nil
		case ev, ok = <-res:
		}
		if !ok {
			return n, nil
		}
		// Decode what has arrived outside the lock, then apply it at once.
		var changes []change
		for {
			n++
			ch, err := c.change(ev)
			if err != nil {
				c.apply(changes)
				return n, err
			}
			changes = append(changes, ch)
			if len(changes) >= maxBatch {
				break
			}
			select {
			case ev, ok = <-res:
			default:
				ok = false
			}
			if !ok {
				break
			}
		}
		c.apply(changes)
	}
}

// change is one watch event as the cache applies it.
type change struct {
	rv  string
	rev uint64
	// name is the Lease changed; "" for a bookmark.
	name string
	// put is the record the Lease holds now; nil when it holds none (it
	// was deleted, or is a fence, or holds no readable record).
	put *cachedLease
}

// change converts one watch event.
func (c *snapCache) change(ev watch.Event) (change, error) {
	if ev.Type == watch.Error {
		if status, ok := ev.Object.(*metav1.Status); ok {
			return change{}, mapError("kube snapshot cache watch", apierrors.FromObject(status))
		}
		return change{}, fmt.Errorf("%w: kube snapshot cache watch: error event with a %T", state.ErrUnavailable, ev.Object)
	}
	l, ok := ev.Object.(*coordv1.Lease)
	if !ok {
		return change{}, fmt.Errorf("kube snapshot cache watch: %s event with a %T, not a Lease", ev.Type, ev.Object)
	}
	rev, err := parseRevision(l.ResourceVersion)
	if err != nil {
		return change{}, err
	}
	ch := change{rv: l.ResourceVersion, rev: rev}
	switch ev.Type {
	case watch.Bookmark:
	case watch.Added, watch.Modified:
		ch.name = l.Name
		ch.put = c.entry(l)
	case watch.Deleted:
		ch.name = l.Name
	default:
		return change{}, fmt.Errorf("kube snapshot cache watch: event of unknown type %q", ev.Type)
	}
	return ch, nil
}

// entry returns the record Lease l holds, or nil for a fence or a Lease
// without a readable record (logged once per version). A version this
// store wrote is taken from the write cache, without decoding.
func (c *snapCache) entry(l *coordv1.Lease) *cachedLease {
	s := c.s
	if isFence(l) {
		return nil
	}
	key, ok := keyFromAnnotations(l.Annotations)
	if !ok {
		return nil // not a Talon record
	}
	var rec *cluster.Record
	if w, ok := s.cache.get(l.Name); ok && w.lease.ResourceVersion == l.ResourceVersion && w.rec.Key() == key {
		rec = w.rec.Clone()
	} else {
		var err error
		if rec, _, err = s.decode(l, key); err != nil {
			if errors.Is(err, state.ErrUnsupportedVersion) {
				s.log.Debug("snapshot cache: skipping lease of another schema version", "lease", l.Name, "err", err)
			} else {
				s.log.Warn("snapshot cache: skipping unreadable lease", "lease", l.Name, "err", err)
			}
			return nil
		}
	}
	return &cachedLease{name: l.Name, key: key, rv: l.ResourceVersion, rec: s.observed(l, rec)}
}

// reset replaces the contents with a listing at resourceVersion rv; the
// cache is not ready until its watch is established.
func (c *snapCache) reset(items []coordv1.Lease, rv string, rev uint64) {
	entries := make([]*cachedLease, 0, len(items))
	for i := range items {
		if e := c.entry(&items[i]); e != nil {
			entries = append(entries, e)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.idx.Reset(entries)
	c.rev, c.revStr = rev, rv
	c.broadcastLocked()
}

// apply applies changes in order and advances the revision.
func (c *snapCache) apply(changes []change) {
	if len(changes) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range changes {
		if ch.name != "" {
			if ch.put != nil {
				c.idx.Put(ch.put)
			} else {
				c.idx.Delete(ch.name)
			}
		}
		if ch.rev > c.rev {
			c.rev, c.revStr = ch.rev, ch.rv
		}
	}
	c.broadcastLocked()
}

// broadcastLocked wakes every waiter; mu must be held for writing.
func (c *snapCache) broadcastLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *snapCache) setReady() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ready = true
	c.broadcastLocked()
}

func (c *snapCache) setNotReady() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ready = false
	c.broadcastLocked()
}

func (c *snapCache) isReady() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.ready
}

// revision returns the cache's revision as the API server wrote it.
func (c *snapCache) revision() string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.revStr
}

// touch marks every Lease the cache holds as still listed in the store's
// observations, so pruning them drops only Leases that are gone.
func (c *snapCache) touch() {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if !c.ready {
		return
	}
	c.idx.Entries(func(e *cachedLease) { c.s.obs.See(e.name, e.rv, 0) })
}

// waitFor blocks until the cache's revision reaches target (reached), the
// cache stops being ready (!ready), limit passes (limit > 0), or ctx
// ends (err).
func (c *snapCache) waitFor(ctx context.Context, target uint64, limit time.Duration) (reached, ready bool, err error) {
	var expired <-chan time.Time
	for {
		c.mu.RLock()
		ready, rev, changed := c.ready, c.rev, c.changed
		c.mu.RUnlock()
		switch {
		case !ready:
			return false, false, nil
		case rev >= target:
			return true, true, nil
		}
		if expired == nil && limit > 0 {
			t := time.NewTimer(limit)
			defer t.Stop()
			expired = t.C
		}
		select {
		case <-changed:
		case <-expired:
			return false, true, nil
		case <-ctx.Done():
			return false, true, ctx.Err()
		}
	}
}

// snapshot answers a linearizable Snapshot from the cache, or ok false
// when the caller should LIST instead (the cache is not ready, or could
// not catch up in time). It probes the current revision T (shared with
// concurrent snapshots); if the cache's revision C has not reached T
// within fenceAfter, it writes the store's fence (shared too) and waits,
// at most RequestTimeout, for the fence's event, whose revision exceeds T.
// The answer is the cache's state at C >= T: every write that completed
// before the call is at or below T, so it is in the answer.
func (c *snapCache) snapshot(ctx context.Context, clusterID string) (snap *state.Snapshot, ok bool, err error) {
	s := c.s
	if !c.isReady() {
		return nil, false, nil
	}
	target, err := c.probes.do(ctx)
	if err != nil {
		if errors.Is(err, errOpaqueRevision) {
			return nil, false, nil
		}
		return nil, false, err
	}
	reached, ready, err := c.waitFor(ctx, target, fenceAfter)
	if err != nil || !ready {
		return nil, false, err
	}
	if !reached {
		fence, err := c.fences.do(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, false, ctx.Err()
			}
			c.warnFallback("writing the snapshot fence failed; snapshot from a LIST", err)
			return nil, false, nil
		}
		if fence < target {
			return nil, false, nil // cannot happen: the write followed the probe
		}
		wctx, cancel := context.WithTimeout(ctx, s.opts.RequestTimeout)
		reached, _, err = c.waitFor(wctx, fence, 0)
		cancel()
		if ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
		if !reached {
			if err != nil {
				c.warnFallback("the snapshot fence did not arrive on the cache's watch in time; snapshot from a LIST", err)
			}
			return nil, false, nil
		}
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if !c.ready || c.rev < target {
		return nil, false, nil
	}
	return &state.Snapshot{
		ClusterID:        clusterID,
		Records:          c.recordsLocked(clusterID),
		Revision:         state.NewRevision(c.revStr),
		ObservedAtUnixMs: s.now().UnixMilli(),
	}, true, nil
}

// warnFallback logs why a snapshot fell back to a LIST, at most once a
// minute.
func (c *snapCache) warnFallback(msg string, err error) {
	now := time.Now().UnixNano()
	last := c.warned.Load()
	if now-last < int64(time.Minute) || !c.warned.CompareAndSwap(last, now) {
		return
	}
	c.s.log.Warn(msg, "err", err)
}

// recordsLocked returns the cluster's records in snapshot order; mu must
// be held (for reading at least). The slice is shared by every snapshot
// of the same contents and must not be modified.
func (c *snapCache) recordsLocked(clusterID string) []*cluster.Record {
	return c.idx.Records(clusterID, func(es []*cachedLease) ([]*cluster.Record, bool) {
		var recs []*cluster.Record // nil when empty, as a LIST's
		if len(es) > 0 {
			recs = make([]*cluster.Record, len(es))
			for i, e := range es {
				recs[i] = e.rec
			}
		}
		return recs, true
	})
}
