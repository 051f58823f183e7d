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
// heartbeat interval, and watches its peers': a peer learns a renewal at
// most about half an interval after it was accepted, so every coordinator
// shows each heartbeat age within one interval of the truth. A batch costs
// about 7 bytes a renewal; nothing is published while this coordinator is
// the only one or accepted no renewal, the watch polls nothing, and
// nothing decides on what is learned: it only raises the heartbeat time
// the API shows (HeardAtUnixMs). A backend whose renewals every reader
// sees (Kubernetes) does not implement the log.

// renewalTick is the renewal log's publication period: half the
// heartbeat interval.
func renewalTick(t cluster.Timing) time.Duration {
	return max(t.HeartbeatInterval/2, 50*time.Millisecond)
}

// renewalPublisher publishes this coordinator's accepted renewals to the store's
// renewal log and learns its peers' (run).
type renewalPublisher struct {
	*Coordinator
	renewalLog state.RenewalLog // the store's renewal log (a field of its own: Coordinator.store is the instrumented Store)
}

// newRenewalPublisher returns the renewal publisher, nil when the store has no
// renewal log.
func newRenewalPublisher(c *Coordinator) *renewalPublisher {
	log, ok := c.opts.Store.(state.RenewalLog)
	if !ok {
		return nil
	}
	return &renewalPublisher{Coordinator: c, renewalLog: log}
}

// hasPeers reports whether the last good view lists another live
// coordinator: only then is a renewal batch worth its bytes.
func (p *renewalPublisher) hasPeers() bool {
	v := p.LastGood()
	if v == nil {
		return false
	}
	for _, r := range v.Snapshot.Records {
		if r != nil && r.Role == cluster.RoleCoordinator && r.NodeID != p.opts.NodeID {
			return true
		}
	}
	return false
}

// run publishes this coordinator's renewals and learns its
// peers' until ctx ends. A failed publication is logged once per run of
// failures and retried at the next tick; a failed watch is opened again a
// second later: either makes ages coarser for a moment, nothing more.
func (p *renewalPublisher) run(ctx context.Context) {
	log := p.renewalLog
	t := time.NewTicker(renewalTick(p.opts.Timing))
	defer t.Stop()
	failing := false
	watched := log.WatchRenewals(ctx, p.opts.ClusterID, p.opts.NodeID)
	var rewatch <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case rs, ok := <-watched:
			if !ok {
				watched, rewatch = nil, time.After(time.Second)
				continue
			}
			p.evidence.learn(p.opts.ClusterID, rs)
		case <-rewatch:
			rewatch, watched = nil, log.WatchRenewals(ctx, p.opts.ClusterID, p.opts.NodeID)
		case <-t.C:
			batch := p.evidence.takeOwn()
			if len(batch) == 0 || !p.hasPeers() {
				continue
			}
			err := p.publishRenewals(ctx, log, batch)
			if err != nil && !failing && ctx.Err() == nil {
				p.log.Warn("renewal log publication failed; heartbeat ages on other coordinators are coarser until it succeeds", "err", err)
			}
			failing = err != nil
		}
	}
}

func (p *renewalPublisher) publishRenewals(ctx context.Context, log state.RenewalLog, batch []state.Renewal) error {
	ctx, cancel := context.WithTimeout(ctx, p.opts.RequestTimeout)
	defer cancel()
	return log.PublishRenewals(ctx, p.opts.ClusterID, p.opts.NodeID, batch, p.opts.Timing.LeaseTTL)
}
