package kube

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/talonhq/talon/internal/cluster"
)

// Label and annotation keys on every Talon Lease.
const (
	// LabelManagedBy marks the Leases Talon owns; its value is ManagedByValue.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue is the value of LabelManagedBy on Talon's Leases.
	ManagedByValue = "talon"
	// LabelCluster, LabelRole and LabelNode select a Lease by slot. Their
	// values are LabelValue of the cluster ID, role and node ID: a selector,
	// not an identity (see LabelValue).
	LabelCluster = "talon.io/cluster"
	LabelRole    = "talon.io/role"
	LabelNode    = "talon.io/node"
	// AnnotationCluster, AnnotationRole and AnnotationNode hold the exact
	// cluster ID, role and node ID of the slot, whatever the labels hold.
	AnnotationCluster = "talon.io/cluster"
	AnnotationRole    = "talon.io/role"
	AnnotationNode    = "talon.io/node"
	// AnnotationStatus holds the record in its versioned encoding
	// (cluster.Encode).
	AnnotationStatus = "talon.io/status"
)

const (
	// maxLabelValue is the Kubernetes limit on a label value.
	maxLabelValue = 63
	// nameHashHex is the number of hex digits of SHA-256 that end a Lease
	// name and a shortened label value: 64 bits.
	nameHashHex = 16
	// namePartMax bounds each readable part of a Lease name, so the longest
	// name (6+63+1+11+1+63+1+16 = 162 bytes) stays within the 253 byte limit
	// of a DNS-1123 subdomain with room to spare.
	namePartMax = 63
)

// keyHash returns the first n hex digits of SHA-256 over the slot key's
// fields, each terminated by a NUL byte (no ID contains one), so distinct
// keys hash distinct inputs.
func keyHash(k cluster.Key, n int) string {
	h := sha256.New()
	for _, s := range []string{k.ClusterID, string(k.Role), k.NodeID} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:n]
}

// LeaseName returns the name of the Lease that holds slot k:
//
//	talon-<cluster>-<role>-<node>-<hash>
//
// where <cluster> and <node> are the IDs lowercased with '_' and '.'
// replaced by '-' and cut to 63 bytes, and <hash> is 16 hex digits of
// SHA-256 over the exact key. The readable parts are for operators running
// kubectl; the hash makes the mapping injective (up to a 64-bit hash
// collision, which the store detects because the annotations carry the
// exact key). The hash is always present: IDs may contain every character a
// DNS-1123 name allows, so no separator could keep the readable form alone
// unambiguous ("a-worker-b" + coordinator + "c" and "a" + worker +
// "b-coordinator-c" would otherwise collide). The result is a valid DNS-1123
// subdomain name for every valid key: only [a-z0-9-], starting with a
// letter, ending with a hex digit, at most 162 bytes.
func LeaseName(k cluster.Key) string {
	var b strings.Builder
	b.Grow(6 + 2*namePartMax + len(k.Role) + 3 + nameHashHex)
	b.WriteString("talon-")
	writeNamePart(&b, k.ClusterID)
	b.WriteByte('-')
	writeNamePart(&b, string(k.Role))
	b.WriteByte('-')
	writeNamePart(&b, k.NodeID)
	b.WriteByte('-')
	b.WriteString(keyHash(k, nameHashHex))
	return b.String()
}

// writeNamePart writes s lowercased, with every byte outside [a-z0-9]
// replaced by '-', cut to namePartMax bytes.
func writeNamePart(b *strings.Builder, s string) {
	if len(s) > namePartMax {
		s = s[:namePartMax]
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			b.WriteByte(c)
		case c >= 'A' && c <= 'Z':
			b.WriteByte(c + ('a' - 'A'))
		default:
			b.WriteByte('-')
		}
	}
}

// LabelValue returns the label value that selects id (a cluster or node ID).
// An ID that already is a valid label value (at most 63 bytes of
// [A-Za-z0-9._-], starting and ending with a letter or digit) is used as is.
// Any other ID becomes its first 46 bytes (with trailing '.', '_' and '-'
// trimmed), '-', and 16 hex digits of SHA-256 over the whole ID: still
// readable, always valid, and distinct for distinct long IDs up to a hash
// collision. A shortened value may equal another, literal ID, so a label
// value is a selector, never an identity: the store reads the exact IDs from
// the annotations and the record, and drops what does not match.
func LabelValue(id string) string {
	if validLabelValue(id) {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	prefix := id
	if max := maxLabelValue - 1 - nameHashHex; len(prefix) > max {
		prefix = prefix[:max]
	}
	var b strings.Builder
	for i := 0; i < len(prefix); i++ {
		if c := prefix[i]; isLabelByte(c) {
			b.WriteByte(c)
		}
	}
	p := strings.TrimRight(b.String(), "._-")
	p = strings.TrimLeft(p, "._-")
	if p != "" {
		p += "-"
	}
	return p + hex.EncodeToString(sum[:])[:nameHashHex]
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func isLabelByte(c byte) bool { return isAlnum(c) || c == '.' || c == '_' || c == '-' }

// validLabelValue reports whether s is a non-empty valid Kubernetes label
// value.
func validLabelValue(s string) bool {
	if s == "" || len(s) > maxLabelValue || !isAlnum(s[0]) || !isAlnum(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isLabelByte(s[i]) {
			return false
		}
	}
	return true
}

// clusterSelector selects every Talon Lease of one cluster (and, when label
// values of distinct clusters coincide, of those too: callers filter by the
// exact cluster ID).
func clusterSelector(clusterID string) string {
	return LabelManagedBy + "=" + ManagedByValue + "," + LabelCluster + "=" + LabelValue(clusterID)
}

// slotSelector selects the Lease of one slot.
func slotSelector(k cluster.Key) string {
	return clusterSelector(k.ClusterID) + "," + LabelRole + "=" + string(k.Role) + "," + LabelNode + "=" + LabelValue(k.NodeID)
}

// managedSelector selects every Talon Lease in the namespace.
const managedSelector = LabelManagedBy + "=" + ManagedByValue

// leaseLabels returns the labels of slot k's Lease.
func leaseLabels(k cluster.Key) map[string]string {
	return map[string]string{
		LabelManagedBy: ManagedByValue,
		LabelCluster:   LabelValue(k.ClusterID),
		LabelRole:      string(k.Role),
		LabelNode:      LabelValue(k.NodeID),
	}
}

// keyFromAnnotations returns the exact slot key a Lease's annotations name,
// and whether they name a valid one.
func keyFromAnnotations(ann map[string]string) (cluster.Key, bool) {
	k := cluster.Key{
		ClusterID: ann[AnnotationCluster],
		Role:      cluster.Role(ann[AnnotationRole]),
		NodeID:    ann[AnnotationNode],
	}
	if cluster.ValidateID("clusterId", k.ClusterID) != nil || cluster.ValidateID("nodeId", k.NodeID) != nil || !k.Role.Valid() {
		return cluster.Key{}, false
	}
	return k, true
}
