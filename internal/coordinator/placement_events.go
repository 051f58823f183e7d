package coordinator

import (
	"slices"
	"strconv"

	"github.com/zeebo/xxh3"

	"github.com/talonhq/talon/internal/cluster"
)

// placementCause digests the record versions that moved workers in or out
// of placement between prev and v: per worker, in node ID order, its node
// ID, incarnation and generation, and the stamp of what changed (a
// cordon's time for a cordon or its lifting, the heartbeat sequence for
// anything else the worker reported).
func placementCause(prev, v *View) uint64 {
	before := eligibleIDs(prev)
	after := eligibleIDs(v)
	var flipped []string
	for id := range before {
		if !after[id] {
			flipped = append(flipped, id)
		}
	}
	for id := range after {
		if !before[id] {
			flipped = append(flipped, id)
		}
	}
	slices.Sort(flipped)
	var b []byte
	for _, id := range flipped {
		key := cluster.Key{ClusterID: v.Snapshot.ClusterID, Role: cluster.RoleWorker, NodeID: id}
		was, now := prev.record(key), v.record(key)
		r := now
		if r == nil {
			r = was
		}
		if r == nil {
			continue
		}
		b = strconv.AppendQuote(b, id)
		b = strconv.AppendQuote(b, r.IncarnationID)
		b = strconv.AppendUint(b, r.Generation, 10)
		b = append(b, ':')
		b = strconv.AppendInt(b, changeStamp(was, now), 10)
		b = append(b, ';')
	}
	return xxh3.Hash(b)
}

// eligibleIDs is the set of node IDs v places on.
func eligibleIDs(v *View) map[string]bool {
	nodes := v.Table.Nodes()
	out := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		out[n.ID] = true
	}
	return out
}

// changeStamp tells one change of a worker's eligibility from the next:
// the cordon's time when a cordon was set or lifted (an operator's mark
// moves no sequence), the heartbeat sequence of the record otherwise.
func changeStamp(was, now *cluster.Record) int64 {
	switch {
	case was != nil && now != nil && was.Cordoned() != now.Cordoned():
		return max(was.CordonedAtUnixMs, now.CordonedAtUnixMs)
	case now != nil:
		return int64(now.HeartbeatSeq)
	}
	return int64(was.HeartbeatSeq)
}
