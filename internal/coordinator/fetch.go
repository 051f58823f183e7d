package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/placement"
	"github.com/talonhq/talon/internal/protocol"
	"github.com/talonhq/talon/internal/state"
)

// View returns a consistent view read after the call began. When the
// store cannot be read within the request timeout, Run has not started,
// or the coordinator is recovering from an outage or its own stall (see
// Options.RecoveryHold), it returns an error wrapping ErrNotReady.
func (c *Coordinator) View(ctx context.Context) (*View, error) {
	b := c.views.Load()
	if b == nil {
		return nil, fmt.Errorf("%w: the coordinator is not running yet", ErrNotReady)
	}
	// Unready answers at once: while the last read failed or recovery is
	// on, a caller gets not_ready now, not after a read that would wait
	// out the request timeout; the refresh loop keeps probing the store.
	if err := c.unready(); err != nil {
		c.requestRefresh()
		return nil, err
	}
	v, err := b.get(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotReady, err)
	}
	if err := c.unready(); err != nil {
		return nil, err
	}
	return v, nil
}

// unready returns the ErrNotReady a caller gets without a read: the last
// applied read failed, or the coordinator is recovering; nil otherwise.
func (c *Coordinator) unready() error {
	if r := c.view.recoveryReason(c.mono()); r != "" {
		return fmt.Errorf("%w: %s", ErrNotReady, r)
	}
	if vs := c.view.state(); vs.synced && !vs.storeOK {
		return fmt.Errorf("%w: the store did not answer the last read: %w", ErrNotReady, vs.lastErr)
	}
	if r := c.unconfirmedReason(); r != "" {
		return fmt.Errorf("%w: %s", ErrNotReady, r)
	}
	return nil
}

// unconfirmedReason says why the view is no longer known to be current:
// no read that started within the request timeout has succeeded. It is ""
// otherwise. The refresh loop starts a read at least three times per
// request timeout (refreshEvery), so a store that answers never leaves
// the view unconfirmed; one that stops answering does within one request
// timeout, before the hanging read itself fails.
func (c *Coordinator) unconfirmedReason() string {
	age, stale := c.view.unconfirmed(c.mono(), c.opts.RequestTimeout)
	if !stale {
		return ""
	}
	return fmt.Sprintf("store not answering: no read confirmed the view for %s (request timeout %s)", age.Round(time.Millisecond), c.opts.RequestTimeout)
}

// LastGood returns the last view successfully read, for diagnostics only:
// it may be stale, and callers must mark it so with its ObservedAt. It is
// nil before the first successful read.
func (c *Coordinator) LastGood() *View {
	return c.view.state().lastGood
}

// LastError returns the last store error seen, nil once the store answers again.
func (c *Coordinator) LastError() error {
	return c.view.state().lastErr
}

// current reports whether the last snapshot read succeeded: writes are
// served then, recovering or not (workers re-register during the hold).
func (c *Coordinator) current() bool {
	vs := c.view.state()
	return vs.storeOK && vs.synced
}

// Lookup answers a placement lookup from a fresh view.
func (c *Coordinator) Lookup(ctx context.Context, key string, replicas int) ([]placement.Owner, placement.Version, error) {
	start := c.now()
	c.lookups.Add(1)
	owners, version, err := c.lookup(ctx, key, replicas)
	c.m.placementDur.Observe(c.now().Sub(start).Seconds())
	if err != nil {
		c.lookupErrors.Add(1)
		c.m.placementErrs.WithLabelValues(wireCode(err).String()).Inc()
	}
	return owners, version, err
}

func (c *Coordinator) lookup(ctx context.Context, key string, replicas int) ([]placement.Owner, placement.Version, error) {
	if replicas < 1 || replicas > protocol.MaxReplicas {
		return nil, 0, protocol.NewError(protocol.CodeInvalidArgument, "replicas %d: must be from 1 to %d", replicas, protocol.MaxReplicas)
	}
	v, err := c.View(ctx)
	if err != nil {
		return nil, 0, protocol.NewError(protocol.CodeNotReady, "no current cluster view (the shared store could not be read in time, or the coordinator is recovering from an outage); retry")
	}
	owners := v.Table.Lookup(key, replicas)
	if len(owners) == 0 {
		return nil, v.Version(), protocol.NewError(protocol.CodeNoWorkers, "no healthy, ready worker in cluster %s", c.opts.ClusterID)
	}
	return owners, v.Version(), nil
}

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
	for _, p := range c.evidence.observeThrottled(v.Snapshot.Records, start) {
		select {
		case c.proposals <- p:
		default: // the proposer is behind; the next read proposes again
		}
	}
	for _, r := range c.dueRevocations(v, start) {
		select {
		case c.revocations <- r:
		default: // the next comparison finds it again
		}
	}
	c.updateReadyMetric()
	c.m.snapshotAge.Set(0)
	if a.prev == nil || a.prev.Snapshot.Revision != v.Snapshot.Revision {
		c.countNodes(v)
		c.noteSurvey(a.prev, v)
		if a.prev != nil {
			c.logMembership(a.prev, v)
		}
	}
	if c.view.isRecovering() {
		return // no push while answers are held back
	}
	if changed, old, hadOld := c.ctl.subs.publish(v.Version()); changed {
		if hadOld {
			c.log.Info("placement version changed", "old", old.String(), "new", v.Version().String(), "eligible_workers", v.Table.Len())
		}
		e := Event{Type: EventPlacementVersion, New: v.Version().String(), Revision: v.Snapshot.Revision.String(),
			Reason: fmt.Sprintf("%d eligible workers", v.Table.Len())}
		if hadOld {
			// A node event every coordinator observes; the first version
			// after a start is this coordinator's own.
			e.Old = old.String()
			e.ID = c.placementEventID(a.prev, v, old, v.Version())
		}
		c.addEvent(e)
		c.m.versionChanges.Inc()
	}
}

// maxMembershipEvents bounds the node events one view logs; the rest are
// summed up in one line (a mass expiry must not flood the log).
const maxMembershipEvents = 20

// logMembership logs, one structured line each, the nodes that joined,
// changed health, or expired or were removed between prev and v, and adds
// the same changes, readiness changes and restarts included, to the
// event list.
func (c *Coordinator) logMembership(prev, v *View) {
	records := func(view *View) map[cluster.Key]*cluster.Record {
		m := make(map[cluster.Key]*cluster.Record, len(view.Snapshot.Records))
		for _, r := range view.Snapshot.Records {
			if r != nil {
				m[r.Key()] = r
			}
		}
		return m
	}
	before, after := records(prev), records(v)
	rev := v.Snapshot.Revision.String()
	logged, dropped := 0, 0
	event := func(level slog.Level, msg string, e Event, args ...any) {
		if logged >= maxMembershipEvents {
			dropped++
			return
		}
		logged++
		e.Revision = rev
		c.addEvent(e)
		if msg != "" {
			c.log.Log(context.Background(), level, msg, append([]any{"role", e.Role, "node", e.NodeID}, args...)...)
		}
	}
	for k, r := range after {
		h := r.EffectiveHealth()
		base := Event{Role: string(k.Role), NodeID: k.NodeID}
		old, ok := before[k]
		if !ok {
			e := base
			e.Type, e.New, e.Reason = EventNodeJoined, string(h), "address "+r.Address
			// The generation tells a join from the next one of the same
			// incarnation (it expired and registered again; issue 47).
			e.ID = c.nodeEventID(e, r.IncarnationID, r.Generation)
			event(slog.LevelInfo, "node joined", e, "health", string(h), "address", r.Address)
			continue
		}
		if old.IncarnationID != r.IncarnationID {
			e := base
			e.Type, e.Reason = EventNodeRestarted, "new incarnation "+r.IncarnationID
			e.ID = c.nodeEventID(e, r.IncarnationID, 0)
			event(slog.LevelInfo, "", e)
		}
		if oh := old.EffectiveHealth(); oh != h {
			e := base
			e.Type, e.Old, e.New = EventNodeHealth, string(oh), string(h)
			e.ID = c.nodeEventID(e, r.IncarnationID, r.HeartbeatSeq)
			if r.Late {
				e.Reason = "no heartbeat accepted for unhealthy-after (marked late)"
			}
			if h == cluster.HealthHealthy {
				event(slog.LevelInfo, "node recovered", e, "was", string(oh))
			} else {
				event(slog.LevelWarn, "node health changed", e, "was", string(oh), "now", string(h))
			}
		}
		if old.Ready != r.Ready || (!r.Ready && old.NotReadyReason != r.NotReadyReason) {
			e := base
			e.Type, e.Old, e.New, e.Reason = EventNodeReadiness, readyWord(old.Ready), readyWord(r.Ready), r.NotReadyReason
			e.ID = c.nodeEventID(e, r.IncarnationID, r.HeartbeatSeq)
			event(slog.LevelInfo, "node readiness changed", e, "was", e.Old, "now", e.New, "reason", r.NotReadyReason)
		}
		for _, e := range markEvents(old, r, base) {
			e.ID = c.markEventID(e, old, r)
			event(slog.LevelWarn, "node "+string(e.Type)[len("node_"):], e, "reason", e.Reason)
		}
	}
	for k, old := range before {
		if _, ok := after[k]; !ok {
			level, msg, e := c.removal(k, old)
			event(level, msg, e)
		}
	}
	if dropped > 0 {
		c.addEvent(Event{Type: EventsDropped, Revision: rev, Reason: fmt.Sprintf("%d more membership changes in one view", dropped)})
		c.log.Warn("more membership changes not logged one by one", "count", dropped)
	}
}

// removal is the event of a record gone from the view, and how to log
// it: an orderly leave when this coordinator served its deregistration,
// an expiry or removal to look into otherwise.
func (c *Coordinator) removal(k cluster.Key, old *cluster.Record) (slog.Level, string, Event) {
	e := Event{Type: EventNodeRemoved, Role: string(k.Role), NodeID: k.NodeID}
	e.ID = c.nodeEventID(e, old.IncarnationID, 0)
	if c.departed.take(k, old.IncarnationID, c.mono()) {
		e.Reason = "deregistered"
		return slog.LevelInfo, "node left: deregistered", e
	}
	return slog.LevelWarn, "node expired or removed", e
}

// markEvents returns the events of the operator's and the coordinators'
// marks that changed from old to r: a cordon set or lifted (who, when,
// persisted) and a revocation. Every coordinator reads the same marks
// from the store, so each lists them, whichever coordinator took the
// request.
func markEvents(old, r *cluster.Record, base Event) []Event {
	var out []Event
	if old.Cordoned() != r.Cordoned() || (r.Cordoned() && old.CordonPersist != r.CordonPersist) {
		e := base
		e.Type, e.Old, e.New, e.Reason = EventNodeUncordoned, cordonWord(old), cordonWord(r), "uncordoned by an operator"
		if r.Cordoned() {
			e.Type, e.Reason = EventNodeCordoned, "cordoned by "+r.CordonedBy
			if r.CordonPersist {
				e.Reason += " (kept across restarts)"
			}
		}
		out = append(out, e)
	}
	if !old.Revoked() && r.Revoked() {
		e := base
		e.Type, e.New, e.Reason = EventNodeRevoked, "revoked", fmt.Sprintf("credential on %s's deny list (%s)", r.RevokedBy, r.RevokedReason)
		out = append(out, e)
	}
	return out
}

// cordonWord is the event value of a record's cordon.
func cordonWord(r *cluster.Record) string {
	switch {
	case r.Cordoned() && r.CordonPersist:
		return "cordoned_persist"
	case r.Cordoned():
		return "cordoned"
	}
	return "uncordoned"
}

// readyWord is the event value of a readiness.
func readyWord(ready bool) string {
	if ready {
		return "ready"
	}
	return "not_ready"
}

// countNodes sets the live-node gauges and the eligible-worker gauge from v.
func (c *Coordinator) countNodes(v *View) {
	c.m.eligible.Set(float64(v.Table.Len()))
	under := 0.0
	if v.Table.Len() < c.opts.PlacementReplicas {
		under = 1
	}
	c.m.underRepl.Set(under)
	counts := map[[2]string]int{}
	for _, r := range v.Snapshot.Records {
		counts[[2]string{string(r.Role), string(r.EffectiveHealth())}]++
	}
	for _, r := range cluster.Roles() {
		for _, h := range cluster.HealthStates() {
			c.m.nodes.WithLabelValues(string(r), string(h)).Set(float64(counts[[2]string{string(r), string(h)}]))
		}
	}
}

// noteStoreError records a failed store operation. Only a failed snapshot
// read (seq > 0, applied in start order) makes the coordinator fail closed:
// a lost write race, an invalid record or a broken watch say nothing about
// whether it can answer from a current view.
func (c *Coordinator) noteStoreError(op string, seq uint64, err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	if op != "snapshot" {
		c.storeErrors.Add(1)
		c.log.Debug("store operation failed", "operation", op, "error", err)
		return
	}
	ok, wasOK := c.view.failed(seq, err)
	if !ok {
		return // a later-started read already decided
	}
	c.storeErrors.Add(1)
	c.evidence.interrupt()
	if wasOK {
		c.addEvent(Event{Type: EventStoreUnreachable, Reason: err.Error()})
		c.log.Warn("store unreachable: failing closed (unready, lookups refused)", "operation", op, "error", err)
	}
	if lastGood := c.LastGood(); lastGood != nil {
		c.m.snapshotAge.Set(c.now().Sub(lastGood.ObservedAt).Seconds())
	}
	c.updateReadyMetric()
}

// nodeEventID is the identity of node event e about incarnation inc at
// heartbeat sequence seq (0 when the incarnation alone identifies it):
// every coordinator that observes the change derives the same.
func (c *Coordinator) nodeEventID(e Event, inc string, seq uint64) string {
	return state.EventID(state.EventIdentity{ClusterID: c.opts.ClusterID, Type: string(e.Type), Role: e.Role, NodeID: e.NodeID,
		Incarnation: inc, Seq: seq, Old: e.Old, New: e.New})
}

// markEventID is the identity of mark event e from old to r: the
// cordon's time tells one cordon (or its lifting) from the next.
func (c *Coordinator) markEventID(e Event, old, r *cluster.Record) string {
	at := r.CordonedAtUnixMs
	if e.Type == EventNodeUncordoned {
		at = old.CordonedAtUnixMs
	}
	return c.nodeEventID(e, r.IncarnationID, uint64(max(0, at)))
}
