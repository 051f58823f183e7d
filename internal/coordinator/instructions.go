package coordinator

import (
	"github.com/talonhq/talon/internal/protocol"
)

// instructions answers a worker's Instructions from the current view:
// the operator's cordon and a revocation, as the store holds them on the
// worker's record. Only the worker the connection's credential names may
// ask (and, with attestation on, only on a connection attested for it).
// Without its record in the view (not registered yet, or a view from
// before its registration) the answer is a retryable not_ready: the
// worker keeps what it has rather than lift a cordon on a view that does
// not know it.
func (h *handler) instructions(cn *conn, m *protocol.Instructions) protocol.Message {
	key, e := h.authorizeWorkerAsk(cn, "instructions", m.ClusterID, m.NodeID)
	if e != nil {
		return e
	}
	v := h.LastGood()
	if !h.current() || v == nil {
		return protocol.NewError(protocol.CodeNotReady, "coordinator %s has no current cluster view; retry, possibly elsewhere", h.opts.NodeID)
	}
	r := v.record(key)
	if r == nil || r.IncarnationID != m.IncarnationID {
		return protocol.NewError(protocol.CodeNotReady, "coordinator %s's view has no record of %s incarnation %s yet; ask again after the next heartbeat", h.opts.NodeID, m.NodeID, m.IncarnationID)
	}
	return &protocol.Instructed{Cordoned: r.Cordoned(), Persist: r.CordonPersist, By: r.CordonedBy, AtUnixMs: r.CordonedAtUnixMs, Revoked: r.Revoked()}
}

// credentialSerial is the serial number of the connection's certificate,
// lower-case hex, or "" without mutual TLS: what the coordinator stamps on
// a record it writes (cluster.Record.CredentialSerial), never what the
// process says.
func (cn *conn) credentialSerial() string {
	if cn.peerCert == nil || cn.peerCert.SerialNumber == nil {
		return ""
	}
	return cn.peerCert.SerialNumber.Text(16)
}
