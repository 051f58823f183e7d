package kube

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

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

// snapCache mirrors every Talon Lease of the namespace (managedSelector)
// through a state.Reflector fed by one watch: a consistent LIST at
// resourceVersion R, then a watch from R with bookmarks; on any watch
// failure (410 Gone, a lost stream) it lists again. Its revision C is the
// resourceVersion of the last event or bookmark applied; the API server
// sends a watch's events in resourceVersion order, so the mirror is the
// namespace's Talon Leases as of C. Store.Snapshot answers from it once C
// has reached a revision probed after the call began (snapshot), and
// Store.Watch is served from it, so a coordinator holds one watch.
//
// Each Lease version is decoded once, when it arrives (not at all when it
// is the version this store wrote, which the write cache holds), and
// observed then: its UpdatedAtUnixMs is when this store first saw it.
type snapCache struct {
	s *Store
	r *state.Reflector[*cachedLease]
	// probes and fences are the shared revision probe and fence write.
	probes, fences *sharedCall
	// fenceSeq makes every fence write a change (an unchanged object
	// would get no new resourceVersion).
	fenceSeq atomic.Uint64
	// fenced is set once this store has written its fence: Close deletes it.
	fenced atomic.Bool
	// warned is when (unix ns) a fallback was last logged.
	warned atomic.Int64
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
	c := &snapCache{s: s}
	c.r = state.NewReflector(s.ctx, s.log, state.ReflectorSource[*cachedLease]{
		Name:      "snapshot cache",
		List:      c.list,
		Watch:     c.watch,
		Record:    func(e *cachedLease) (*cluster.Record, bool) { return e.rec, e.rec != nil },
		Final:     func(err error) bool { return errors.Is(err, errOpaqueRevision) },
		Available: c.available,
		Go:        func(f func()) bool { return s.goOwned(f) == nil },
	}, s.opts.ringSize)
	c.probes = newSharedCall(s, probesInflight, s.probeRevision)
	c.fences = newSharedCall(s, 1, c.writeFence)
	return c
}

// run keeps the cache in sync until the store closes. It ends for good
// when the API server's resourceVersions are not integers: snapshots are
// LISTs then, and watches the store's own.
func (c *snapCache) run() { c.r.Run() }

// available reports whether the API server still has resourceVersion
// after: a LIST of the store's fence at exactly that version answers 410
// Gone once it is compacted.
func (c *snapCache) available(ctx context.Context, after uint64) error {
	s := c.s
	ctx, cancel := context.WithTimeout(ctx, s.opts.RequestTimeout)
	defer cancel()
	_, err := s.cacheLeases.List(ctx, metav1.ListOptions{
		FieldSelector:        fields.OneTermEqualSelector("metadata.name", s.fenceName).String(),
		ResourceVersion:      strconv.FormatUint(after, 10),
		ResourceVersionMatch: metav1.ResourceVersionMatchExact,
	})
	if err != nil {
		return mapError("kube watch revision check", err)
	}
	return nil
}

// list reads every Talon Lease of the namespace.
func (c *snapCache) list(ctx context.Context) ([]*cachedLease, uint64, string, error) {
	s := c.s
	listed := s.now()
	items, rv, err := s.list(ctx, s.cacheLeases, managedSelector)
	if err != nil {
		return nil, 0, "", mapError("kube snapshot cache list", err)
	}
	n, err := parseRevision(rv)
	if err != nil {
		return nil, 0, "", err
	}
	s.stats.resyncs.Add(1)
	entries := make([]*cachedLease, 0, len(items))
	for i := range items {
		if e := c.entry(&items[i]); e != nil {
			entries = append(entries, e)
		}
	}
	// The listing saw every Lease still there: forget the observations of
	// the rest.
	s.obs.Prune(listed)
	return entries, n, rv, nil
}

// watch applies watch requests, each resumed from the cache's revision
// when the one before ended normally, until one fails.
func (c *snapCache) watch(ctx context.Context, stream state.Stream[*cachedLease]) error {
	s := c.s
	first := true
	for {
		_, from := stream.Revision()
		w, err := s.startWatch(ctx, s.cacheLeases, managedSelector, from)
		if err != nil {
			return mapError("kube snapshot cache watch from "+from, err)
		}
		if first {
			// Established only now: from here on, every change after the
			// listing arrives on the watch.
			stream.Established()
			first = false
		}
		started := time.Now()
		events, err := c.pump(ctx, w, stream)
		w.Stop()
		if err != nil || ctx.Err() != nil {
			return err
		}
		if events == 0 && time.Since(started) < quickEnd {
			// client-go turns a refused or reset stream into an empty watch.
			return fmt.Errorf("%w: snapshot cache watch from %s ended at once", state.ErrUnavailable, from)
		}
	}
}

// pump applies one watch request's events until its result channel closes
// (the request ended: resume from the cache's revision), ctx ends, or the
// server sends an error. It returns how many events (bookmarks included)
// arrived.
func (c *snapCache) pump(ctx context.Context, w watch.Interface, stream state.Stream[*cachedLease]) (int, error) {
	res := w.ResultChan()
	n := 0
	for {
		var ev watch.Event
		var ok bool
		select {
		case <-ctx.Done():
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
				stream.Apply(changes)
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
		stream.Apply(changes)
	}
}

// change is one watch event as the cache applies it: Name is "" for a
// bookmark, Entry nil when the Lease holds no record (it was deleted, or
// is a fence, or holds no readable record).
type change = state.MirrorChange[*cachedLease]

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
	ch := change{Token: l.ResourceVersion, Rev: rev}
	switch ev.Type {
	case watch.Bookmark:
	case watch.Added, watch.Modified:
		ch.Name = l.Name
		ch.Entry = c.entry(l)
	case watch.Deleted:
		ch.Name = l.Name
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

// touch marks every Lease the cache holds as still listed in the store's
// observations, so pruning them drops only Leases that are gone.
func (c *snapCache) touch() {
	c.r.Read(0, func(idx *state.Mirror[*cachedLease], _ uint64, _ string) {
		idx.Entries(func(e *cachedLease) { c.s.obs.See(e.name, e.rv, 0) })
	})
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
	// A listing in flight (at start, after a lost watch) is waited for
	// rather than repeated by a LIST of this call's own; one backing off
	// after a failure is not.
	if !c.r.AwaitReady(ctx) {
		return nil, false, nil
	}
	target, err := c.probes.do(ctx)
	if err != nil {
		if errors.Is(err, errOpaqueRevision) {
			return nil, false, nil
		}
		return nil, false, err
	}
	reached, ready, err := c.r.WaitFor(ctx, target, fenceAfter)
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
		reached, _, err = c.r.WaitFor(wctx, fence, 0)
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
	c.r.Read(target, func(idx *state.Mirror[*cachedLease], _ uint64, token string) {
		snap = &state.Snapshot{
			ClusterID:        clusterID,
			Records:          recordsOf(idx, clusterID),
			Revision:         state.NewRevision(token),
			ObservedAtUnixMs: s.now().UnixMilli(),
		}
	})
	return snap, snap != nil, nil
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

// recordsOf returns the cluster's records in snapshot order, under the
// reflector's read lock. The slice is shared by every snapshot of the
// same contents and must not be modified.
func recordsOf(idx *state.Mirror[*cachedLease], clusterID string) []*cluster.Record {
	return idx.Records(clusterID, func(es []*cachedLease) ([]*cluster.Record, bool) {
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

// subscribe serves Store.Watch from the cache; ok is false when the cache
// is off for good.
func (c *snapCache) subscribe(ctx context.Context, clusterID string, after uint64) (<-chan state.WatchBatch, bool) {
	return c.r.Subscribe(ctx, clusterID, after)
}
