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

// UpsertNode applies rec to its Lease under the ordering rule, through
// state.Write over the store's slots (kubeSlots): it decides with
// cluster.Order against the record in the Lease's annotation and writes
// with that Lease's resourceVersion as precondition, so a concurrent writer
// makes the write fail instead of being overwritten; it then reads again
// and re-decides, at most ConflictRetries+1 writes before returning
// ErrConflict. The first decision is made on the Lease as this store last
// wrote it, if it did (one request per heartbeat when a worker keeps
// talking to the same coordinator); a rejection is only ever made on a
// fresh read. Duplicate and stale updates write nothing. With
// state.StatusEvery, a heartbeat that changes nothing within a status
// interval only renews the Lease (a small merge patch, see renew.go) and
// answers Renewed.
func (s *Store) UpsertNode(ctx context.Context, rec *cluster.Record, leaseTTL time.Duration, opts ...state.UpsertOption) (state.WriteResult, error) {
	o := state.NewUpsertOptions(opts)
	if err := s.checkOpen(); err != nil {
		return state.WriteResult{}, err
	}
	if rec == nil {
		return state.WriteResult{}, fmt.Errorf("kube upsert: %w: record is nil", state.ErrInvalidRecord)
	}
	if err := state.ValidateKey(rec.Key()); err != nil {
		return state.WriteResult{}, fmt.Errorf("kube upsert: %w", err)
	}
	if _, err := leaseTTLSeconds(leaseTTL); err != nil {
		return state.WriteResult{}, err
	}
	key := rec.Key()
	return s.write(ctx, func() string { return "kube upsert " + key.String() }, key, false,
		renewWithin(state.Upsert(rec, o.Update, leaseTTL, o.StatusEvery, s.now), o.StatusEvery))
}

// ProposeTransition applies tr to slot key's Lease while it holds
// incarnationID at seq, with the read's resourceVersion as precondition:
// a late mark is a write (a merge patch) that keeps the Lease's renewTime and duration,
// an expiry a conditional DELETE. Renewals raise the record's sequence
// (renew.go), so a proposal for a version a renewal has moved past is
// stale by its sequence, and state.MinSilence, which asks a backend to
// check renewals its versions do not show, has nothing to add: this
// backend's versions show every renewal.
func (s *Store) ProposeTransition(ctx context.Context, key cluster.Key, incarnationID string, seq uint64, tr state.Transition, opts ...state.ProposeOption) (state.WriteResult, error) {
	o := state.NewProposeOptions(opts)
	if err := s.checkOpen(); err != nil {
		return state.WriteResult{}, err
	}
	if err := state.ValidateTransition(key, incarnationID, tr); err != nil {
		return state.WriteResult{}, err
	}
	res, err := s.write(ctx, func() string { return "kube propose " + tr.String() + " " + key.String() }, key, true,
		state.Propose(incarnationID, seq, tr, o.MinSilence))
	s.transitions.note(tr, res, err)
	return res, err
}

// write admits one write and runs state.Write over the store's slots. list
// makes fresh reads consistent LISTs, whose resourceVersion names the
// revision of an absence too.
func (s *Store) write(ctx context.Context, op func() string, key cluster.Key, list bool, decide state.Decide) (state.WriteResult, error) {
	// The operation's name is built only for an error: not per heartbeat.
	release, err := s.writes.admit(ctx, op)
	if err != nil {
		return state.WriteResult{}, err
	}
	defer release()
	slots := &kubeSlots{s: s, list: list}
	res, err := state.Write(ctx, slots, key, s.opts.ConflictRetries+1, decide)
	if err != nil {
		return state.WriteResult{}, mapError(op(), err)
	}
	return res, nil
}

// kubeSlots is the store's state.Slots for one write: a slot is read from
// the write cache (the Lease as this store last wrote it) or the API
// server, and swapped with the read's resourceVersion as precondition.
type kubeSlots struct {
	s         *Store
	list      bool // fresh reads LIST rather than GET
	conflicts int  // lost preconditions so far, for the backoff
}

func (k *kubeSlots) Read(ctx context.Context, key cluster.Key, fresh bool) (state.Slot, error) {
	s := k.s
	name := LeaseName(key)
	if !fresh {
		if e, ok := s.cache.get(name); ok {
			// The write's precondition fails if anyone has changed the
			// Lease since, so a decision on it is the decision on the
			// stored one: no decode, the record is the one written.
			return state.Slot{Record: s.observed(e.lease, e.rec.Clone()), Version: e.lease.ResourceVersion,
				Token: &slotToken{lease: e.lease, statusSeq: e.statusSeq}, Revision: state.NewRevision(e.lease.ResourceVersion)}, nil
		}
	}
	var cur *coordv1.Lease
	var rv string
	var err error
	if k.list {
		cur, rv, err = s.listSlot(ctx, key)
	} else if cur, err = s.get(ctx, name); cur != nil {
		rv = cur.ResourceVersion
	}
	if err != nil {
		return state.Slot{}, fmt.Errorf("read lease %s: %w", name, err)
	}
	slot := state.Slot{Revision: state.NewRevision(rv), Fresh: true}
	if cur == nil {
		return slot, nil
	}
	tok := &slotToken{lease: cur}
	slot.Version, slot.Token = cur.ResourceVersion, tok
	rec, _, statusSeq, err := s.decodeSeq(cur, key)
	switch {
	case err == nil:
		slot.Record, tok.statusSeq = s.observed(cur, rec), statusSeq
	case errors.Is(err, errNotTalon), errors.Is(err, state.ErrUnsupportedVersion):
		// A record that cannot be read holds no sequence to order against
		// (a registration overwrites it, still with the precondition); the
		// holder identity names its incarnation for a removal.
		slot.Bad = err
		if cur.Spec.HolderIdentity != nil {
			slot.Holder = *cur.Spec.HolderIdentity
		}
		if errors.Is(err, errNotTalon) {
			s.log.WarnContext(ctx, "lease holds no readable record", "lease", name, "err", err)
		}
	default:
		// A name collision: never written or deleted.
		return state.Slot{}, err
	}
	return slot, nil
}

func (k *kubeSlots) Swap(ctx context.Context, key cluster.Key, cur state.Slot, ch state.Change) (state.Swapped, error) {
	s := k.s
	name := LeaseName(key)
	l := leaseOf(cur)
	if ch.Record == nil {
		if l == nil {
			return state.Swapped{}, nil // nothing to delete: read again
		}
		rev, err := s.deleteObserved(ctx, key, l)
		if err == nil || apierrors.IsNotFound(err) {
			s.cache.drop(name)
		}
		switch {
		case err == nil:
			return state.Swapped{Applied: true, Revision: state.NewRevision(rev)}, nil
		case apierrors.IsConflict(err), apierrors.IsNotFound(err):
			return state.Swapped{}, k.lost(ctx)
		}
		return state.Swapped{}, fmt.Errorf("delete lease %s: %w", name, err)
	}
	if ch.Renew && l != nil && cur.Record != nil {
		return k.renew(ctx, key, cur, ch)
	}
	lease, err := buildLease(l, name, s.opts.Namespace, ch, renewTimeOf(ch, s.now))
	if err != nil {
		return state.Swapped{}, err
	}
	var written *coordv1.Lease
	rctx, cancel := s.reqCtx(ctx)
	if l == nil {
		written, err = s.leases.Create(rctx, lease, metav1.CreateOptions{})
	} else {
		written, err = s.patchLease(rctx, l, lease)
	}
	cancel()
	switch {
	case err == nil:
		s.cache.put(name, cacheEntry{lease: written, rec: ch.Record, statusSeq: ch.Record.HeartbeatSeq})
		// This store saw its own write land: from now on the record
		// ages here, whatever renewTime says.
		next := ch.Record.Clone()
		next.UpdatedAtUnixMs = s.obs.See(name, written.ResourceVersion, 0).UnixMilli()
		return state.Swapped{Applied: true, Revision: state.NewRevision(written.ResourceVersion), Record: next}, nil
	case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err), l != nil && apierrors.IsNotFound(err):
		// Another writer won the race (or deleted the Lease): read again
		// and apply the rule to what it wrote.
		s.cache.drop(name)
		return state.Swapped{}, k.lost(ctx)
	}
	return state.Swapped{}, fmt.Errorf("write lease %s: %w", name, err)
}

// lost waits before the next round after a lost precondition.
func (k *kubeSlots) lost(ctx context.Context) error {
	k.conflicts++
	return backoff.Sleep(ctx, conflictBackoff.Delay(k.conflicts, rand.Float64()))
}

// conflictBackoff spaces conflict retries: a short jittered wait that
// doubles from 1 ms and is capped at 100 ms.
var conflictBackoff = backoff.Policy{Initial: time.Millisecond, Max: 100 * time.Millisecond, Jitter: 1}

// buildLease returns the Lease to write for change ch: cur's object (its
// resourceVersion is the write's precondition; labels and annotations of
// other owners are kept) or a new one, with Talon's labels, annotations and
// lease spec. A new incarnation (or a Lease re-acquired) starts a new
// acquireTime; a holder change counts a transition. A change that keeps the
// lease (a late mark) leaves the spec alone: the renewTime stays the
// holder's last one.
// renewTimeOf is the renewTime of ch's Lease: the record's own accept
// stamp, so that renewTime and the record's UpdatedAtUnixMs are one clock
// reading (two readings can straddle a millisecond); the clock when the
// change carries no stamp.
func renewTimeOf(ch state.Change, now func() time.Time) time.Time {
	if ch.Record != nil && ch.Record.UpdatedAtUnixMs > 0 {
		return time.UnixMilli(ch.Record.UpdatedAtUnixMs)
	}
	return now()
}

func buildLease(cur *coordv1.Lease, name, namespace string, ch state.Change, now time.Time) (*coordv1.Lease, error) {
	var l *coordv1.Lease
	if cur != nil {
		l = cur.DeepCopy()
	} else {
		l = &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
	}
	next := ch.Record
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
	l.Annotations[AnnotationStatus] = string(ch.Encoded)
	// The status is now at the record's sequence, which is at least the
	// last renewal's (renew.go).
	delete(l.Annotations, AnnotationRenewSeq)
	if ch.KeepLease && cur != nil {
		return l, nil
	}
	secs, err := leaseTTLSeconds(ch.TTL)
	if err != nil {
		return nil, err
	}
	holder := next.IncarnationID
	prev := ""
	if l.Spec.HolderIdentity != nil {
		prev = *l.Spec.HolderIdentity
	}
	renew := metav1.NewMicroTime(now)
	if cur == nil || prev != holder || ch.Decision == cluster.DecisionInsert || l.Spec.AcquireTime == nil {
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
	return l, nil
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
// Lease a restarted process renewed in between. The revision of an
// accepted removal is the resourceVersion of the deletion itself, the one
// watchers see on the EventDelete (see deleteObserved).
func (s *Store) RemoveNode(ctx context.Context, key cluster.Key, incarnationID string) (state.WriteResult, error) {
	if err := s.checkOpen(); err != nil {
		return state.WriteResult{}, err
	}
	if err := state.ValidateKey(key); err != nil {
		return state.WriteResult{}, err
	}
	if incarnationID == "" {
		return state.WriteResult{}, fmt.Errorf("kube remove %s: %w: incarnationId \"\": must not be empty", key, state.ErrInvalidRecord)
	}
	return s.write(ctx, func() string { return "kube remove " + key.String() }, key, true, state.Remove(incarnationID))
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
