package kube

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

// Snapshot returns the record of every Talon Lease of the cluster, ordered
// by role then node ID, as of one revision at or after the call began
// (linearizable), with the local clock after the read as the observation
// time. No Lease is left out for its age: what the store holds is the
// snapshot, and a Lease goes only when a coordinator's TransitionExpire (or
// a removal) deletes it. Leases of other schema versions and unreadable
// ones are skipped.
//
// With Options.CacheSnapshots the answer comes from the snapshot cache once
// it has caught up with a probed current resourceVersion (snapCache.snapshot),
// its revision the cache's. Without, or while the cache is not ready or
// cannot catch up in time, it is one consistent LIST of the cluster's
// Leases (no resourceVersion: the API server's most recent,
// quorum-consistent read; further pages continue at the first page's
// resourceVersion), its revision the list's resourceVersion.
func (s *Store) Snapshot(ctx context.Context, clusterID string) (*state.Snapshot, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	if err := cluster.ValidateID("clusterId", clusterID); err != nil {
		return nil, fmt.Errorf("%w: %w", state.ErrInvalidRecord, err)
	}
	op := "kube snapshot " + clusterID
	if c := s.snapshotCache(); c != nil {
		snap, ok, err := c.snapshot(ctx, clusterID)
		if err != nil {
			return nil, mapError(op, err)
		}
		if ok {
			s.stats.cacheSnaps.Add(1)
			s.pruneObservations(s.now())
			return snap, nil
		}
	}
	s.stats.listSnaps.Add(1)
	return s.listSnapshot(ctx, op, clusterID)
}

// listSnapshot is Snapshot with one consistent LIST.
func (s *Store) listSnapshot(ctx context.Context, op, clusterID string) (*state.Snapshot, error) {
	items, rv, err := s.list(ctx, s.leases, clusterSelector(clusterID))
	if err != nil {
		return nil, mapError(op, err)
	}
	now := s.now()
	s.pruneObservations(now)
	snap := &state.Snapshot{ClusterID: clusterID, Revision: state.NewRevision(rv), ObservedAtUnixMs: now.UnixMilli()}
	for i := range items {
		l := &items[i]
		key, ok := keyFromAnnotations(l.Annotations)
		if !ok || key.ClusterID != clusterID || isFence(l) {
			continue // another cluster whose label value coincides, or not Talon's
		}
		rec, _, err := s.decode(l, key)
		if err != nil {
			if errors.Is(err, state.ErrUnsupportedVersion) {
				s.log.DebugContext(ctx, "skipping lease of another schema version", "lease", l.Name, "err", err)
			} else {
				s.log.WarnContext(ctx, "skipping unreadable lease", "lease", l.Name, "err", err)
			}
			continue
		}
		snap.Records = append(snap.Records, s.observed(l, rec))
	}
	slices.SortFunc(snap.Records, func(a, b *cluster.Record) int {
		return cmp.Or(cmp.Compare(a.Role, b.Role), cmp.Compare(a.NodeID, b.NodeID))
	})
	return snap, nil
}

// maxListRestarts bounds how often list starts over when a continue token
// expires between pages.
const maxListRestarts = 3

// list returns every Lease selector selects in the namespace from one
// consistent LIST through lc, paginated, and the list's resourceVersion.
func (s *Store) list(ctx context.Context, lc coordclient.LeaseInterface, selector string) ([]coordv1.Lease, string, error) {
	var lastErr error
	for range maxListRestarts {
		var items []coordv1.Lease
		rv, cont := "", ""
		for {
			rctx, cancel := s.reqCtx(ctx)
			page, err := lc.List(rctx, metav1.ListOptions{LabelSelector: selector, Limit: s.opts.ListPageSize, Continue: cont})
			cancel()
			if err != nil {
				if cont != "" && apierrors.IsResourceExpired(err) {
					lastErr = err // the continue token outlived compaction: start over
					break
				}
				return nil, "", err
			}
			if rv == "" {
				rv = page.ResourceVersion
			}
			items = append(items, page.Items...)
			cont = page.Continue
			if cont == "" {
				return items, rv, nil
			}
		}
	}
	return nil, "", fmt.Errorf("%w: list continue token expired %d times: %w", state.ErrUnavailable, maxListRestarts, lastErr)
}
