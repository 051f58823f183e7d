package tui

import (
	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/format"
)

// nodeKey identifies a node across polls.
type nodeKey struct {
	role, id string
}

func keyOf(n *apiv1.Node) nodeKey { return nodeKey{role: n.Role, id: n.NodeID} }

// rates are a worker's per-second rates between two heartbeats.
type rates struct {
	known bool // false until two samples of one incarnation exist
	// reqPerSec, bytesPerSec and evictPerSec are per second.
	reqPerSec, bytesPerSec, evictPerSec float64
	// hitRatio is hits/(hits+misses) over the interval; negative when the
	// interval had no lookups.
	hitRatio float64
}

// sample is the counter reading carried by one heartbeat.
type sample struct {
	incarnation string
	updatedMs   int64
	c           apiv1.Counters
	r           rates // rates ending at this sample
}

// rateTracker computes rates between consecutive polls. It keeps one
// sample per node and forgets nodes that leave the poll.
type rateTracker struct {
	last map[nodeKey]sample
}

// observe folds in one poll's nodes and returns the rate of each, in
// the order of nodes.
func (t *rateTracker) observe(nodes []apiv1.Node) []rates {
	next := make(map[nodeKey]sample, len(nodes))
	out := make([]rates, len(nodes))
	for i := range nodes {
		n := &nodes[i]
		k := keyOf(n)
		// Counters move with the status, which renewals do not write: rates
		// are over the status's times when the record carries them.
		at := n.UpdatedAtUnixMs
		if n.StatusAtUnixMs > 0 {
			at = n.StatusAtUnixMs
		}
		cur := sample{incarnation: n.IncarnationID, updatedMs: at, c: n.Counters}
		prev, ok := t.last[k]
		switch {
		case !ok || prev.incarnation != cur.incarnation || cur.updatedMs < prev.updatedMs || wentBack(prev.c, cur.c):
			// First sight, new incarnation or a reset: new baseline.
		case cur.updatedMs == prev.updatedMs:
			// No heartbeat since the last poll: the last rate stands.
			cur = prev
		default:
			cur.r = rateBetween(prev, cur)
		}
		next[k] = cur
		out[i] = cur.r
	}
	t.last = next
	return out
}

// wentBack reports whether any counter the view uses decreased, which only
// a reset explains.
func wentBack(a, b apiv1.Counters) bool {
	return b.RequestsTotal < a.RequestsTotal || b.HitsTotal < a.HitsTotal || b.MissesTotal < a.MissesTotal ||
		b.BytesServedTotal < a.BytesServedTotal || b.EvictionsTotal < a.EvictionsTotal
}

func rateBetween(a, b sample) rates {
	dt := float64(b.updatedMs-a.updatedMs) / 1000
	r := rates{
		known:       true,
		reqPerSec:   float64(b.c.RequestsTotal-a.c.RequestsTotal) / dt,
		bytesPerSec: float64(b.c.BytesServedTotal-a.c.BytesServedTotal) / dt,
		evictPerSec: float64(b.c.EvictionsTotal-a.c.EvictionsTotal) / dt,
		hitRatio:    -1,
	}
	r.hitRatio = format.HitRatio(b.c.HitsTotal-a.c.HitsTotal, b.c.MissesTotal-a.c.MissesTotal)
	return r
}
