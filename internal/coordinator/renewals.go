package coordinator

import (
	"context"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

// Heartbeat ages on every coordinator (ADR 0001 amendment). A heartbeat
// that only renews its record's lease (etcd, statusEvery) shows in no
// record, so only the coordinator that accepted it knows when the worker
// was last heard. Each coordinator therefore publishes the renewals it
// accepted to the store's renewal log (state.RenewalLog) every half
// heartbeat interval, and reads its peers' every quarter: a peer learns a
// renewal at most about three quarters of an interval after it was
// accepted, so every coordinator shows each heartbeat age within one
// interval of the truth. A batch costs about 7 bytes a renewal; nothing is
// published while this coordinator is the only one, and nothing decides on
// what is learned: it only raises the heartbeat time the API shows
// (HeardAtUnixMs). A backend whose renewals every reader sees (Kubernetes)
// does not implement the log.

// renewalTick is the renewal log's read period: a quarter of the
// heartbeat interval. Batches are published every second tick.
func renewalTick(t cluster.Timing) time.Duration {
	return max(t.HeartbeatInterval/4, 50*time.Millisecond)
}

// renewalLog returns the store's renewal log, nil when it has none.
func (c *Coordinator) renewalLog() state.RenewalLog {
	log, _ := c.opts.Store.(state.RenewalLog)
	return log
}

// hasPeers reports whether the last good view lists another live
// coordinator: only then is a renewal batch worth its bytes.
func (c *Coordinator) hasPeers() bool {
	v := c.LastGood()
	if v == nil {
		return false
	}
	for _, r := range v.Snapshot.Records {
		if r != nil && r.Role == cluster.RoleCoordinator && r.NodeID != c.opts.NodeID {
			return true
		}
	}
	return false
}

// renewalLoop publishes this coordinator's renewals and learns its
// peers' until ctx ends. Failures are logged once per kind of outcome and
// retried at the next tick: a lost batch makes ages coarser for a tick,
// nothing more.
func (c *Coordinator) renewalLoop(ctx context.Context, log state.RenewalLog) {
	t := time.NewTicker(renewalTick(c.opts.Timing))
	defer t.Stop()
	var after state.Revision
	failing := false
	report := func(op string, err error) {
		if err != nil && !failing && ctx.Err() == nil {
			c.log.Warn("renewal log "+op+" failed; heartbeat ages on other coordinators are coarser until it answers", "err", err)
		}
		failing = err != nil
	}
	for tick := 0; ; tick++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		peers := c.hasPeers()
		if tick%2 == 1 {
			if batch := c.evidence.takeOwn(); len(batch) > 0 && peers {
				report("publish", c.publishRenewals(ctx, log, batch))
			}
		}
		if !peers {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, c.opts.RequestTimeout)
		rs, next, err := log.RenewalsSince(rctx, c.opts.ClusterID, c.opts.NodeID, after)
		cancel()
		report("read", err)
		if err == nil {
			after = next
			c.evidence.learn(c.opts.ClusterID, rs)
		}
	}
}

func (c *Coordinator) publishRenewals(ctx context.Context, log state.RenewalLog, batch []state.Renewal) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.RequestTimeout)
	defer cancel()
	return log.PublishRenewals(ctx, c.opts.ClusterID, c.opts.NodeID, batch, c.opts.Timing.LeaseTTL)
}
