package coordinator

import (
	"context"
	"time"

	"github.com/talonhq/talon/internal/buildinfo"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/protocol"
	"github.com/talonhq/talon/internal/state"
)

// admitted runs write when a store-write slot is free within
// AdmissionWait, else refuses it with the retryable unavailable code: under
// saturation the coordinator sheds load early instead of queueing without
// bound (workers retry with backoff).
func (h *handler) admitted(op string, write func() protocol.Message) protocol.Message {
	select {
	case h.writeSlots <- struct{}{}:
	default:
		t := time.NewTimer(h.opts.Limits.AdmissionWait)
		select {
		case h.writeSlots <- struct{}{}:
			t.Stop()
		case <-t.C:
			h.m.limitRefusals.WithLabelValues("inflight_writes").Inc()
			h.m.writes.WithLabelValues(op, protocol.CodeUnavailable.String()).Inc()
			return protocol.NewError(protocol.CodeUnavailable, "coordinator %s has %d store writes in flight, its limit: retry after a backoff, possibly elsewhere", h.opts.NodeID, cap(h.writeSlots))
		}
	}
	defer func() { <-h.writeSlots }()
	return write()
}

// upsert applies a Register or Heartbeat.
func (h *handler) upsertRecord(ctx context.Context, cn *conn, op string, payload []byte) protocol.Message {
	rec, err := protocol.DecodeRecordPayload(payload)
	if err != nil {
		h.m.writes.WithLabelValues(op, wireCode(err).String()).Inc()
		return wireError(err)
	}
	if e := h.authorizeWrite(cn, op, rec.Key()); e != nil {
		return e
	}
	if rec.ClusterID != h.opts.ClusterID {
		h.m.writes.WithLabelValues(op, protocol.CodeInvalidArgument.String()).Inc()
		return protocol.NewError(protocol.CodeInvalidArgument, "clusterId %q: this coordinator serves cluster %q", rec.ClusterID, h.opts.ClusterID)
	}
	// The coordinator's word, not the process's: a deny list by serial
	// reaches the record on every coordinator.
	rec.CredentialSerial = cn.credentialSerial()
	if rec.Role != cluster.RoleWorker {
		h.m.writes.WithLabelValues(op, protocol.CodeInvalidArgument.String()).Inc()
		return protocol.NewError(protocol.CodeInvalidArgument, "role %q: only workers register over the control protocol", rec.Role)
	}
	if !h.current() {
		// Fail closed (ADR section 8): no current snapshot, no writes.
		h.m.writes.WithLabelValues(op, protocol.CodeNotReady.String()).Inc()
		return protocol.NewError(protocol.CodeNotReady, "coordinator %s has no current cluster view; retry, possibly elsewhere", h.opts.NodeID)
	}
	var opts []state.UpsertOption
	if op == "heartbeat" {
		opts = append(opts, state.Heartbeat(), state.StatusEvery(statusEvery(h.LastGood(), h.opts.Timing)))
	} else if e := h.checkRegistrationSkew(rec); e != nil {
		h.m.writes.WithLabelValues(op, e.Code.String()).Inc()
		return e
	} else if full, n := h.clusterFull(rec.Key()); full {
		h.m.writes.WithLabelValues(op, protocol.CodeResourceExhausted.String()).Inc()
		h.m.limitRefusals.WithLabelValues("records").Inc()
		return protocol.NewError(protocol.CodeResourceExhausted, "cluster %q holds %d records, the max-records limit; node %q is not registered", h.opts.ClusterID, n, rec.NodeID)
	}
	if op != "heartbeat" {
		if e := h.cordons.apply(ctx, rec); e != nil {
			h.m.writes.WithLabelValues(op, e.Code.String()).Inc()
			return e
		}
	}
	res, err := h.store.UpsertNode(ctx, rec, h.opts.Timing.LeaseTTL, opts...)
	if err != nil {
		h.noteStoreError("upsert", 0, err)
		reply := h.storeWriteReply(op, rec.Key(), err)
		h.m.writes.WithLabelValues(op, reply.Code.String()).Inc()
		return reply
	}
	h.m.writes.WithLabelValues(op, res.Outcome.String()).Inc()
	h.noteAccepted(op, rec, res)
	if res.Decision == cluster.DecisionInsert {
		h.noteRegistered(rec.Key())
	}
	if res.Outcome == state.OutcomeAccepted && res.Decision != cluster.DecisionAdvance {
		// A new or restarted worker may change placement: tell subscribers soon.
		h.refresh.request()
	}
	return h.ack(res)
}

// noteAccepted counts a renewal, or observes an accepted heartbeat's
// record age in the last view.
func (h *handler) noteAccepted(op string, rec *cluster.Record, res state.WriteResult) {
	if res.Renewed {
		h.m.renewals.Inc()
		h.evidence.heard(rec.Key(), rec.IncarnationID, h.now().UnixMilli())
		return
	}
	if op != "heartbeat" || res.Outcome != state.OutcomeAccepted || res.Record == nil {
		return
	}
	if v := h.LastGood(); v != nil {
		if prev := v.record(rec.Key()); prev != nil && prev.IncarnationID == rec.IncarnationID && res.Record.UpdatedAtUnixMs >= prev.UpdatedAtUnixMs {
			h.m.heartbeatAge.Observe(float64(res.Record.UpdatedAtUnixMs-prev.UpdatedAtUnixMs) / 1000)
		}
	}
}

func (h *handler) deregister(ctx context.Context, cn *conn, m *protocol.Deregister) protocol.Message {
	if e := h.authorizeWrite(cn, "deregister", m.Key()); e != nil {
		return e
	}
	if m.ClusterID != h.opts.ClusterID {
		h.m.writes.WithLabelValues("deregister", protocol.CodeInvalidArgument.String()).Inc()
		return protocol.NewError(protocol.CodeInvalidArgument, "clusterId %q: this coordinator serves cluster %q", m.ClusterID, h.opts.ClusterID)
	}
	if m.Role != cluster.RoleWorker {
		h.m.writes.WithLabelValues("deregister", protocol.CodeInvalidArgument.String()).Inc()
		return protocol.NewError(protocol.CodeInvalidArgument, "role %q: only workers deregister over the control protocol", m.Role)
	}
	res, err := h.store.RemoveNode(ctx, m.Key(), m.IncarnationID)
	if err != nil {
		h.noteStoreError("remove", 0, err)
		reply := h.storeWriteReply("deregister", m.Key(), err)
		h.m.writes.WithLabelValues("deregister", reply.Code.String()).Inc()
		return reply
	}
	h.m.writes.WithLabelValues("deregister", res.Outcome.String()).Inc()
	if res.Outcome == state.OutcomeAccepted {
		h.departed.note(m.Key(), m.IncarnationID, h.mono())
		h.refresh.request()
	}
	return h.ack(res)
}

func (h *handler) ack(res state.WriteResult) *protocol.Ack {
	a := &protocol.Ack{
		Outcome:             wireOutcome(res.Outcome),
		HeartbeatIntervalMs: uint32(h.opts.Timing.HeartbeatInterval.Milliseconds()),
		LeaseTTLMs:          uint32(h.opts.Timing.LeaseTTL.Milliseconds()),
		Revision:            res.Revision.String(),
	}
	if res.Record != nil {
		a.UpdatedAtUnixMs = res.Record.UpdatedAtUnixMs
	}
	return a
}

// clusterFull reports whether registering key would take the cluster past
// Limits.MaxRecords (see tracker.clusterFull).
func (h *handler) clusterFull(key cluster.Key) (full bool, records int) {
	return h.Coordinator.view.clusterFull(key, h.ownKey(), h.opts.Limits.MaxRecords)
}

// noteRegistered counts a node this coordinator registered until a view
// read that began afterwards holds it (see clusterFull).
func (h *handler) noteRegistered(key cluster.Key) {
	var started uint64
	if b := h.views.Load(); b != nil {
		started = b.started()
	}
	h.Coordinator.view.noteRegistered(key, started)
}

// storeWriteReply is the answer to a client's write that the store
// failed. An authorization failure (permission_denied, unauthenticated)
// while this coordinator's own record is not accepted either, or its own
// last write failed too, is the coordinator's condition, not the
// request's: a store still starting (an API server syncing its RBAC
// caches) or a credential being rotated. That is answered not_ready, a
// refusal the client takes to the next coordinator and retries. Otherwise
// the failure is permanent for this request and says what is missing;
// the backend's own text (which can name endpoints and users) goes to the
// log, rate-limited by the store-error counter's Debug line.
func (h *handler) storeWriteReply(op string, key cluster.Key, err error) *protocol.Error {
	code := wireCode(err)
	if code != protocol.CodePermissionDenied && code != protocol.CodeUnauthenticated {
		return storeErrorReply(err)
	}
	if st := h.self.loop.Status(); !st.Registered || st.Err != nil {
		return protocol.NewError(protocol.CodeNotReady, "coordinator %s cannot write to the state store yet (%s for its own record too: the store may still be starting); retry, possibly elsewhere", h.opts.NodeID, code)
	}
	if h.authzLog.Allow() {
		h.log.Warn("the state store refused a write the coordinator's own writes pass (logged at most once per 10s)", "op", op, "node", string(key.Role)+"/"+key.NodeID, "code", code.String(), "error", err)
	}
	return protocol.NewError(code, "%s of %s/%s: the state store refused the coordinator's write (%s): its store credential lacks permission to write this node's record (the %s backend's rules for the key or Lease of %s); the coordinator's log names the rule", op, key.Role, key.NodeID, code, h.opts.Store.Backend(), key.NodeID)
}

// checkRegistrationSkew refuses the registration of a process outside the
// version-skew policy, before anything is written: an unsupported_version
// error naming both versions and the policy.
func (h *handler) checkRegistrationSkew(rec *cluster.Record) *protocol.Error {
	err := cluster.CheckSkew(rec, cluster.RoleCoordinator, h.opts.NodeID, buildinfo.Version, cluster.BuildLevel)
	if err == nil {
		return nil
	}
	h.log.Warn("registration refused: outside the version-skew policy", "node", rec.NodeID, "role", string(rec.Role),
		"version", rec.Version, "feature_level", rec.FeatureLevel, "own_version", buildinfo.Version, "own_feature_level", cluster.BuildLevel)
	return protocol.NewError(protocol.CodeUnsupportedVersion, "%v", err)
}
