package kube

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// gcQueueSize bounds the expired Leases waiting for deletion; Snapshot drops
// candidates beyond it (the next Snapshot or sweep offers them again).
const gcQueueSize = 1024

// gcItem is one expired Lease observed at a resourceVersion.
type gcItem struct {
	name, resourceVersion string
}

// enqueueGC hands expired Leases to the GC goroutine without blocking: a
// Lease already queued is skipped, and candidates beyond the queue's
// capacity are dropped (a later Snapshot or sweep sees them again).
func (s *Store) enqueueGC(items []gcItem) {
	if len(items) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	for _, it := range items {
		if s.gcQueued[it.name] {
			continue
		}
		select {
		case s.gcq <- it:
			s.gcQueued[it.name] = true
		default:
			return
		}
	}
}

// cachePruneInterval is how often the GC goroutine drops expired entries
// from the write cache.
const cachePruneInterval = time.Minute

// runGC deletes the expired Leases Snapshot hands it and, every
// SweepInterval, lists every Talon Lease in the namespace and deletes the
// expired ones; it also prunes the write cache. It runs until Close.
func (s *Store) runGC() {
	defer s.wg.Done()
	var tick <-chan time.Time
	if s.opts.SweepInterval > 0 {
		t := time.NewTicker(s.opts.SweepInterval)
		defer t.Stop()
		tick = t.C
	}
	prune := time.NewTicker(cachePruneInterval)
	defer prune.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-prune.C:
			s.cache.prune(s.expired)
			// Forget the Leases no snapshot or sweep has listed for a while.
			s.obs.Prune(s.now().Add(-max(10*time.Minute, 2*s.opts.SweepInterval)))
		case it := <-s.gcq:
			s.mu.Lock()
			delete(s.gcQueued, it.name)
			s.mu.Unlock()
			s.collect(s.ctx, it)
		case <-tick:
			s.sweep(s.ctx)
		}
	}
}

// sweep deletes every expired Talon Lease in the namespace: each one this
// store has seen unchanged for its full lease duration on its own clock
// (a Lease first seen by this sweep is not expired yet), with the
// resourceVersion it saw as the delete's precondition.
func (s *Store) sweep(ctx context.Context) {
	items, _, err := s.list(ctx, managedSelector)
	if err != nil {
		if ctx.Err() == nil {
			s.log.WarnContext(ctx, "sweep of expired leases failed", "err", mapError("kube sweep", err))
		}
		return
	}
	for i := range items {
		if ctx.Err() != nil {
			return
		}
		if l := &items[i]; s.expired(l) {
			s.collect(ctx, gcItem{name: l.Name, resourceVersion: l.ResourceVersion})
		}
	}
}

// collect deletes an expired Lease as garbage collection: it waits for a
// write slot as long as it takes (it is never refused: garbage waits
// without harm while heartbeats are shed).
func (s *Store) collect(ctx context.Context, it gcItem) {
	release, err := s.writes.acquire(ctx)
	if err != nil {
		return
	}
	defer release()
	s.deleteExpired(ctx, it)
}

// deleteExpired deletes a Lease observed expired at resourceVersion. The
// precondition makes it safe without a leader: if the process renewed the
// Lease since (or another coordinator already deleted it) the delete fails
// with Conflict (or NotFound) and nothing changes. The caller holds a write
// slot (collect, or RemoveNode's).
func (s *Store) deleteExpired(ctx context.Context, it gcItem) {
	rctx, cancel := s.reqCtx(ctx)
	defer cancel()
	rv := it.resourceVersion
	err := s.leases.Delete(rctx, it.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
	switch {
	case err == nil:
		s.log.DebugContext(ctx, "deleted expired lease", "lease", it.name, "resourceVersion", rv)
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
	case ctx.Err() != nil:
	default:
		s.log.WarnContext(ctx, "deleting expired lease failed", "lease", it.name, "err", mapError("kube gc", err))
	}
}
