package etcd

import (
	"strings"

	"github.com/talonhq/talon/internal/cluster"
)

// keys builds and parses the key layout
// <prefix>/clusters/<cluster-id>/nodes/<role>/<node-id>.
type keys struct {
	prefix string // validated: starts with "/", no trailing "/"
}

// all is the prefix of every record of every cluster.
func (k keys) all() string { return k.prefix + "/clusters/" }

// cluster is the prefix of every record of one cluster. The trailing
// "/nodes/" keeps cluster "a" from matching cluster "ab".
func (k keys) cluster(clusterID string) string {
	return k.prefix + "/clusters/" + clusterID + "/nodes/"
}

// slot is the key of one record.
func (k keys) slot(key cluster.Key) string {
	return k.prefix + "/clusters/" + key.ClusterID + "/nodes/" + string(key.Role) + "/" + key.NodeID
}

// revisionProbe is a key that never holds a record (it has no role or
// node), under the prefix so that a role granted the prefix may read it. A
// count-only read of it is the cheapest linearizable request that returns
// the current revision.
func (k keys) revisionProbe() string { return k.prefix + "/clusters/" }

// parse returns the slot a key names, or false for a key that is not a
// well-formed record key under the prefix.
func (k keys) parse(key string) (cluster.Key, bool) {
	rest, ok := strings.CutPrefix(key, k.all())
	if !ok {
		return cluster.Key{}, false
	}
	clusterID, rest, ok := strings.Cut(rest, "/nodes/")
	if !ok || cluster.ValidateID("clusterId", clusterID) != nil {
		return cluster.Key{}, false
	}
	role, nodeID, ok := strings.Cut(rest, "/")
	if !ok || !cluster.Role(role).Valid() || cluster.ValidateID("nodeId", nodeID) != nil {
		return cluster.Key{}, false
	}
	return cluster.Key{ClusterID: clusterID, Role: cluster.Role(role), NodeID: nodeID}, true
}
