package etcd

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

// Snapshot returns the cluster's readable records at one revision, ordered by role then node ID.
//
// With the snapshot cache it asks etcd only for the current revision (a
// linearizable count-only read of one key) and waits until the cache has
// applied every change up to it; the answer is the cache's state at its
// revision, which is at least the one etcd reported, so the read is
// linearizable. While the cache is listing the prefix (at start or after
// losing its watch) it waits for that listing rather than read the prefix
// a second time; without the cache, or while the cache is backing off
// after a failure, it reads the cluster's prefix with one linearizable
// range request.
func (s *Store) Snapshot(ctx context.Context, clusterID string) (*state.Snapshot, error) {
	if err := cluster.ValidateID("clusterId", clusterID); err != nil {
		return nil, fmt.Errorf("etcd snapshot: %w: %w", state.ErrInvalidRecord, err)
	}
	ctx, cancel, ci, err := s.begin(ctx, "snapshot")
	if err != nil {
		return nil, err
	}
	defer cancel()
	op := "snapshot " + clusterID
	if s.cache != nil && s.cache.awaitReady(ctx) {
		snap, ok, err := s.cachedSnapshot(ctx, clusterID)
		if err != nil {
			return nil, s.mapError(op, err, ci)
		}
		if ok {
			s.stats.cacheSnaps.Add(1)
			return snap, nil
		}
	}
	snap, err := s.rangeSnapshot(ctx, clusterID)
	if err != nil {
		return nil, s.mapError(op, err, ci)
	}
	s.stats.rangeSnaps.Add(1)
	return snap, nil
}

// currentRevision returns etcd's current revision from a linearizable
// count-only read of one key that never exists: O(1) on the server.
func (s *Store) currentRevision(ctx context.Context) (int64, error) {
	resp, err := s.client.Get(ctx, s.keys.revisionProbe(), clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}

// cachedSnapshot answers from the watch cache; ok is false when the cache
// stopped being ready, and the caller falls back to a range read.
func (s *Store) cachedSnapshot(ctx context.Context, clusterID string) (*state.Snapshot, bool, error) {
	target, err := s.currentRevision(ctx)
	if err != nil {
		return nil, false, err
	}
	return s.cache.snapshot(ctx, clusterID, target)
}

// rangeSnapshot reads the cluster's prefix, a page at a time (rangePages)
// within ctx's deadline.
func (s *Store) rangeSnapshot(ctx context.Context, clusterID string) (*state.Snapshot, error) {
	var items []item
	rev, err := s.rangePages(func() (context.Context, func()) { return ctx, func() {} }, s.keys.cluster(clusterID), func(kvs []*mvccpb.KeyValue, count int64, first bool) {
		if first {
			items = make([]item, 0, count)
		}
		for _, kv := range kvs {
			slot := string(kv.Key)
			key, ok := s.keys.parse(slot)
			if !ok || key.ClusterID != clusterID {
				s.skipped(slot, fmt.Errorf("%w: key is not <prefix>/clusters/<cluster-id>/nodes/<role>/<node-id>", cluster.ErrMalformed))
				continue
			}
			items = append(items, item{slot: slot, stored: s.decodeKV(kv, key, false)})
		}
	})
	if err != nil {
		return nil, err
	}
	now := s.clock().UnixMilli()
	recs, _ := s.usable(len(items), func(i int) *item { return &items[i] })
	// etcd returns keys in byte order, which is role then node ID; sort
	// only if that ever stops being true.
	if !slices.IsSortedFunc(recs, compareRecords) {
		slices.SortFunc(recs, compareRecords)
	}
	return &state.Snapshot{
		ClusterID:        clusterID,
		Records:          recs,
		Revision:         revision(rev),
		ObservedAtUnixMs: now,
	}, nil
}

// item is one stored value with its etcd key.
type item struct {
	slot string
	stored
}

// usable returns the records of n items that a snapshot shows: every
// readable record etcd holds. It skips (and counts) unreadable values, and
// nothing else: no record is left out for its age on this store's clock
// (etcd's own lease deletes an expired record, and every coordinator that
// reads the same revision sees the same records).
func (s *Store) usable(n int, at func(int) *item) (recs []*cluster.Record, skipped bool) {
	recs = make([]*cluster.Record, 0, n)
	var skippedBad []*item
	for i := range n {
		it := at(i)
		if it.bad != nil {
			skippedBad = append(skippedBad, it)
			continue
		}
		recs = append(recs, it.rec)
	}
	for _, it := range skippedBad {
		s.skipped(it.slot, it.bad)
	}
	return recs, len(skippedBad) > 0
}

func compareRecords(a, b *cluster.Record) int {
	if c := cmp.Compare(a.Role, b.Role); c != 0 {
		return c
	}
	return cmp.Compare(a.NodeID, b.NodeID)
}
