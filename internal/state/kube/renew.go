package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

// Renewals (issue 36). A heartbeat that changes nothing
// cluster.NeedsStatusWrite counts, within a status interval of the record
// in talon.io/status, renews the Lease with one small JSON merge patch:
// spec.renewTime and the renewal's heartbeat sequence in
// AnnotationRenewSeq, with the read's resourceVersion as precondition. The
// status annotation stays as it is.
//
// Kubernetes Leases have no expiry of their own: coordinators judge
// liveness by a record's version (incarnation, heartbeat sequence) going
// unchanged, so a renewal must show in that version. Every read of a Lease
// (decodeLeaseSeq: snapshots, the snapshot cache, Watch, the write path)
// returns the status record with HeartbeatSeq the larger of the status's
// and AnnotationRenewSeq: each renewal is a new version on every
// coordinator at the same resourceVersion, the ordering rule refuses a
// heartbeat at or below a renewal's sequence, and a late mark or expiry
// proposed for an older sequence is stale. Every full write (a status
// change, a status interval, a late mark, a registration) writes the
// record at that sequence and drops AnnotationRenewSeq.

// AnnotationRenewSeq holds the heartbeat sequence of the Lease's last
// renewal, in decimal, while it is above the sequence of the record in
// AnnotationStatus; a full write removes it.
const AnnotationRenewSeq = "talon.io/renew-seq"

// slotToken is the kube backend's state.Slot.Token: the Lease read (its
// resourceVersion is the write's precondition) and the heartbeat sequence
// of the record in its status annotation, which renewals leave as it is.
type slotToken struct {
	lease     *coordv1.Lease
	statusSeq uint64
}

// leaseOf returns the Lease of a slot read by kubeSlots, or nil.
func leaseOf(cur state.Slot) *coordv1.Lease {
	if tok, ok := cur.Token.(*slotToken); ok {
		return tok.lease
	}
	return nil
}

// withRenewal raises rec (decoded from l's status annotation) to l's last
// renewal: HeartbeatSeq becomes AnnotationRenewSeq when that is larger,
// and UpdatedAtUnixMs, the writer's stamp, the renewal's renewTime. It
// returns the sequence of the status itself. A renewal annotation that is
// not a decimal sequence makes the Lease unreadable (errNotTalon), like a
// malformed status: a registration overwrites it.
func withRenewal(l *coordv1.Lease, rec *cluster.Record) (statusSeq uint64, err error) {
	statusSeq = rec.HeartbeatSeq
	raw, ok := l.Annotations[AnnotationRenewSeq]
	if !ok {
		return statusSeq, nil
	}
	n, err := strconv.ParseUint(raw, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: lease %s: annotation %s %q: not a heartbeat sequence", errNotTalon, l.Name, AnnotationRenewSeq, raw)
	}
	if n > rec.HeartbeatSeq {
		rec.HeartbeatSeq = n
		if l.Spec.RenewTime != nil {
			rec.UpdatedAtUnixMs = l.Spec.RenewTime.UnixMilli()
			rec.HeartbeatAtUnixMs = max(rec.HeartbeatAtUnixMs, rec.UpdatedAtUnixMs)
		}
	}
	return statusSeq, nil
}

// renewWithin wraps the Decide of UpsertNode: a change state.Upsert
// marked Renew stays a renewal only while renewable; otherwise the record
// is written in full.
func renewWithin(d state.Decide, statusEvery uint64) state.Decide {
	return func(cur state.Slot) (state.Change, *state.WriteResult, error) {
		ch, final, err := d(cur)
		if err == nil && final == nil && ch.Renew && !renewable(cur, ch, statusEvery) {
			ch.Renew = false
		}
		return ch, final, err
	}
}

// renewable reports whether change ch (an Advance with Renew) may only
// renew slot cur's Lease: the status annotation is less than statusEvery
// heartbeats older than ch (state.Upsert counts from the stored record,
// whose sequence renewals raise; the interval counts from the status),
// the Lease is held by ch's incarnation, and its duration is the one
// asked for (a changed lease TTL is written in full).
func renewable(cur state.Slot, ch state.Change, statusEvery uint64) bool {
	tok, ok := cur.Token.(*slotToken)
	if !ok || tok.lease == nil || cur.Record == nil || ch.Record == nil {
		return false
	}
	seq := ch.Record.HeartbeatSeq
	if seq <= tok.statusSeq || seq-tok.statusSeq >= statusEvery {
		return false
	}
	secs, err := leaseTTLSeconds(ch.TTL)
	spec := tok.lease.Spec
	return err == nil && spec.LeaseDurationSeconds != nil && *spec.LeaseDurationSeconds == secs &&
		spec.HolderIdentity != nil && *spec.HolderIdentity == ch.Record.IncarnationID
}

// renewalPatch is the JSON merge patch of one renewal: the precondition,
// the renewal's sequence and renewTime. About 150 bytes.
func renewalPatch(resourceVersion string, seq uint64, now time.Time) ([]byte, error) {
	return json.Marshal(map[string]any{
		"metadata": map[string]any{
			"resourceVersion": resourceVersion,
			"annotations":     map[string]string{AnnotationRenewSeq: strconv.FormatUint(seq, 10)},
		},
		"spec": map[string]any{"renewTime": metav1.NewMicroTime(now)},
	})
}

// renew applies renewal ch to slot cur's Lease with one merge patch,
// conditioned on the read's resourceVersion (a patch that names a
// resourceVersion fails with Conflict when the object has moved on). The
// answer's record is the stored one at ch's sequence, as every reader now
// decodes it.
func (k *kubeSlots) renew(ctx context.Context, key cluster.Key, cur state.Slot, ch state.Change) (state.Swapped, error) {
	s := k.s
	name := LeaseName(key)
	tok := cur.Token.(*slotToken)
	patch, err := renewalPatch(tok.lease.ResourceVersion, ch.Record.HeartbeatSeq, s.now())
	if err != nil {
		return state.Swapped{}, err
	}
	rctx, cancel := s.reqCtx(ctx)
	written, err := s.leases.Patch(rctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	cancel()
	switch {
	case apierrors.IsConflict(err), apierrors.IsNotFound(err):
		s.cache.drop(name)
		return state.Swapped{}, k.lost(ctx)
	case err != nil:
		return state.Swapped{}, fmt.Errorf("renew lease %s: %w", name, err)
	}
	rec := cur.Record.Clone()
	rec.HeartbeatSeq = ch.Record.HeartbeatSeq
	if written.Spec.RenewTime != nil {
		rec.UpdatedAtUnixMs = written.Spec.RenewTime.UnixMilli()
		rec.HeartbeatAtUnixMs = max(rec.HeartbeatAtUnixMs, rec.UpdatedAtUnixMs)
	}
	s.cache.put(name, cacheEntry{lease: written, rec: rec, statusSeq: tok.statusSeq})
	s.stats.renewals.Add(1)
	next := rec.Clone()
	next.UpdatedAtUnixMs = s.obs.See(name, written.ResourceVersion, 0).UnixMilli()
	return state.Swapped{Applied: true, Renewed: true, Revision: state.NewRevision(written.ResourceVersion), Record: next}, nil
}

// patchLease writes next over cur as one JSON merge patch of what differs
// (writePatch), with cur's resourceVersion as precondition. It sends what
// changed rather than the whole object an UPDATE sends back (its
// managedFields included): a status write costs the API server the
// status annotation and a few spec fields.
func (s *Store) patchLease(ctx context.Context, cur, next *coordv1.Lease) (*coordv1.Lease, error) {
	patch, err := writePatch(cur, next)
	if err != nil {
		return nil, err
	}
	return s.leases.Patch(ctx, next.Name, types.MergePatchType, patch, metav1.PatchOptions{})
}

// writePatch is the JSON merge patch that turns cur into next (as
// buildLease makes it: labels, annotations and spec only), conditioned on
// cur's resourceVersion: changed labels and annotations (null for a
// removed one) and, when it changed, the spec.
func writePatch(cur, next *coordv1.Lease) ([]byte, error) {
	meta := map[string]any{"resourceVersion": cur.ResourceVersion}
	if d := mapDiff(cur.Labels, next.Labels); len(d) > 0 {
		meta["labels"] = d
	}
	if d := mapDiff(cur.Annotations, next.Annotations); len(d) > 0 {
		meta["annotations"] = d
	}
	patch := map[string]any{"metadata": meta}
	if !apiequality.Semantic.DeepEqual(cur.Spec, next.Spec) {
		patch["spec"] = next.Spec
	}
	return json.Marshal(patch)
}

// mapDiff is the merge patch of map a into b: b's entries that differ
// from a's, and nil (JSON null: remove) for a's keys that b lacks.
func mapDiff(a, b map[string]string) map[string]any {
	d := make(map[string]any)
	for k, v := range b {
		if old, ok := a[k]; !ok || old != v {
			d[k] = v
		}
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			d[k] = nil
		}
	}
	return d
}
