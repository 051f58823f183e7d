package etcd

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

// Watch streams the cluster's changes after revision after: an etcd watch
// of the cluster's prefix from after+1, one batch per watch response (each
// holds whole revisions), or, with the snapshot cache, the same changes
// from the cache's own watch (see watchFromCache). A revision etcd has
// compacted ends the watch with state.ErrCompacted; so does a token that is
// not an etcd revision. Deletes, explicit or by lease expiry, are
// EventDelete. Values that are not readable records are skipped and counted
// (Stats).
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
	run := s.runWatch
	if s.cache != nil {
		run = s.watchFromCache
	}
	if !s.spawn(func() { run(ctx, clusterID, rev, out) }) {
		return fail(fmt.Errorf("etcd watch %s: %w", clusterID, state.ErrClosed))
	}
	return out
}

func (s *Store) runWatch(ctx context.Context, clusterID string, after int64, out chan<- state.WatchBatch) {
	pos := after
	s.etcdWatch(ctx, clusterID, &pos, out, nil)
	s.endWatch(ctx, clusterID, out)
}

// endWatch closes out, first telling a consumer still reading that the
// store closed.
func (s *Store) endWatch(ctx context.Context, clusterID string, out chan<- state.WatchBatch) {
	if s.closed.Load() && ctx.Err() == nil {
		// Close must not wait for a consumer that stopped reading.
		select {
		case out <- state.WatchBatch{Err: fmt.Errorf("etcd watch %s: %w", clusterID, state.ErrClosed)}:
		default:
		}
	}
	close(out)
}

// etcdWatch delivers the cluster's changes after *pos from an etcd watch,
// advancing *pos past each response's events, until ctx or the store ends,
// the watch fails (the error is delivered) or, when handOver is set, it
// returns true for *pos after a response: then etcdWatch returns true and
// the caller goes on from *pos.
func (s *Store) etcdWatch(ctx context.Context, clusterID string, pos *int64, out chan<- state.WatchBatch, handOver func(pos int64) bool) (handedOver bool) {
	// Require a leader so that a member cut off from its cluster ends the
	// watch instead of leaving it silent.
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	stop := context.AfterFunc(s.lifetime, cancel)
	defer stop()
	op := "watch " + clusterID

	wch := s.client.Watch(wctx, s.keys.cluster(clusterID), clientv3.WithPrefix(), clientv3.WithRev(*pos+1))
	for wr := range wch {
		if err := wr.Err(); err != nil {
			if wctx.Err() != nil {
				return false
			}
			select {
			case out <- state.WatchBatch{Err: s.mapError(op, err, nil)}:
			case <-wctx.Done():
			}
			return false
		}
		events := s.events(clusterID, wr.Events)
		if len(events) > 0 {
			select {
			case out <- state.WatchBatch{Events: events}:
			case <-wctx.Done():
				return false
			}
		}
		if n := len(wr.Events); n > 0 {
			*pos = max(*pos, wr.Events[n-1].Kv.ModRevision)
		}
		if handOver != nil && handOver(*pos) {
			return true
		}
	}
	return false
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

// watchFromCache serves a Watch from the snapshot cache's log of the
// changes it applied, so that a coordinator's own watch costs no second
// etcd watch stream, and no second decode of each change, beside the
// cache's. The log holds the changes of whole revisions in revision order,
// exactly as the cache's etcd watch delivered them, so the order, the
// absence of gaps and duplicates and the batching by whole revisions are
// the etcd watch's. It first checks with etcd that after+1 is not
// compacted (a count-only read of one key at that revision), so that a
// watch from a compacted revision fails with state.ErrCompacted as an etcd
// watch would, even while the log still holds its changes. While the log
// cannot serve (the watch starts, or has fallen, more than logSize changes
// behind the cache, or the cache is resynchronising), the watch catches up
// with an etcd watch of its own from the last revision it delivered, under
// that watch's rules, and returns to the log once the log covers it.
func (s *Store) watchFromCache(ctx context.Context, clusterID string, after int64, out chan<- state.WatchBatch) {
	defer s.endWatch(ctx, clusterID, out)
	op := "watch " + clusterID
	if err := s.checkCompacted(ctx, op, after+1); err != nil {
		if ctx.Err() == nil {
			select {
			case out <- state.WatchBatch{Err: err}:
			case <-ctx.Done():
			case <-s.lifetime.Done():
			}
		}
		return
	}
	s.stats.cachedWatches.Add(1)
	pos := after // every change up to pos has been delivered, or came before the watch
	for s.serveFromLog(ctx, clusterID, &pos, out) {
		s.stats.watchCatchUps.Add(1)
		if !s.etcdWatch(ctx, clusterID, &pos, out, s.cache.covers) {
			return
		}
	}
}

// covers reports whether the log holds every change after pos.
func (c *watchCache) covers(pos int64) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.ready && pos >= c.logFloor
}

// serveFromLog delivers the cluster's changes after *pos from the cache's
// log until ctx or the store ends (false) or the log no longer holds every
// change after *pos (true: the caller catches up from etcd).
func (s *Store) serveFromLog(ctx context.Context, clusterID string, pos *int64, out chan<- state.WatchBatch) (behind bool) {
	c := s.cache
	prefix := s.keys.cluster(clusterID)
	var next uint64 // the log position to read from, once found
	found := false
	for {
		c.mu.RLock()
		if !c.ready || *pos < c.logFloor {
			c.mu.RUnlock()
			return true
		}
		first := c.logNext - min(c.logNext, logSize)
		if !found || next < first {
			// The first change after pos: revisions never decrease along
			// the log.
			next = first + uint64(sort.Search(int(c.logNext-first), func(i int) bool { return c.log[(first+uint64(i))%logSize].rev > *pos }))
			found = true
		}
		var events []state.Event
		var bad []logChange
		for ; next < c.logNext; next++ {
			lc := c.log[next%logSize]
			if lc.rev <= *pos || !strings.HasPrefix(lc.slot, prefix) {
				continue
			}
			switch {
			case !lc.valid || lc.key.ClusterID != clusterID || (lc.put && lc.st.bad != nil):
				bad = append(bad, lc)
			case lc.put:
				events = append(events, state.Event{Type: state.EventPut, Key: lc.key, Record: lc.st.rec, Revision: revision(lc.rev)})
			default:
				events = append(events, state.Event{Type: state.EventDelete, Key: lc.key, Revision: revision(lc.rev)})
			}
		}
		*pos = max(*pos, c.rev)
		changed := c.changed
		c.mu.RUnlock()
		for _, lc := range bad {
			if lc.put && lc.st.bad != nil {
				s.skipped(lc.slot, lc.st.bad)
			} else {
				s.skipped(lc.slot, fmt.Errorf("%w: key is not <prefix>/clusters/<cluster-id>/nodes/<role>/<node-id>", cluster.ErrMalformed))
			}
		}
		if len(events) > 0 {
			select {
			case out <- state.WatchBatch{Events: events}:
			case <-ctx.Done():
				return false
			case <-s.lifetime.Done():
				return false
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return false
		case <-s.lifetime.Done():
			return false
		}
	}
}

// checkCompacted returns an error matching state.ErrCompacted when
// revision rev is compacted (an etcd watch from it would fail), nil when
// it is available or still in the future, or the mapped error of the read.
func (s *Store) checkCompacted(ctx context.Context, op string, rev int64) error {
	ctx, cancel, ci, err := s.begin(ctx, op)
	if err != nil {
		return err
	}
	defer cancel()
	_, err = s.client.Get(ctx, s.keys.revisionProbe(), clientv3.WithRev(rev), clientv3.WithCountOnly())
	if err == nil || errors.Is(rpctypes.Error(err), rpctypes.ErrFutureRev) {
		return nil
	}
	return s.mapError(op, err, ci)
}
