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

// ownRecord keeps this coordinator's own record in the store: the loop
// of package membership, whose write is a direct store upsert, and the
// wake-up that asks it to write now (after a recovery, so that the
// record the hold waits for is not an interval away).
type ownRecord struct {
	*Coordinator
	loop *membership.Loop
	wake chan struct{} // asks the loop to write now; capacity 1
}

func newOwnRecord(c *Coordinator) (*ownRecord, error) {
	s := &ownRecord{Coordinator: c, wake: make(chan struct{}, 1)}
	var err error
	s.loop, err = membership.New(membership.Options{
		Role:           string(cluster.RoleCoordinator),
		NodeID:         s.opts.NodeID,
		Incarnation:    s.incarnation,
		Write:          s.write,
		Interval:       s.opts.Timing.HeartbeatInterval,
		RequestTimeout: s.opts.RequestTimeout,
		Logger:         s.log,
		Now:            s.mono, // Report.Started feeds the recovery hold
		Sleep:          s.sleep,
		OnAttempt:      s.attempted,
		Tracer:         s.tracer,
	})
	return s, err
}

// write writes this coordinator's own record once.
func (s *ownRecord) write(ctx context.Context, a membership.Attempt) (membership.Answer, error) {
	var opts []state.UpsertOption
	if !a.Register {
		opts = append(opts, state.Heartbeat(), state.StatusEvery(statusEvery(s.LastGood(), s.opts.Timing)))
	}
	res, err := s.store.UpsertNode(ctx, s.record(a.Seq), s.opts.Timing.LeaseTTL, opts...)
	if err != nil {
		s.noteStoreError("upsert", 0, err)
		return membership.Answer{}, err
	}
	if res.Renewed {
		s.evidence.heard(cluster.Key{ClusterID: s.opts.ClusterID, Role: cluster.RoleCoordinator, NodeID: s.opts.NodeID}, s.incarnation, s.now().UnixMilli())
	}
	switch res.Outcome {
	case state.OutcomeAccepted, state.OutcomeDuplicate:
		return membership.Answer{Outcome: membership.Accepted}, nil
	case state.OutcomeNotFound:
		s.m.selfRefusals.WithLabelValues(res.Outcome.String()).Inc()
		return membership.Answer{Outcome: membership.NotFound}, nil
	}
	s.m.selfRefusals.WithLabelValues(res.Outcome.String()).Inc()
	ans := membership.Answer{Outcome: membership.Superseded}
	if res.Record != nil {
		ans.Holder = res.Record.IncarnationID
	}
	return ans, nil
}

// attempted follows the own-record loop: an accepted write counts for
// the recovery hold and may change readiness and the view.
func (s *ownRecord) attempted(r membership.Report) {
	if r.Err == nil && r.Answer.Outcome == membership.Accepted {
		s.view.selfWritten(r.Started)
		s.refresh.request()
	}
	s.updateReadyMetric()
}

// sleep is the own-record loop's wait: d, or less when kick asks
// for a write now.
func (s *ownRecord) sleep(ctx context.Context, d time.Duration) error {
	return backoff.SleepOrWake(ctx, d, s.wake)
}

// kick asks the own-record loop to write now.
func (s *ownRecord) kick() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// record builds this coordinator's own status record.
func (s *ownRecord) record(seq uint64) *cluster.Record {
	rd := s.Readiness()
	storeOK := s.current()
	health := cluster.HealthHealthy
	if !storeOK {
		health = cluster.HealthDegraded
	}
	rec := &cluster.Record{
		ClusterID:       s.opts.ClusterID,
		NodeID:          s.opts.NodeID,
		Role:            cluster.RoleCoordinator,
		IncarnationID:   s.incarnation,
		Address:         s.advertise,
		AdminAddress:    s.opts.AdminAddress,
		Version:         buildinfo.Version,
		StartTimeUnixMs: s.startUnixMs,
		HeartbeatSeq:    seq,
		Health:          health,
		Ready:           rd.Ready,
		Capacity:        cluster.Capacity{StoreHealthy: storeOK},
		Counters: cluster.Counters{
			RequestsTotal:         s.ctl.requests.Load(),
			ErrorsTotal:           s.ctl.requestErrors.Load(),
			PlacementLookupsTotal: s.lookups.Load(),
			PlacementErrorsTotal:  s.lookupErrors.Load(),
			StoreErrorsTotal:      s.storeErrors.Load(),
		},
		Labels:       s.opts.Labels,
		FeatureLevel: cluster.BuildLevel,
	}
	if v := s.LastGood(); v != nil && storeOK {
		// The placement this coordinator answers with, for every view
		// to compare with its own (cluster.Record.PlacementVersion).
		rec.PlacementVersion, rec.EligibleWorkers = v.Version().String(), int64(v.Table.Len())
	}
	return rec
}
