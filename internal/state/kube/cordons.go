package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

// Persisted cordons (state.CordonLog) are small Leases named
// talon-cordon.<hash>-<node-id>, labelled talon.io/role=cordon and
// talon.io/cordon-cluster (not talon.io/cluster: the records' selector
// never matches them, so no reader of the records, an older release
// among them, sees one), with the cordon in the talon.io/cordon
// annotation. The store's RBAC already covers Leases. Uncordon deletes
// the Lease.
const (
	// CordonRole is the talon.io/role label value of persisted cordons.
	CordonRole = "cordon"
	// LabelCordonCluster names a persisted cordon's cluster.
	LabelCordonCluster = "talon.io/cordon-cluster"
	// AnnotationCordon holds a persisted cordon (state.EncodeCordon).
	AnnotationCordon = "talon.io/cordon"
	// AnnotationCordonNode holds the node ID in full (labels are cut).
	AnnotationCordonNode = "talon.io/cordon-node"
	cordonPrefix         = "talon-cordon."
)

// CordonName is the Lease name of key's persisted cordon: a '.' keeps it
// apart from every record's LeaseName.
func CordonName(key cluster.Key) string {
	sum := sha256.Sum256([]byte("cordon\x00" + key.ClusterID + "\x00" + string(key.Role) + "\x00" + key.NodeID))
	var b strings.Builder
	b.WriteString(cordonPrefix)
	b.WriteString(hex.EncodeToString(sum[:])[:nameHashHex])
	id := key.NodeID
	if len(id) > fencePartMax {
		id = id[:fencePartMax]
	}
	var part strings.Builder
	writeNamePart(&part, id)
	if p := strings.Trim(part.String(), "-"); p != "" {
		b.WriteByte('-')
		b.WriteString(p)
	}
	return b.String()
}

func cordonSelector(clusterID string) string {
	return LabelManagedBy + "=" + ManagedByValue + "," + LabelRole + "=" + CordonRole + "," + LabelCordonCluster + "=" + LabelValue(clusterID)
}

// cordonLog is the persisted cordons (state.CordonLog): Leases of role
// cordon.
type cordonLog struct {
	leases    coordclient.LeaseInterface
	namespace string
	timeout   time.Duration // Options.RequestTimeout
}

// PersistCordon implements state.CordonLog.
func (g *cordonLog) PersistCordon(ctx context.Context, key cluster.Key, c state.Cordon) error {
	if err := state.ValidateCordon(key, c); err != nil {
		return fmt.Errorf("kube persist cordon: %w", err)
	}
	val, err := state.EncodeCordon(c)
	if err != nil {
		return err
	}
	ctx, cancel := opCtx(ctx, g.timeout)
	defer cancel()
	name := CordonName(key)
	cur, err := g.leases.Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil:
		next := cur.DeepCopy()
		if next.Annotations == nil {
			next.Annotations = map[string]string{}
		}
		next.Annotations[AnnotationCordon] = string(val)
		if _, err := g.leases.Update(ctx, next, metav1.UpdateOptions{}); err != nil {
			return mapError("kube persist cordon", err)
		}
		return nil
	case !apierrors.IsNotFound(err):
		return mapError("kube persist cordon", err)
	}
	list, err := g.leases.List(ctx, metav1.ListOptions{LabelSelector: cordonSelector(key.ClusterID)})
	if err != nil {
		return mapError("kube persist cordon", err)
	}
	if len(list.Items) >= state.MaxPersistedCordons {
		return fmt.Errorf("kube persist cordon of %q: %w", key.NodeID, state.ErrTooManyCordons)
	}
	_, err = g.leases.Create(ctx, &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{
		Name: name, Namespace: g.namespace,
		Labels:      map[string]string{LabelManagedBy: ManagedByValue, LabelRole: CordonRole, LabelCordonCluster: LabelValue(key.ClusterID), LabelNode: LabelValue(key.NodeID)},
		Annotations: map[string]string{AnnotationCordon: string(val), AnnotationCordonNode: key.NodeID},
	}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return g.PersistCordon(ctx, key, c) // another coordinator created it a moment ago
	}
	if err != nil {
		return mapError("kube persist cordon", err)
	}
	return nil
}

// LiftCordon implements state.CordonLog.
func (g *cordonLog) LiftCordon(ctx context.Context, key cluster.Key) error {
	if err := state.ValidateKey(key); err != nil {
		return fmt.Errorf("kube lift cordon: %w", err)
	}
	ctx, cancel := opCtx(ctx, g.timeout)
	defer cancel()
	if err := g.leases.Delete(ctx, CordonName(key), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return mapError("kube lift cordon", err)
	}
	return nil
}

// PersistedCordon implements state.CordonLog.
func (g *cordonLog) PersistedCordon(ctx context.Context, key cluster.Key) (state.Cordon, bool, error) {
	if err := state.ValidateKey(key); err != nil {
		return state.Cordon{}, false, fmt.Errorf("kube read cordon: %w", err)
	}
	ctx, cancel := opCtx(ctx, g.timeout)
	defer cancel()
	l, err := g.leases.Get(ctx, CordonName(key), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return state.Cordon{}, false, nil
	}
	if err != nil {
		return state.Cordon{}, false, mapError("kube read cordon", err)
	}
	if l.Labels[LabelCordonCluster] != LabelValue(key.ClusterID) || l.Annotations[AnnotationCordonNode] != key.NodeID {
		return state.Cordon{}, false, nil // a hash collision or a foreign object: not this node's
	}
	c, err := state.DecodeCordon(key, []byte(l.Annotations[AnnotationCordon]))
	if err != nil {
		return state.Cordon{}, false, nil
	}
	return c, true, nil
}

var (
	_ state.CordonLog = (*Store)(nil)
	_ state.CordonLog = (*cordonLog)(nil)
)
