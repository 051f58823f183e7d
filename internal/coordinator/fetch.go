package coordinator

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/placement"
	"github.com/talonhq/talon/internal/state"
)

// fetch reads a snapshot and builds a view; it is the batcher's read.
// Reads may finish out of order; only the latest-started read's outcome
// is applied, and a read that finishes after a later-started one answers
// its callers with that read's view (it too began after they asked), so
// every answer is a view the coordinator applied, in start order.
func (c *Coordinator) fetch(ctx context.Context, seq uint64) (*View, error) {
	start := c.mono()
	snap, err := c.store.Snapshot(ctx, c.opts.ClusterID)
	end := c.mono()
	if err != nil {
		c.noteStoreError("snapshot", seq, err)
		return nil, err
	}
	prev := c.LastGood()
	v, err := c.buildView(prev, snap)
	if err != nil {
		return nil, err
	}
	a := c.view.good(seq, start, end, v)
	if !a.ok {
		if newest := c.view.newest(); newest != nil {
			return newest, nil
		}
		return nil, fmt.Errorf("%w: a later read failed", state.ErrUnavailable)
	}
	c.noteView(v, a, start)
	return v, nil
}

// buildView computes the placement of snap, reusing prev's table when the
// eligible set is the same. Eligibility reads the records alone.
func (c *Coordinator) buildView(prev *View, snap *state.Snapshot) (*View, error) {
	if prev != nil && prev.Snapshot.Revision == snap.Revision {
		// Same revision, same records: the same placement.
		return &View{Snapshot: snap, Table: prev.Table, Excluded: prev.Excluded, ObservedAt: c.now(), Survey: prev.Survey}, nil
	}
	eligible, excluded := placement.Eligible(snap.Records)
	table := (*placement.Table)(nil)
	if prev != nil && slices.Equal(prev.Table.Nodes(), eligible) {
		table = prev.Table // same membership: reuse the pre-hashed table
	} else {
		var err error
		if table, err = placement.New(eligible); err != nil {
			return nil, fmt.Errorf("build placement: %w", err)
		}
	}
	return &View{Snapshot: snap, Table: table, Excluded: excluded, ObservedAt: c.now(), Survey: cluster.SurveyRecords(snap.Records)}, nil
}

// noteView records an applied read: evidence and proposals, readiness,
// metrics, and (outside the recovery hold) a push when the placement
// version changed.
func (c *Coordinator) noteView(v *View, a applied, start time.Time) {
	switch {
	case a.first:
		c.log.Info("coordinator serving: the store answered", "control", c.advertise, "backend", c.opts.Store.Backend(),
			"records", len(v.Snapshot.Records), "revision", v.Snapshot.Revision.String(), "placement_version", v.Version().String(),
			"blip_tolerance", c.view.tol.blip())
	case a.recovered || a.gap:
		c.noteRecovery(v, a)
	}
	c.proposer.offer(v, start)
	c.updateReadyMetric()
	c.m.snapshotAge.Set(0)
	if a.prev == nil || a.prev.Snapshot.Revision != v.Snapshot.Revision {
		c.m.countNodes(v, c.opts.PlacementReplicas)
		noteSurvey(c.log, a.prev, v)
		if a.prev != nil {
			c.members.diff(a.prev, v)
		}
	}
	if c.view.isRecovering() {
		return // no push while answers are held back
	}
	if changed, old, hadOld := c.ctl.subs.publish(v.Version()); changed {
		if hadOld {
			c.log.Info("placement version changed", "old", old.String(), "new", v.Version().String(), "eligible_workers", v.Table.Len())
		}
		e := Event{NodeEvent: state.NodeEvent{Type: state.EventPlacementVersion, New: v.Version().String(), Revision: v.Snapshot.Revision.String(),
			Reason: fmt.Sprintf("%d eligible workers", v.Table.Len())}}
		if hadOld {
			// A node event every coordinator observes; the first version
			// after a start is this coordinator's own.
			e.Old = old.String()
			e.ID = c.members.placementEventID(a.prev, v, old, v.Version())
		}
		c.addEvent(e)
		c.m.versionChanges.Inc()
	}
}
