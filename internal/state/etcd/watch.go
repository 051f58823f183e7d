package etcd

import (
	"context"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

// Watch streams the cluster's changes after revision after. With the
// snapshot cache on, it is served from the cache's watch (one etcd watch
// per store, however many callers watch): changes the cache has applied
// already are replayed from its ring of recent events, a revision older
// than the ring ends the watch with state.ErrCompacted, and a caller that
// falls behind, or a cache that loses its watch, ends it with
// state.ErrUnavailable or the cause. Without the cache it is an etcd watch
// of the cluster's prefix from after+1, one batch per watch response (each
// holds whole revisions). A revision etcd has compacted ends the watch with
// state.ErrCompacted; so does a token that is not an etcd revision. Deletes,
// explicit or by lease expiry, are EventDelete. Values that are not
// readable records are skipped and counted (Stats).
func (s *Store) Watch(ctx context.Context, clusterID string, after state.Revision) <-chan state.WatchBatch {
	out := make(chan state.WatchBatch, 1)
	fail := func(err error) <-chan state.WatchBatch {
		out <- state.WatchBatch{Err: err}
		close(out)
		return out
	}
	if err := cluster.ValidateID("clusterId", clusterID); err != nil {
		return fail(fmt.Errorf("etcd watch: %w: %w", state.ErrInvalidRecord, err))
	}
	rev, ok := parseRevision(after)
	if !ok {
		return fail(fmt.Errorf("etcd watch %s: revision %q is not an etcd revision (watch from a snapshot's revision): %w", clusterID, after.String(), state.ErrCompacted))
	}
	if s.cache != nil {
		if ch, ok := s.cache.subscribe(ctx, clusterID, rev); ok {
			return ch
		}
	}
	if !s.spawn(func() { s.runWatch(ctx, clusterID, rev, out) }) {
		return fail(fmt.Errorf("etcd watch %s: %w", clusterID, state.ErrClosed))
	}
	return out
}

func (s *Store) runWatch(ctx context.Context, clusterID string, after int64, out chan<- state.WatchBatch) {
	defer close(out)
	// Require a leader so that a member cut off from its cluster ends the
	// watch instead of leaving it silent.
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	stop := context.AfterFunc(s.lifetime, cancel)
	defer stop()
	op := "watch " + clusterID

	wch := s.client.Watch(wctx, s.keys.cluster(clusterID), clientv3.WithPrefix(), clientv3.WithRev(after+1))
	for wr := range wch {
		if err := wr.Err(); err != nil {
			if wctx.Err() != nil {
				break
			}
			select {
			case out <- state.WatchBatch{Err: s.mapError(op, err, nil)}:
			case <-wctx.Done():
			}
			return
		}
		events := s.events(clusterID, wr.Events)
		if len(events) == 0 {
			continue
		}
		select {
		case out <- state.WatchBatch{Events: events}:
		case <-wctx.Done():
		}
	}
	if s.closed.Load() && ctx.Err() == nil {
		// Close must not wait for a consumer that stopped reading.
		select {
		case out <- state.WatchBatch{Err: fmt.Errorf("etcd %s: %w", op, state.ErrClosed)}:
		default:
		}
	}
}

// events converts one watch response's events.
func (s *Store) events(clusterID string, evs []*clientv3.Event) []state.Event {
	var out []state.Event
	for _, ev := range evs {
		slot := string(ev.Kv.Key)
		key, ok := s.keys.parse(slot)
		if !ok || key.ClusterID != clusterID {
			s.skipped(slot, fmt.Errorf("%w: key is not <prefix>/clusters/<cluster-id>/nodes/<role>/<node-id>", cluster.ErrMalformed))
			continue
		}
		e := state.Event{Key: key, Revision: revision(ev.Kv.ModRevision)}
		switch ev.Type {
		case mvccpb.PUT:
			st := s.decodeKV(ev.Kv, key, true)
			if st.bad != nil {
				s.skipped(slot, st.bad)
				continue
			}
			e.Type, e.Record = state.EventPut, st.rec
		case mvccpb.DELETE:
			e.Type = state.EventDelete
		default:
			continue
		}
		out = append(out, e)
	}
	return out
}
