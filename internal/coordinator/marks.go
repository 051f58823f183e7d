package coordinator

import (
	"context"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/protocol"
	"github.com/talonhq/talon/internal/state"
)

// instructions answers a worker's Instructions from the current view:
// the operator's cordon and a revocation, as the store holds them on the
// worker's record. Only the worker the connection's credential names may
// ask (and, with attestation on, only on a connection attested for it).
// Without its record in the view (not registered yet, or a view from
// before its registration) the answer is a retryable not_ready: the
// worker keeps what it has rather than lift a cordon on a view that does
// not know it.
func (c *Coordinator) instructions(cn *conn, m *protocol.Instructions) protocol.Message {
	key, e := c.authorizeWorkerAsk(cn, "instructions", m.ClusterID, m.NodeID)
	if e != nil {
		return e
	}
	v := c.LastGood()
	if !c.current() || v == nil {
		return protocol.NewError(protocol.CodeNotReady, "coordinator %s has no current cluster view; retry, possibly elsewhere", c.opts.NodeID)
	}
	r := v.record(key)
	if r == nil || r.IncarnationID != m.IncarnationID {
		return protocol.NewError(protocol.CodeNotReady, "coordinator %s's view has no record of %s incarnation %s yet; ask again after the next heartbeat", c.opts.NodeID, m.NodeID, m.IncarnationID)
	}
	return &protocol.Instructed{Cordoned: r.Cordoned(), Persist: r.CordonPersist, By: r.CordonedBy, AtUnixMs: r.CordonedAtUnixMs, Revoked: r.Revoked()}
}

// authorizeWorkerAsk checks a worker's question about itself (op:
// instructions, jobs): only the worker the connection's credential names
// may ask (and, with attestation on, only on a connection attested for
// it), and only of this coordinator's cluster. It returns the worker's
// slot, or the error to answer.
func (c *Coordinator) authorizeWorkerAsk(cn *conn, op, clusterID, nodeID string) (cluster.Key, *protocol.Error) {
	key := cluster.Key{ClusterID: clusterID, Role: cluster.RoleWorker, NodeID: nodeID}
	if e := c.authorizeIdentity(cn, op, key); e != nil {
		return key, e
	}
	if e := c.authorizeAttested(cn, op, key); e != nil {
		return key, e
	}
	if clusterID != c.opts.ClusterID {
		return key, protocol.NewError(protocol.CodeInvalidArgument, "clusterId %q: this coordinator serves cluster %q", clusterID, c.opts.ClusterID)
	}
	return key, nil
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

// revocation is one record a coordinator's deny list refuses.
type revocation struct {
	key         cluster.Key
	incarnation string
	entry       string
}

// revokeEvery is how often a coordinator compares its view with its deny
// list: a quarter of the heartbeat interval, so a deny-listed worker is
// out of placement everywhere within one heartbeat interval of the entry
// (the comparison, one store write, and every coordinator's next read).
func (c *Coordinator) revokeEvery() time.Duration { return c.opts.Timing.HeartbeatInterval / 4 }

// dueRevocations returns the records of v that this coordinator's deny
// list refuses and the store does not mark revoked yet, at most once per
// revokeEvery (nil otherwise, or without a deny list).
func (c *Coordinator) dueRevocations(v *View, now time.Time) []revocation {
	if c.opts.DenyRecord == nil {
		return nil
	}
	c.revokeMu.Lock()
	if now.Sub(c.revokeChecked) < c.revokeEvery() {
		c.revokeMu.Unlock()
		return nil
	}
	c.revokeChecked = now
	c.revokeMu.Unlock()
	var due []revocation
	for _, r := range v.Snapshot.Records {
		if r.Role != cluster.RoleWorker || r.Revoked() {
			continue
		}
		if entry, denied := c.opts.DenyRecord(r.Role, r.NodeID, r.CredentialSerial); denied {
			due = append(due, revocation{key: r.Key(), incarnation: r.IncarnationID, entry: entry})
		}
	}
	return due
}

// revoke marks one deny-listed incarnation revoked in the store, so that
// every coordinator leaves it out of placement at its next read.
func (c *Coordinator) revoke(ctx context.Context, r revocation) {
	rctx, cancel := context.WithTimeout(ctx, c.opts.RequestTimeout)
	defer cancel()
	res, err := c.store.SetMarks(rctx, r.key, r.incarnation, state.MarkChange{RevokedBy: c.opts.NodeID, RevokedReason: r.entry})
	if err != nil {
		c.noteStoreError("marks", 0, err)
		return
	}
	if res.Outcome == state.OutcomeAccepted {
		c.log.Warn("audit: deny-listed worker revoked in the store: out of placement on every coordinator", "audit", true,
			"node", r.key.NodeID, "incarnation", r.incarnation, "entry", r.entry)
		c.requestRefresh()
	}
}
