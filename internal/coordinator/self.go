package coordinator

import (
	"context"
	"time"

	"github.com/talonhq/talon/internal/backoff"
	"github.com/talonhq/talon/internal/buildinfo"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/membership"
	"github.com/talonhq/talon/internal/state"
)

// newSelfLoop builds the loop that keeps this coordinator's own record
// in the store (package membership): the write is a direct store upsert.
func (c *Coordinator) newSelfLoop() (*membership.Loop, error) {
	return membership.New(membership.Options{
		Role:           string(cluster.RoleCoordinator),
		NodeID:         c.opts.NodeID,
		Incarnation:    c.incarnation,
		Write:          c.writeSelf,
		Interval:       c.opts.Timing.HeartbeatInterval,
		RequestTimeout: c.opts.RequestTimeout,
		Logger:         c.log,
		Now:            c.mono, // Report.Started feeds the recovery hold
		Sleep:          c.sleepSelf,
		OnAttempt:      c.selfAttempted,
		Tracer:         c.tracer,
	})
}

// writeSelf writes this coordinator's own record once.
func (c *Coordinator) writeSelf(ctx context.Context, a membership.Attempt) (membership.Answer, error) {
	var opts []state.UpsertOption
	if !a.Register {
		opts = append(opts, state.Heartbeat(), state.StatusEvery(c.statusEvery()))
	}
	res, err := c.store.UpsertNode(ctx, c.selfRecord(a.Seq), c.opts.Timing.LeaseTTL, opts...)
	if err != nil {
		c.noteStoreError("upsert", 0, err)
		return membership.Answer{}, err
	}
	if res.Renewed {
		c.evidence.heard(cluster.Key{ClusterID: c.opts.ClusterID, Role: cluster.RoleCoordinator, NodeID: c.opts.NodeID}, c.incarnation, c.now().UnixMilli())
	}
	switch res.Outcome {
	case state.OutcomeAccepted, state.OutcomeDuplicate:
		return membership.Answer{Outcome: membership.Accepted}, nil
	case state.OutcomeNotFound:
		c.m.selfRefusals.WithLabelValues(res.Outcome.String()).Inc()
		return membership.Answer{Outcome: membership.NotFound}, nil
	}
	c.m.selfRefusals.WithLabelValues(res.Outcome.String()).Inc()
	ans := membership.Answer{Outcome: membership.Superseded}
	if res.Record != nil {
		ans.Holder = res.Record.IncarnationID
	}
	return ans, nil
}

// selfAttempted follows the own-record loop: an accepted write counts for
// the recovery hold and may change readiness and the view.
func (c *Coordinator) selfAttempted(r membership.Report) {
	if r.Err == nil && r.Answer.Outcome == membership.Accepted {
		c.view.selfWritten(r.Started)
		c.requestRefresh()
	}
	c.updateReadyMetric()
}

// sleepSelf is the own-record loop's wait: d, or less when kickSelf asks
// for a write now.
func (c *Coordinator) sleepSelf(ctx context.Context, d time.Duration) error {
	return backoff.SleepOrWake(ctx, d, c.selfKick)
}

// kickSelf asks the own-record loop to write now.
func (c *Coordinator) kickSelf() {
	select {
	case c.selfKick <- struct{}{}:
	default:
	}
}

// selfRecord builds this coordinator's own status record.
func (c *Coordinator) selfRecord(seq uint64) *cluster.Record {
	rd := c.Readiness()
	storeOK := c.current()
	health := cluster.HealthHealthy
	if !storeOK {
		health = cluster.HealthDegraded
	}
	rec := &cluster.Record{
		ClusterID:       c.opts.ClusterID,
		NodeID:          c.opts.NodeID,
		Role:            cluster.RoleCoordinator,
		IncarnationID:   c.incarnation,
		Address:         c.advertise,
		AdminAddress:    c.opts.AdminAddress,
		Version:         buildinfo.Version,
		StartTimeUnixMs: c.startUnixMs,
		HeartbeatSeq:    seq,
		Health:          health,
		Ready:           rd.Ready,
		Capacity:        cluster.Capacity{StoreHealthy: storeOK},
		Counters: cluster.Counters{
			RequestsTotal:         c.ctl.requests.Load(),
			ErrorsTotal:           c.ctl.requestErrors.Load(),
			PlacementLookupsTotal: c.lookups.Load(),
			PlacementErrorsTotal:  c.lookupErrors.Load(),
			StoreErrorsTotal:      c.storeErrors.Load(),
		},
		Labels:       c.opts.Labels,
		FeatureLevel: cluster.BuildLevel,
	}
	if v := c.LastGood(); v != nil && storeOK {
		// The placement this coordinator answers with, for every view
		// to compare with its own (cluster.Record.PlacementVersion).
		rec.PlacementVersion, rec.EligibleWorkers = v.Version().String(), int64(v.Table.Len())
	}
	return rec
}

// maxQueuedProposals bounds the transitions waiting for the proposer; a
// read that finds the queue full leaves the rest for the next read.
const maxQueuedProposals = 256

// proposeLoop sends the transitions the evidence finds due to the store,
// one at a time, until ctx ends. Every coordinator proposes alike; the
// store applies a proposal only to the version it names.
func (c *Coordinator) proposeLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case p := <-c.proposals:
			c.propose(ctx, p)
		case r := <-c.revocations:
			c.revoke(ctx, r)
		}
	}
}

func (c *Coordinator) propose(ctx context.Context, p proposal) {
	pctx, cancel := context.WithTimeout(ctx, c.opts.RequestTimeout)
	defer cancel()
	res, err := c.store.ProposeTransition(pctx, p.key, p.incarnation, p.seq, p.transition, state.MinSilence(silenceFor(c.opts.Timing, p.transition)))
	outcome := state.Code(err)
	if err == nil {
		outcome = res.Outcome.String()
	} else {
		c.noteStoreError("transition", 0, err)
	}
	if err == nil && res.Renewed {
		// The store says the lease was renewed since: heartbeats that only
		// renew show in no version, so its clock counts from the renewal.
		outcome = "renewed"
		// RenewedAgo is a lower bound (the store's clock counts whole
		// seconds): as a heartbeat time, count a second more.
		c.evidence.renewed(p, c.mono().Add(-res.RenewedAgo), c.now().Add(-res.RenewedAgo-time.Second).UnixMilli())
	}
	c.m.transitions.WithLabelValues(p.transition.String(), outcome).Inc()
	if err == nil && res.Outcome == state.OutcomeAccepted {
		c.log.Warn("record unchanged for too long: proposed to the store and applied", "transition", p.transition.String(),
			"role", string(p.key.Role), "node", p.key.NodeID, "incarnation", p.incarnation, "heartbeat_seq", p.seq)
		c.requestRefresh()
	}
}

// silenceFor is how long a record's lease must have gone unrenewed, by
// the store's clock, for transition tr to apply: the same thresholds the
// evidence counts on this coordinator's clock.
func silenceFor(t cluster.Timing, tr state.Transition) time.Duration {
	if tr == state.TransitionExpire {
		return t.LeaseTTL
	}
	return t.UnhealthyAfter
}

// retryPolicy is the coordinator's wait between failed background reads.
func (c *Coordinator) retryPolicy() backoff.Policy {
	return backoff.Policy{Initial: 100 * time.Millisecond, Max: c.opts.Timing.HeartbeatInterval, Jitter: 0.5}
}
