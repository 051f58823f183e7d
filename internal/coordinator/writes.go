package coordinator

import (
	"context"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/pki"
	"github.com/talonhq/talon/internal/protocol"
	"github.com/talonhq/talon/internal/state"
)

// admitted runs write when a store-write slot is free within
// AdmissionWait, else refuses it with the retryable unavailable code: under
// saturation the coordinator sheds load early instead of queueing without
// bound (workers retry with backoff).
func (c *Coordinator) admitted(op string, write func() protocol.Message) protocol.Message {
	select {
	case c.writeSlots <- struct{}{}:
	default:
		t := time.NewTimer(c.opts.Limits.AdmissionWait)
		select {
		case c.writeSlots <- struct{}{}:
			t.Stop()
		case <-t.C:
			c.m.limitRefusals.WithLabelValues("inflight_writes").Inc()
			c.m.writes.WithLabelValues(op, protocol.CodeUnavailable.String()).Inc()
			return protocol.NewError(protocol.CodeUnavailable, "coordinator %s has %d store writes in flight, its limit: retry after a backoff, possibly elsewhere", c.opts.NodeID, cap(c.writeSlots))
		}
	}
	defer func() { <-c.writeSlots }()
	return write()
}

// authorizeWrite allows a Register, Heartbeat or Deregister for key only
// from the worker whose certificate names key's node (identity binds
// writes; without TLS, insecure-control-plane, every identity passes), on
// a connection attested for that node when attestation is on, and within
// the node's write rate. A refusal is a permission_denied Error, or
// a retryable resource_exhausted one with the time to wait past the rate;
// nothing is stored.
func (c *Coordinator) authorizeWrite(cn *conn, op string, key cluster.Key) *protocol.Error {
	if e := c.authorizeIdentity(cn, op, key); e != nil {
		return e
	}
	if e := c.authorizeAttested(cn, op, key); e != nil {
		return e
	}
	if ok, wait := c.rates.allow(key.NodeID, c.mono()); !ok {
		c.m.limitRefusals.WithLabelValues("write_rate").Inc()
		c.m.writes.WithLabelValues(op, protocol.CodeResourceExhausted.String()).Inc()
		e := protocol.NewError(protocol.CodeResourceExhausted, "%s of %s/%s: over the write rate of %d per heartbeat-interval %s (burst %d, max-node-writes-per-interval); retry in %s",
			op, key.Role, key.NodeID, c.rates.perInterval, c.opts.Timing.HeartbeatInterval, c.rates.burst, wait.Round(time.Millisecond))
		e.Retryable = true
		return e
	}
	return nil
}

// authorizeIdentity allows a write for key only from the worker whose
// certificate names key's node.
func (c *Coordinator) authorizeIdentity(cn *conn, op string, key cluster.Key) *protocol.Error {
	if cn.peer == nil {
		return nil
	}
	id := *cn.peer
	if id.Role == pki.RoleWorker && key.Role == cluster.RoleWorker && id.NodeID == key.NodeID {
		return nil
	}
	c.m.authRefusals.WithLabelValues("permission_denied").Inc()
	c.m.writes.WithLabelValues(op, protocol.CodePermissionDenied.String()).Inc()
	c.log.Warn("control write refused: the credential does not name this node", "op", op, "credential", id.String(), "node", string(key.Role)+"/"+key.NodeID, "remote", cn.nc.RemoteAddr().String())
	if id.Role != pki.RoleWorker {
		return protocol.NewError(protocol.CodePermissionDenied, "%s: credential %s may not write records; only a worker credential may %s, for its own node", op, id, op)
	}
	return protocol.NewError(protocol.CodePermissionDenied, "%s of %s/%s: credential %s may %s only its own node", op, key.Role, key.NodeID, id, op)
}

// upsert applies a Register or Heartbeat.
func (c *Coordinator) upsert(ctx context.Context, cn *conn, op string, payload []byte) protocol.Message {
	rec, err := protocol.DecodeRecordPayload(payload)
	if err != nil {
		c.m.writes.WithLabelValues(op, wireCode(err).String()).Inc()
		return wireError(err)
	}
	if e := c.authorizeWrite(cn, op, rec.Key()); e != nil {
		return e
	}
	if rec.ClusterID != c.opts.ClusterID {
		c.m.writes.WithLabelValues(op, protocol.CodeInvalidArgument.String()).Inc()
		return protocol.NewError(protocol.CodeInvalidArgument, "clusterId %q: this coordinator serves cluster %q", rec.ClusterID, c.opts.ClusterID)
	}
	// The coordinator's word, not the process's: a deny list by serial
	// reaches the record on every coordinator.
	rec.CredentialSerial = cn.credentialSerial()
	if rec.Role != cluster.RoleWorker {
		c.m.writes.WithLabelValues(op, protocol.CodeInvalidArgument.String()).Inc()
		return protocol.NewError(protocol.CodeInvalidArgument, "role %q: only workers register over the control protocol", rec.Role)
	}
	if !c.current() {
		// Fail closed (ADR section 8): no current snapshot, no writes.
		c.m.writes.WithLabelValues(op, protocol.CodeNotReady.String()).Inc()
		return protocol.NewError(protocol.CodeNotReady, "coordinator %s has no current cluster view; retry, possibly elsewhere", c.opts.NodeID)
	}
	var opts []state.UpsertOption
	if op == "heartbeat" {
		opts = append(opts, state.Heartbeat(), state.StatusEvery(c.statusEvery()))
	} else if e := c.checkRegistrationSkew(rec); e != nil {
		c.m.writes.WithLabelValues(op, e.Code.String()).Inc()
		return e
	} else if full, n := c.clusterFull(rec.Key()); full {
		c.m.writes.WithLabelValues(op, protocol.CodeResourceExhausted.String()).Inc()
		c.m.limitRefusals.WithLabelValues("records").Inc()
		return protocol.NewError(protocol.CodeResourceExhausted, "cluster %q holds %d records, the max-records limit; node %q is not registered", c.opts.ClusterID, n, rec.NodeID)
	}
	if op != "heartbeat" {
		if e := c.applyPersistedCordon(ctx, rec); e != nil {
			c.m.writes.WithLabelValues(op, e.Code.String()).Inc()
			return e
		}
	}
	res, err := c.store.UpsertNode(ctx, rec, c.opts.Timing.LeaseTTL, opts...)
	if err != nil {
		c.noteStoreError("upsert", 0, err)
		reply := c.storeWriteReply(op, rec.Key(), err)
		c.m.writes.WithLabelValues(op, reply.Code.String()).Inc()
		return reply
	}
	c.m.writes.WithLabelValues(op, res.Outcome.String()).Inc()
	c.noteAccepted(op, rec, res)
	if res.Decision == cluster.DecisionInsert {
		c.noteRegistered(rec.Key())
	}
	if res.Outcome == state.OutcomeAccepted && res.Decision != cluster.DecisionAdvance {
		// A new or restarted worker may change placement: tell subscribers soon.
		c.requestRefresh()
	}
	return c.ack(res)
}

// noteAccepted counts a renewal, or observes an accepted heartbeat's
// record age in the last view.
func (c *Coordinator) noteAccepted(op string, rec *cluster.Record, res state.WriteResult) {
	if res.Renewed {
		c.m.renewals.Inc()
		c.evidence.heard(rec.Key(), rec.IncarnationID, c.now().UnixMilli())
		return
	}
	if op != "heartbeat" || res.Outcome != state.OutcomeAccepted || res.Record == nil {
		return
	}
	if v := c.LastGood(); v != nil {
		if prev := v.record(rec.Key()); prev != nil && prev.IncarnationID == rec.IncarnationID && res.Record.UpdatedAtUnixMs >= prev.UpdatedAtUnixMs {
			c.m.heartbeatAge.Observe(float64(res.Record.UpdatedAtUnixMs-prev.UpdatedAtUnixMs) / 1000)
		}
	}
}

func (c *Coordinator) deregister(ctx context.Context, cn *conn, m *protocol.Deregister) protocol.Message {
	if e := c.authorizeWrite(cn, "deregister", m.Key()); e != nil {
		return e
	}
	if m.ClusterID != c.opts.ClusterID {
		c.m.writes.WithLabelValues("deregister", protocol.CodeInvalidArgument.String()).Inc()
		return protocol.NewError(protocol.CodeInvalidArgument, "clusterId %q: this coordinator serves cluster %q", m.ClusterID, c.opts.ClusterID)
	}
	if m.Role != cluster.RoleWorker {
		c.m.writes.WithLabelValues("deregister", protocol.CodeInvalidArgument.String()).Inc()
		return protocol.NewError(protocol.CodeInvalidArgument, "role %q: only workers deregister over the control protocol", m.Role)
	}
	res, err := c.store.RemoveNode(ctx, m.Key(), m.IncarnationID)
	if err != nil {
		c.noteStoreError("remove", 0, err)
		reply := c.storeWriteReply("deregister", m.Key(), err)
		c.m.writes.WithLabelValues("deregister", reply.Code.String()).Inc()
		return reply
	}
	c.m.writes.WithLabelValues("deregister", res.Outcome.String()).Inc()
	if res.Outcome == state.OutcomeAccepted {
		c.departed.note(m.Key(), m.IncarnationID, c.mono())
		c.requestRefresh()
	}
	return c.ack(res)
}

func (c *Coordinator) ack(res state.WriteResult) *protocol.Ack {
	a := &protocol.Ack{
		Outcome:             wireOutcome(res.Outcome),
		HeartbeatIntervalMs: uint32(c.opts.Timing.HeartbeatInterval.Milliseconds()),
		LeaseTTLMs:          uint32(c.opts.Timing.LeaseTTL.Milliseconds()),
		Revision:            res.Revision.String(),
	}
	if res.Record != nil {
		a.UpdatedAtUnixMs = res.Record.UpdatedAtUnixMs
	}
	return a
}

// clusterFull reports whether registering key would take the cluster past
// Limits.MaxRecords (see tracker.clusterFull).
func (c *Coordinator) clusterFull(key cluster.Key) (full bool, records int) {
	return c.view.clusterFull(key, c.ownKey(), c.opts.Limits.MaxRecords)
}

// noteRegistered counts a node this coordinator registered until a view
// read that began afterwards holds it (see clusterFull).
func (c *Coordinator) noteRegistered(key cluster.Key) {
	var started uint64
	if b := c.views.Load(); b != nil {
		started = b.started()
	}
	c.view.noteRegistered(key, started)
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
func (c *Coordinator) storeWriteReply(op string, key cluster.Key, err error) *protocol.Error {
	code := wireCode(err)
	if code != protocol.CodePermissionDenied && code != protocol.CodeUnauthenticated {
		return storeErrorReply(err)
	}
	if st := c.self.Status(); !st.Registered || st.Err != nil {
		return protocol.NewError(protocol.CodeNotReady, "coordinator %s cannot write to the state store yet (%s for its own record too: the store may still be starting); retry, possibly elsewhere", c.opts.NodeID, code)
	}
	if c.authzLog.Allow() {
		c.log.Warn("the state store refused a write the coordinator's own writes pass (logged at most once per 10s)", "op", op, "node", string(key.Role)+"/"+key.NodeID, "code", code.String(), "error", err)
	}
	return protocol.NewError(code, "%s of %s/%s: the state store refused the coordinator's write (%s): its store credential lacks permission to write this node's record (the %s backend's rules for the key or Lease of %s); the coordinator's log names the rule", op, key.Role, key.NodeID, code, c.opts.Store.Backend(), key.NodeID)
}
