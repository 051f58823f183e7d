package kube

import (
	"context"
	"errors"
	"fmt"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/talonhq/talon/internal/backoff"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

const (
	// maxBatch bounds the events of one WatchBatch.
	maxBatch = 128
	// watchSessionSeconds asks the API server to end each watch request
	// after about this long; the store then resumes from the last
	// resourceVersion it saw, so long-lived watches survive load balancers
	// that cut idle streams.
	watchSessionSeconds = 300
	// maxQuickEnds is how many watch requests in a row may end at once
	// without an event before the watch reports the backend unavailable
	// (client-go turns a refused or reset stream into an empty watch).
	maxQuickEnds = 3
	// quickEnd is what "at once" means for maxQuickEnds.
	quickEnd = time.Second
)

// Watch streams the cluster's changes after revision after (a Snapshot's or
// an Event's revision): a Kubernetes watch from that resourceVersion with
// the cluster's label selector and bookmarks. ADDED and MODIFIED become
// EventPut with the annotation's record, DELETED becomes EventDelete;
// bookmarks advance the resume point only. A Lease whose record this build
// cannot read (another schema version, malformed) becomes EventDelete of its
// slot, because Snapshot would not return it either. Each event's revision
// is the Lease's resourceVersion after the change.
//
// With the snapshot cache on, the watch is served from the cache's own
// (one watch per store, however many callers watch): changes the cache
// has applied already are replayed from its ring of recent events, a
// revision older than the ring ends the watch with ErrCompacted, and a
// caller that falls behind, or a cache that loses its watch, ends it with
// ErrUnavailable or the cause. Without the cache, or when the API
// server's resourceVersions are not integers, it is a watch of its own:
//
// When a watch request ends normally the store watches again from the last
// resourceVersion it saw. The channel ends with ErrCompacted when the API
// server no longer has that resourceVersion (410 Gone, "too old resource
// version"), with ErrUnavailable, ErrTimeout, ErrUnauthenticated or
// ErrPermissionDenied when a (re)started watch fails, and without an error
// batch when ctx ends or the store is closed.
func (s *Store) Watch(ctx context.Context, clusterID string, after state.Revision) <-chan state.WatchBatch {
	out := make(chan state.WatchBatch, 1)
	fail := func(err error) <-chan state.WatchBatch {
		out <- state.WatchBatch{Err: err}
		close(out)
		return out
	}
	if err := cluster.ValidateID("clusterId", clusterID); err != nil {
		return fail(fmt.Errorf("%w: %w", state.ErrInvalidRecord, err))
	}
	if after.IsZero() {
		return fail(fmt.Errorf("%w: kube watch %s: the zero revision is not valid: watch from a snapshot's revision", state.ErrInvalidRecord, clusterID))
	}
	if c := s.snapshotCache(); c != nil {
		if after, err := parseRevision(after.String()); err == nil {
			if ch, ok := c.subscribe(ctx, clusterID, after); ok {
				return ch
			}
		}
	}
	if err := s.goOwned(func() { s.watch(ctx, clusterID, after.String(), out) }); err != nil {
		return fail(err)
	}
	return out
}

// watch runs one Watch until ctx ends, the store closes or a terminal error.
func (s *Store) watch(ctx context.Context, clusterID, rv string, out chan<- state.WatchBatch) {
	defer close(out)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()

	op := "kube watch " + clusterID
	quick := 0
	for {
		w, err := s.startWatch(ctx, s.leases, clusterSelector(clusterID), rv)
		if err != nil {
			if ctx.Err() == nil {
				send(ctx, out, state.WatchBatch{Err: mapError(op+" from "+rv, err)})
			}
			return
		}
		started := time.Now()
		n, next, err := s.pump(ctx, w, clusterID, rv, out)
		w.Stop()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			send(ctx, out, state.WatchBatch{Err: mapError(op+" from "+rv, err)})
			return
		}
		rv = next
		if n == 0 && time.Since(started) < quickEnd {
			quick++
			if quick >= maxQuickEnds {
				send(ctx, out, state.WatchBatch{Err: fmt.Errorf("%s: %w: watch stream ended at once %d times in a row", op, state.ErrUnavailable, quick)})
				return
			}
			if backoff.Sleep(ctx, time.Duration(quick)*100*time.Millisecond) != nil {
				return
			}
			continue
		}
		quick = 0
	}
}

// startWatch opens one watch request through lc of the Leases selector
// selects, with bookmarks. Establishing it is bounded by RequestTimeout (a paused API
// server accepts the connection and never answers); the stream itself is
// not.
func (s *Store) startWatch(ctx context.Context, lc coordclient.LeaseInterface, selector, rv string) (watch.Interface, error) {
	wctx, wcancel := context.WithCancel(ctx)
	timer := time.AfterFunc(s.opts.RequestTimeout, wcancel)
	secs := int64(s.watchSession / time.Second)
	w, err := lc.Watch(wctx, metav1.ListOptions{
		LabelSelector:       selector,
		ResourceVersion:     rv,
		AllowWatchBookmarks: true,
		TimeoutSeconds:      &secs,
	})
	if !timer.Stop() {
		// The timer fired: the watch was not established in time. Cancel
		// it even if it raced to success, and report a timeout.
		if err == nil {
			w.Stop()
		}
		wcancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: establishing the watch took longer than %s", state.ErrTimeout, s.opts.RequestTimeout)
	}
	if err != nil {
		wcancel()
		return nil, err
	}
	// wcancel must outlive the stream; it runs when the stream is stopped.
	return &stopWatch{Interface: w, cancel: wcancel}, nil
}

// stopWatch cancels the request context of a watch when it is stopped.
type stopWatch struct {
	watch.Interface
	cancel context.CancelFunc
}

func (w *stopWatch) Stop() {
	w.Interface.Stop()
	w.cancel()
}

// pump forwards one watch request's events to out until its result channel
// closes (the request ended: resume from next), ctx ends, or the server
// sends an error. It returns how many events (bookmarks included) arrived.
func (s *Store) pump(ctx context.Context, w watch.Interface, clusterID, rv string, out chan<- state.WatchBatch) (n int, next string, err error) {
	next = rv
	res := w.ResultChan()
	for {
		var ev watch.Event
		var ok bool
		select {
		case <-ctx.Done():
			return n, next, nil
		case ev, ok = <-res:
		}
		if !ok {
			return n, next, nil
		}
		var batch []state.Event
		for {
			n++
			e, emit, err := s.convert(ctx, ev, clusterID)
			if err != nil {
				if len(batch) > 0 {
					send(ctx, out, state.WatchBatch{Events: batch})
				}
				return n, next, err
			}
			if rv := resourceVersionOf(ev); rv != "" {
				next = rv
			}
			if emit {
				batch = append(batch, e)
			}
			if len(batch) >= maxBatch {
				break
			}
			// Take whatever else has already arrived into the same batch.
			select {
			case ev, ok = <-res:
			default:
				ok = false
			}
			if !ok {
				break
			}
		}
		if len(batch) > 0 && !send(ctx, out, state.WatchBatch{Events: batch}) {
			return n, next, nil
		}
	}
}

// resourceVersionOf returns the resourceVersion of a Lease or bookmark event.
func resourceVersionOf(ev watch.Event) string {
	if l, ok := ev.Object.(*coordv1.Lease); ok {
		return l.ResourceVersion
	}
	return ""
}

// convert maps one watch event onto a state.Event. emit is false for
// events that carry no change of this cluster (bookmarks, other clusters
// whose label value coincides, Leases that are not Talon records).
func (s *Store) convert(ctx context.Context, ev watch.Event, clusterID string) (state.Event, bool, error) {
	switch ev.Type {
	case watch.Error:
		if status, ok := ev.Object.(*metav1.Status); ok {
			return state.Event{}, false, apierrors.FromObject(status)
		}
		return state.Event{}, false, fmt.Errorf("%w: watch error event with a %T", state.ErrUnavailable, ev.Object)
	case watch.Bookmark:
		return state.Event{}, false, nil
	}
	l, ok := ev.Object.(*coordv1.Lease)
	if !ok {
		return state.Event{}, false, fmt.Errorf("watch %s event with a %T, not a Lease", ev.Type, ev.Object)
	}
	key, ok := keyFromAnnotations(l.Annotations)
	if !ok || key.ClusterID != clusterID {
		return state.Event{}, false, nil
	}
	e := state.Event{Type: state.EventDelete, Key: key, Revision: state.NewRevision(l.ResourceVersion)}
	switch ev.Type {
	case watch.Added, watch.Modified:
		rec, _, err := s.decode(l, key)
		if err == nil {
			e.Type = state.EventPut
			e.Record = s.observed(l, rec)
		} else if !errors.Is(err, state.ErrUnsupportedVersion) {
			s.log.WarnContext(ctx, "watched lease holds no readable record: reported as deleted", "lease", l.Name, "err", err)
		}
	case watch.Deleted:
	default:
		return state.Event{}, false, fmt.Errorf("watch event of unknown type %q", ev.Type)
	}
	return e, true, nil
}

// send delivers b unless ctx ends first, and reports whether it did.
func send(ctx context.Context, out chan<- state.WatchBatch, b state.WatchBatch) bool {
	select {
	case out <- b:
		return true
	case <-ctx.Done():
		return false
	}
}
