package kube

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/talonhq/talon/internal/backoff"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

// leaseTTLSeconds converts a TTL to Lease seconds, rounding up: a Lease
// counts whole seconds and must not expire before the caller asked.
func leaseTTLSeconds(ttl time.Duration) (int32, error) {
	if ttl <= 0 {
		return 0, fmt.Errorf("%w: lease ttl %s: must be positive", state.ErrInvalidRecord, ttl)
	}
	secs := ttl / time.Second
	if ttl%time.Second != 0 {
		secs++
	}
	if secs > math.MaxInt32 {
		return 0, fmt.Errorf("%w: lease ttl %s: must be at most %d seconds", state.ErrInvalidRecord, ttl, math.MaxInt32)
	}
	return int32(secs), nil
}

// get reads a Lease by name; a missing Lease is (nil, nil).
func (s *Store) get(ctx context.Context, name string) (*coordv1.Lease, error) {
	rctx, cancel := s.reqCtx(ctx)
	defer cancel()
	l, err := s.leases.Get(rctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return l, err
}

// UpsertNode applies rec to its Lease under the ordering rule. It decides
// with cluster.Order against the record in the Lease's annotation (an
// expired or missing Lease holds no record) and writes with that Lease's
// resourceVersion as precondition, so a concurrent writer makes the write
// fail instead of being overwritten; it then reads again and re-decides, at
// most ConflictRetries times before returning ErrConflict. The first
// decision is made on the Lease as this store last wrote it, if it did (one
// request per heartbeat when a worker keeps talking to the same
// coordinator); a rejection is only ever made on a fresh read. Duplicate
// and stale updates write nothing.
func (s *Store) UpsertNode(ctx context.Context, rec *cluster.Record, leaseTTL time.Duration, opts ...state.UpsertOption) (state.WriteResult, error) {
	o := state.NewUpsertOptions(opts)
	if err := s.checkOpen(); err != nil {
		return state.WriteResult{}, err
	}
	if err := state.ValidateRecord(rec); err != nil {
		return state.WriteResult{}, err
	}
	secs, err := leaseTTLSeconds(leaseTTL)
	if err != nil {
		return state.WriteResult{}, err
	}
	key := rec.Key()
	// The operation's name is built only for an error: not per heartbeat.
	release, err := s.writes.admit(ctx, func() string { return "kube upsert " + key.String() })
	if err != nil {
		return state.WriteResult{}, err
	}
	defer release()
	name := LeaseName(key)
	useCache := true
	for attempt := 0; attempt <= s.opts.ConflictRetries; attempt++ {
		if attempt > 0 {
			if err := backoff.Sleep(ctx, conflictBackoff.Delay(attempt, rand.Float64())); err != nil {
				return state.WriteResult{}, mapError("kube upsert "+key.String(), err)
			}
		}
		// The first attempt decides on the Lease as this store last wrote
		// it, when it has it: the write's precondition fails if anyone has
		// changed it since, so an accepted decision on the cached Lease is
		// the decision on the stored one. Otherwise, and after a conflict,
		// read it.
		var cur *coordv1.Lease
		cached := false
		if useCache && attempt == 0 {
			cur, cached = s.cache.get(name)
		}
		if !cached {
			var err error
			if cur, err = s.get(ctx, name); err != nil {
				return state.WriteResult{}, mapError("kube upsert "+key.String()+": get lease "+name, err)
			}
		}
		now := s.now()
		var stored *cluster.Record
		if cur != nil && !s.expired(cur) {
			stored, _, err = decodeLease(cur, key)
			switch {
			case err == nil:
				stored = s.observed(cur, stored)
			case errors.Is(err, errNotTalon):
				// A record that cannot be read holds no sequence to order
				// against: overwrite it (the write still has its
				// resourceVersion precondition).
				s.log.WarnContext(ctx, "overwriting unreadable lease", "lease", name, "err", err)
				stored = nil
			default:
				// Another schema version (its sequence cannot be read, so
				// the rule cannot be applied) or a name collision.
				return state.WriteResult{}, fmt.Errorf("kube upsert %s: %w", key, err)
			}
		}
		d := cluster.Order(stored, rec, o.Update)
		if !d.Accepted() && cached {
			// Rejecting needs the stored Lease: another incarnation, an
			// expiry or a removal since the cached write would accept.
			s.cache.drop(name)
			useCache = false
			attempt--
			continue
		}
		if !d.Accepted() {
			var rv string
			if cur != nil {
				rv = cur.ResourceVersion
			}
			return state.WriteResult{Outcome: state.OutcomeOf(d), Decision: d, Revision: state.NewRevision(rv), Record: stored}, nil
		}
		// A Lease that expired but was not yet collected still holds the
		// slot's last generation and superseded incarnations: the new
		// registration continues from it.
		prev := stored
		if prev == nil && cur != nil {
			prev, _, _ = decodeLease(cur, key)
		}
		next := cluster.Next(prev, rec, d, 0)
		next.UpdatedAtUnixMs = now.UnixMilli()
		enc, err := state.EncodeRecord(next)
		if err != nil {
			// The stamped time can push a record at the size limit over it.
			return state.WriteResult{}, fmt.Errorf("kube upsert %s: %w", key, err)
		}
		lease := buildLease(cur, name, s.opts.Namespace, next, enc, secs, now, d)
		var written *coordv1.Lease
		rctx, cancel := s.reqCtx(ctx)
		if cur == nil {
			written, err = s.leases.Create(rctx, lease, metav1.CreateOptions{})
		} else {
			written, err = s.leases.Update(rctx, lease, metav1.UpdateOptions{})
		}
		cancel()
		switch {
		case err == nil:
			s.cache.put(name, written)
			// This store saw its own write land: from now on the record
			// ages here, whatever renewTime says.
			next.UpdatedAtUnixMs = s.obs.See(name, written.ResourceVersion, 0).UnixMilli()
			return state.WriteResult{Outcome: state.OutcomeAccepted, Decision: d, Revision: state.NewRevision(written.ResourceVersion), Record: next}, nil
		case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err), cur != nil && apierrors.IsNotFound(err):
			s.cache.drop(name)
			// Another writer won the race (or deleted the Lease): re-read
			// and apply the rule to what it wrote.
			continue
		default:
			return state.WriteResult{}, mapError("kube upsert "+key.String()+": write lease "+name, err)
		}
	}
	return state.WriteResult{}, fmt.Errorf("kube upsert %s: %w: lost %d races in a row", key, state.ErrConflict, s.opts.ConflictRetries+1)
}

// conflictBackoff spaces conflict retries: a short jittered wait that
// doubles from 1 ms and is capped at 100 ms.
var conflictBackoff = backoff.Policy{Initial: time.Millisecond, Max: 100 * time.Millisecond, Jitter: 1}

// buildLease returns the Lease to write for record next: cur's object (its
// resourceVersion is the write's precondition; labels and annotations of
// other owners are kept) or a new one, with Talon's labels, annotations and
// lease spec. A new incarnation (or a Lease re-acquired after expiry)
// starts a new acquireTime; a holder change counts a transition.
func buildLease(cur *coordv1.Lease, name, namespace string, next *cluster.Record, enc []byte, secs int32, now time.Time, d cluster.Decision) *coordv1.Lease {
	var l *coordv1.Lease
	if cur != nil {
		l = cur.DeepCopy()
	} else {
		l = &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
	}
	key := next.Key()
	if l.Labels == nil {
		l.Labels = make(map[string]string, 4)
	}
	for k, v := range leaseLabels(key) {
		l.Labels[k] = v
	}
	if l.Annotations == nil {
		l.Annotations = make(map[string]string, 4)
	}
	l.Annotations[AnnotationCluster] = key.ClusterID
	l.Annotations[AnnotationRole] = string(key.Role)
	l.Annotations[AnnotationNode] = key.NodeID
	l.Annotations[AnnotationStatus] = string(enc)

	holder := next.IncarnationID
	prev := ""
	if l.Spec.HolderIdentity != nil {
		prev = *l.Spec.HolderIdentity
	}
	renew := metav1.NewMicroTime(now)
	if cur == nil || prev != holder || d == cluster.DecisionInsert || l.Spec.AcquireTime == nil {
		l.Spec.AcquireTime = &renew
	}
	if cur != nil && prev != holder {
		n := int32(1)
		if l.Spec.LeaseTransitions != nil {
			n = *l.Spec.LeaseTransitions + 1
		}
		l.Spec.LeaseTransitions = &n
	}
	if l.Spec.LeaseTransitions == nil {
		zero := int32(0)
		l.Spec.LeaseTransitions = &zero
	}
	l.Spec.HolderIdentity = &holder
	l.Spec.LeaseDurationSeconds = &secs
	l.Spec.RenewTime = &renew
	return l
}

// listSlot reads slot k's Lease with a consistent LIST (which, unlike a
// GET, returns a resourceVersion even when the Lease is missing).
func (s *Store) listSlot(ctx context.Context, k cluster.Key) (*coordv1.Lease, string, error) {
	rctx, cancel := s.reqCtx(ctx)
	defer cancel()
	list, err := s.leases.List(rctx, metav1.ListOptions{
		LabelSelector: slotSelector(k),
		FieldSelector: fields.OneTermEqualSelector("metadata.name", LeaseName(k)).String(),
	})
	if err != nil {
		return nil, "", err
	}
	if len(list.Items) == 0 {
		return nil, list.ResourceVersion, nil
	}
	return &list.Items[0], list.ResourceVersion, nil
}

// RemoveNode deletes slot key's Lease when its holder is incarnationID,
// with the read's resourceVersion as precondition, so it never deletes a
// Lease a restarted process renewed in between. An expired Lease holds no
// record: the outcome is OutcomeNotFound (and the Lease is deleted as
// garbage). The revision of an accepted removal is the resourceVersion of
// the deletion itself, the one watchers see on the EventDelete (see
// deleteObserved).
func (s *Store) RemoveNode(ctx context.Context, key cluster.Key, incarnationID string) (state.WriteResult, error) {
	if err := s.checkOpen(); err != nil {
		return state.WriteResult{}, err
	}
	if err := state.ValidateKey(key); err != nil {
		return state.WriteResult{}, err
	}
	op := "kube remove " + key.String()
	release, err := s.writes.admit(ctx, func() string { return op })
	if err != nil {
		return state.WriteResult{}, err
	}
	defer release()
	for attempt := 0; attempt <= s.opts.ConflictRetries; attempt++ {
		if attempt > 0 {
			if err := backoff.Sleep(ctx, conflictBackoff.Delay(attempt, rand.Float64())); err != nil {
				return state.WriteResult{}, mapError(op, err)
			}
		}
		cur, rv, err := s.listSlot(ctx, key)
		if err != nil {
			return state.WriteResult{}, mapError(op, err)
		}
		if cur == nil {
			return state.WriteResult{Outcome: state.OutcomeNotFound, Revision: state.NewRevision(rv)}, nil
		}
		if s.expired(cur) {
			s.deleteExpired(ctx, gcItem{name: cur.Name, resourceVersion: cur.ResourceVersion})
			return state.WriteResult{Outcome: state.OutcomeNotFound, Revision: state.NewRevision(rv)}, nil
		}
		stored, _, err := decodeLease(cur, key)
		switch {
		case err == nil, errors.Is(err, errNotTalon), errors.Is(err, state.ErrUnsupportedVersion):
			// The holder identity decides; the record is returned when readable.
		default:
			return state.WriteResult{}, fmt.Errorf("%s: %w", op, err)
		}
		if stored != nil {
			stored = s.observed(cur, stored)
		}
		holder := ""
		if cur.Spec.HolderIdentity != nil {
			holder = *cur.Spec.HolderIdentity
		}
		if holder != incarnationID || (stored != nil && stored.IncarnationID != incarnationID) {
			return state.WriteResult{Outcome: state.OutcomeStale, Revision: state.NewRevision(rv), Record: stored}, nil
		}
		rev, err := s.deleteObserved(ctx, key, cur)
		if err == nil || apierrors.IsNotFound(err) {
			s.cache.drop(cur.Name)
		}
		switch {
		case err == nil:
			return state.WriteResult{Outcome: state.OutcomeAccepted, Revision: state.NewRevision(rev)}, nil
		case apierrors.IsConflict(err), apierrors.IsNotFound(err):
			continue
		default:
			return state.WriteResult{}, mapError(op, err)
		}
	}
	return state.WriteResult{}, fmt.Errorf("%s: %w: lost %d races in a row", op, state.ErrConflict, s.opts.ConflictRetries+1)
}

// deleteObserved deletes l with its resourceVersion as precondition and
// returns the resourceVersion of the deletion. A DELETE response carries no
// resourceVersion for Leases, so a watch on the one Lease, opened from the
// resourceVersion the delete is conditioned on, reports it: after a
// successful conditional delete the next event of that Lease is its
// DELETED event. Should the event not arrive within RequestTimeout, the
// resourceVersion of a consistent read after the delete stands in (not
// earlier than the deletion, though possibly later).
func (s *Store) deleteObserved(ctx context.Context, key cluster.Key, l *coordv1.Lease) (string, error) {
	rv := l.ResourceVersion
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	timer := time.AfterFunc(s.opts.RequestTimeout, wcancel)
	w, err := s.leases.Watch(wctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", l.Name).String(),
		ResourceVersion: rv,
	})
	if !timer.Stop() && err == nil {
		w.Stop()
		err = fmt.Errorf("%w: establishing the watch took longer than %s", state.ErrTimeout, s.opts.RequestTimeout)
	}
	if err != nil {
		return "", err
	}
	defer w.Stop()

	rctx, cancel := s.reqCtx(ctx)
	err = s.leases.Delete(rctx, l.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
	cancel()
	if err != nil {
		return "", err
	}
	wait := time.NewTimer(s.opts.RequestTimeout)
	defer wait.Stop()
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return s.revisionAfterDelete(ctx, key, l.Name)
			}
			if d, isLease := ev.Object.(*coordv1.Lease); ev.Type == watch.Deleted && isLease && d.Name == l.Name {
				return d.ResourceVersion, nil
			}
			if ev.Type == watch.Error {
				return s.revisionAfterDelete(ctx, key, l.Name)
			}
		case <-wait.C:
			return s.revisionAfterDelete(ctx, key, l.Name)
		case <-ctx.Done():
			return s.revisionAfterDelete(ctx, key, l.Name)
		}
	}
}

// revisionAfterDelete is deleteObserved's fallback: the resourceVersion of
// a consistent LIST after the delete. The delete has happened; an error
// here means only that its revision is unknown.
func (s *Store) revisionAfterDelete(ctx context.Context, key cluster.Key, name string) (string, error) {
	_, rv, err := s.listSlot(ctx, key)
	if err != nil {
		return "", fmt.Errorf("lease %s deleted, reading the revision after it: %w", name, err)
	}
	return rv, nil
}
