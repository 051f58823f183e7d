package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
)

// Fences. A store's fence is one small Lease in its namespace, labelled
// like Talon's (so the snapshot cache's watch sees it) but with the role
// label FenceRole, which no record has, and no slot annotations: no
// snapshot, watch or write ever takes it for a record. Writing it moves
// the namespace's Talon Leases to a new resourceVersion the cache's watch
// is sure to deliver, which tells the cache it has seen everything before.
const (
	// FenceRole is the talon.io/role label value of fences.
	FenceRole = "fence"
	// AnnotationFence holds a value that changes on every fence write (an
	// unchanged object gets no new resourceVersion).
	AnnotationFence = "talon.io/fence"
	// fencePrefix starts every fence name. A name with a '.' is never a
	// LeaseName (those are [a-z0-9-] only), so a fence never overwrites a
	// record whatever the hashes.
	fencePrefix = "talon-fence."
	// fencePartMax bounds the readable part of a fence name, so that the
	// part after the '.' stays a DNS label of at most 63 bytes.
	fencePartMax = maxLabelValue - nameHashHex - 1
)

// FenceName returns the name of the fence Lease of a store with identity
// id: "talon-fence.<hash>-<id>", <hash> 16 hex digits of SHA-256 over id
// and <id> its first 46 bytes made readable as in LeaseName: a valid
// DNS-1123 subdomain.
func FenceName(id string) string {
	sum := sha256.Sum256([]byte("fence\x00" + id))
	var b strings.Builder
	b.WriteString(fencePrefix)
	b.WriteString(hex.EncodeToString(sum[:])[:nameHashHex])
	var part strings.Builder
	if len(id) > fencePartMax {
		id = id[:fencePartMax]
	}
	writeNamePart(&part, id)
	if p := strings.Trim(part.String(), "-"); p != "" {
		b.WriteByte('-')
		b.WriteString(p)
	}
	return b.String()
}

// isFence reports whether l is a fence, not a record.
func isFence(l *coordv1.Lease) bool {
	return l.Labels[LabelRole] == FenceRole || strings.HasPrefix(l.Name, fencePrefix)
}

// fenceLabels are the labels of every fence.
func fenceLabels() map[string]string {
	return map[string]string{LabelManagedBy: ManagedByValue, LabelRole: FenceRole}
}

// probeRevision returns the API server's current resourceVersion from a
// consistent LIST (no resourceVersion: a quorum read) of the store's fence
// by name: at most one small object, which the API server reads as one key
// from etcd or answers from its watch cache once that has caught up with
// etcd's current revision.
func (s *Store) probeRevision(ctx context.Context) (uint64, error) {
	s.stats.probes.Add(1)
	list, err := s.cacheLeases.List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", s.fenceName).String(),
	})
	if err != nil {
		return 0, err
	}
	return parseRevision(list.ResourceVersion)
}

// writeFence updates the store's fence unconditionally (a merge patch;
// created when missing) and returns the resourceVersion of the write.
func (c *snapCache) writeFence(ctx context.Context) (uint64, error) {
	s := c.s
	s.stats.fences.Add(1)
	stamp := metav1.NowMicro()
	value := s.nonce + "-" + strconv.FormatUint(c.fenceSeq.Add(1), 10)
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{
			"labels":      fenceLabels(),
			"annotations": map[string]string{AnnotationFence: value},
		},
		"spec": map[string]any{"holderIdentity": s.opts.Identity, "renewTime": stamp},
	})
	if err != nil {
		return 0, err
	}
	var written *coordv1.Lease
	for attempt := 0; ; attempt++ {
		written, err = s.cacheLeases.Patch(ctx, s.fenceName, types.MergePatchType, patch, metav1.PatchOptions{})
		if !apierrors.IsNotFound(err) || attempt > 0 {
			break
		}
		holder := s.opts.Identity
		written, err = s.cacheLeases.Create(ctx, &coordv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: s.fenceName, Namespace: s.opts.Namespace, Labels: fenceLabels(),
				Annotations: map[string]string{AnnotationFence: value}},
			Spec: coordv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &stamp, AcquireTime: &stamp},
		}, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			break
		}
		// Another store of the same identity created it: patch it.
	}
	if err != nil {
		return 0, fmt.Errorf("write fence %s: %w", s.fenceName, err)
	}
	c.fenced.Store(true)
	return parseRevision(written.ResourceVersion)
}

// deleteFence deletes the store's fence if it wrote one (Close).
func (s *Store) deleteFence() {
	if s.snaps == nil || !s.snaps.fenced.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.RequestTimeout)
	defer cancel()
	err := s.cacheLeases.Delete(ctx, s.fenceName, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		s.log.Warn("could not delete the snapshot fence", "lease", s.fenceName, "err", err)
	}
}
