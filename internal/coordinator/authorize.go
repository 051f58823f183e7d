package coordinator

import (
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/pki"
	"github.com/talonhq/talon/internal/protocol"
)

// Who may write what on the control protocol: a worker's writes and
// questions are allowed only for the node its credential names (mutual
// TLS), and, with attestation on, only on a connection attested for that
// node (attest.go).

// authorizeWrite allows a Register, Heartbeat or Deregister for key only
// from the worker whose certificate names key's node (identity binds
// writes; without TLS, insecure-control-plane, every identity passes), on
// a connection attested for that node when attestation is on, and within
// the node's write rate. A refusal is a permission_denied Error, or
// a retryable resource_exhausted one with the time to wait past the rate;
// nothing is stored.
func (h *handler) authorizeWrite(cn *conn, op string, key cluster.Key) *protocol.Error {
	if e := h.authorizeIdentity(cn, op, key); e != nil {
		return e
	}
	if e := h.authorizeAttested(cn, op, key); e != nil {
		return e
	}
	if ok, wait := h.rates.allow(key.NodeID, h.mono()); !ok {
		h.m.limitRefusals.WithLabelValues("write_rate").Inc()
		h.m.writes.WithLabelValues(op, protocol.CodeResourceExhausted.String()).Inc()
		e := protocol.NewError(protocol.CodeResourceExhausted, "%s of %s/%s: over the write rate of %d per heartbeat-interval %s (burst %d, max-node-writes-per-interval); retry in %s",
			op, key.Role, key.NodeID, h.rates.perInterval, h.opts.Timing.HeartbeatInterval, h.rates.burst, wait.Round(time.Millisecond))
		e.Retryable = true
		return e
	}
	return nil
}

// authorizeIdentity allows a write for key only from the worker whose
// certificate names key's node.
func (h *handler) authorizeIdentity(cn *conn, op string, key cluster.Key) *protocol.Error {
	if cn.peer == nil {
		return nil
	}
	id := *cn.peer
	if id.Role == pki.RoleWorker && key.Role == cluster.RoleWorker && id.NodeID == key.NodeID {
		return nil
	}
	h.m.authRefusals.WithLabelValues("permission_denied").Inc()
	h.m.writes.WithLabelValues(op, protocol.CodePermissionDenied.String()).Inc()
	h.log.Warn("control write refused: the credential does not name this node", "op", op, "credential", id.String(), "node", string(key.Role)+"/"+key.NodeID, "remote", cn.nc.RemoteAddr().String())
	if id.Role != pki.RoleWorker {
		return protocol.NewError(protocol.CodePermissionDenied, "%s: credential %s may not write records; only a worker credential may %s, for its own node", op, id, op)
	}
	return protocol.NewError(protocol.CodePermissionDenied, "%s of %s/%s: credential %s may %s only its own node", op, key.Role, key.NodeID, id, op)
}

// authorizeAttested allows a write for key, when attestation is on, only
// on a connection attested for key's node and not expired.
func (h *handler) authorizeAttested(cn *conn, op string, key cluster.Key) *protocol.Error {
	if h.opts.Attest == nil {
		return nil
	}
	a := cn.attested
	var e *protocol.Error
	switch {
	case a == nil:
		e = protocol.NewError(protocol.CodePermissionDenied, "%s of %s/%s: the connection is not attested; this coordinator requires a platform credential (worker --attestation-token-file, a projected service account token)", op, key.Role, key.NodeID)
	case !h.now().Before(a.Expires):
		e = protocol.NewError(protocol.CodePermissionDenied, "%s of %s/%s: the connection's attestation expired at %s; attest again", op, key.Role, key.NodeID, a.Expires.UTC().Format(time.RFC3339))
	case a.NodeID != key.NodeID || key.Role != cluster.RoleWorker:
		e = protocol.NewError(protocol.CodePermissionDenied, "%s of %s/%s: the connection is attested as pod %q (%s); it may write only node %q", op, key.Role, key.NodeID, a.NodeID, a.Subject, a.NodeID)
	default:
		return nil
	}
	h.m.authRefusals.WithLabelValues("not_attested").Inc()
	h.m.writes.WithLabelValues(op, protocol.CodePermissionDenied.String()).Inc()
	h.log.Warn("control write refused: not attested for this node", "op", op, "node", string(key.Role)+"/"+key.NodeID, "remote", cn.nc.RemoteAddr().String(), "reason", e.Message)
	return e
}

// authorizeWorkerAsk checks a worker's question about itself (op:
// instructions, jobs): only the worker the connection's credential names
// may ask (and, with attestation on, only on a connection attested for
// it), and only of this coordinator's cluster. It returns the worker's
// slot, or the error to answer.
func (h *handler) authorizeWorkerAsk(cn *conn, op, clusterID, nodeID string) (cluster.Key, *protocol.Error) {
	key := cluster.Key{ClusterID: clusterID, Role: cluster.RoleWorker, NodeID: nodeID}
	if e := h.authorizeIdentity(cn, op, key); e != nil {
		return key, e
	}
	if e := h.authorizeAttested(cn, op, key); e != nil {
		return key, e
	}
	if clusterID != h.opts.ClusterID {
		return key, protocol.NewError(protocol.CodeInvalidArgument, "clusterId %q: this coordinator serves cluster %q", clusterID, h.opts.ClusterID)
	}
	return key, nil
}
