package coordinator

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/pki"
	"github.com/talonhq/talon/internal/protocol"
)

// maxAttests bounds the Attest requests of one connection: a worker
// attests a connection once (its client dials anew before the attestation
// ends), so more is someone making the verifier work.
const maxAttests = 4

// attest verifies an Attest's token and binds the connection to the node
// it attests. With mutual TLS only a worker credential may attest, and
// only as the node its certificate names, so the certificate and the
// platform must agree on who the peer is.
func (c *Coordinator) attest(ctx context.Context, cn *conn, token []byte) protocol.Message {
	if c.opts.Attest == nil {
		return protocol.NewError(protocol.CodeInvalidArgument, "coordinator %s does not verify attestations (worker-attestation is off)", c.opts.NodeID)
	}
	if cn.attests++; cn.attests > maxAttests {
		c.m.limitRefusals.WithLabelValues("attests").Inc()
		return protocol.NewError(protocol.CodeResourceExhausted, "attest: at most %d attestations per connection; reconnect", maxAttests)
	}
	if cn.peer != nil && cn.peer.Role != pki.RoleWorker {
		c.m.authRefusals.WithLabelValues("attestation").Inc()
		return protocol.NewError(protocol.CodePermissionDenied, "attest: credential %s is not a worker's; only workers attest", cn.peer)
	}
	if ok, wait := c.attestRates.allow(attestPeer(cn), c.mono()); !ok {
		c.m.limitRefusals.WithLabelValues("attests_per_peer").Inc()
		e := protocol.NewError(protocol.CodeResourceExhausted, "attest: credential %s attested %d times in a row, more than a worker needs (one per connection); retry in %s",
			peerName(cn), attestBurst, wait.Round(time.Millisecond))
		e.Retryable = true
		return e
	}
	a, err := c.opts.Attest(ctx, token)
	switch {
	case errors.Is(err, ErrAttestationRefused):
		c.m.authRefusals.WithLabelValues("attestation").Inc()
		c.log.Warn("attestation refused", "remote", cn.nc.RemoteAddr().String(), "credential", peerName(cn), "error", err)
		return protocol.NewError(protocol.CodePermissionDenied, "attest: %v", err)
	case err != nil:
		c.log.Warn("attestation not verified: the verifier did not answer", "remote", cn.nc.RemoteAddr().String(), "error", err)
		return protocol.NewError(protocol.CodeUnavailable, "attest: the credential could not be verified now: %v", err)
	}
	if cn.peer != nil && cn.peer.NodeID != a.NodeID {
		c.m.authRefusals.WithLabelValues("attestation").Inc()
		c.log.Warn("attestation refused: the certificate and the platform name different nodes", "credential", cn.peer.String(), "attested", a.NodeID, "subject", a.Subject)
		return protocol.NewError(protocol.CodePermissionDenied, "attest: the token attests pod %q but the certificate names %s", a.NodeID, cn.peer)
	}
	cn.attested = &a
	c.log.Debug("connection attested", "node", a.NodeID, "subject", a.Subject, "expires", a.Expires)
	return &protocol.Attested{NodeID: a.NodeID, ExpiresUnixMs: a.Expires.UnixMilli()}
}

// authorizeAttested allows a write for key, when attestation is on, only
// on a connection attested for key's node and not expired.
func (c *Coordinator) authorizeAttested(cn *conn, op string, key cluster.Key) *protocol.Error {
	if c.opts.Attest == nil {
		return nil
	}
	a := cn.attested
	var e *protocol.Error
	switch {
	case a == nil:
		e = protocol.NewError(protocol.CodePermissionDenied, "%s of %s/%s: the connection is not attested; this coordinator requires a platform credential (worker --attestation-token-file, a projected service account token)", op, key.Role, key.NodeID)
	case !c.now().Before(a.Expires):
		e = protocol.NewError(protocol.CodePermissionDenied, "%s of %s/%s: the connection's attestation expired at %s; attest again", op, key.Role, key.NodeID, a.Expires.UTC().Format(time.RFC3339))
	case a.NodeID != key.NodeID || key.Role != cluster.RoleWorker:
		e = protocol.NewError(protocol.CodePermissionDenied, "%s of %s/%s: the connection is attested as pod %q (%s); it may write only node %q", op, key.Role, key.NodeID, a.NodeID, a.Subject, a.NodeID)
	default:
		return nil
	}
	c.m.authRefusals.WithLabelValues("not_attested").Inc()
	c.m.writes.WithLabelValues(op, protocol.CodePermissionDenied.String()).Inc()
	c.log.Warn("control write refused: not attested for this node", "op", op, "node", string(key.Role)+"/"+key.NodeID, "remote", cn.nc.RemoteAddr().String(), "reason", e.Message)
	return e
}

// attestPeer is who an attestation counts against: the TLS identity, or
// the remote host without TLS.
func attestPeer(cn *conn) string {
	if cn.peer != nil {
		return cn.peer.String()
	}
	host, _, err := net.SplitHostPort(cn.nc.RemoteAddr().String())
	if err != nil {
		return cn.nc.RemoteAddr().String()
	}
	return host
}

// peerName is the TLS identity of cn, or "(none)".
func peerName(cn *conn) string {
	if cn.peer == nil {
		return "(none)"
	}
	return cn.peer.String()
}
