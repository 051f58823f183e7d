package coordinator

import (
	"context"
	"errors"
	"net"
	"time"

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
func (h *handler) attest(ctx context.Context, cn *conn, token []byte) protocol.Message {
	if h.opts.Attest == nil {
		return protocol.NewError(protocol.CodeInvalidArgument, "coordinator %s does not verify attestations (worker-attestation is off)", h.opts.NodeID)
	}
	if cn.attests++; cn.attests > maxAttests {
		h.m.limitRefusals.WithLabelValues("attests").Inc()
		return protocol.NewError(protocol.CodeResourceExhausted, "attest: at most %d attestations per connection; reconnect", maxAttests)
	}
	if cn.peer != nil && cn.peer.Role != pki.RoleWorker {
		h.m.authRefusals.WithLabelValues("attestation").Inc()
		return protocol.NewError(protocol.CodePermissionDenied, "attest: credential %s is not a worker's; only workers attest", cn.peer)
	}
	if ok, wait := h.attestRates.allow(attestPeer(cn), h.mono()); !ok {
		h.m.limitRefusals.WithLabelValues("attests_per_peer").Inc()
		e := protocol.NewError(protocol.CodeResourceExhausted, "attest: credential %s attested %d times in a row, more than a worker needs (one per connection); retry in %s",
			peerName(cn), attestBurst, wait.Round(time.Millisecond))
		e.Retryable = true
		return e
	}
	a, err := h.opts.Attest(ctx, token)
	switch {
	case errors.Is(err, ErrAttestationRefused):
		h.m.authRefusals.WithLabelValues("attestation").Inc()
		h.log.Warn("attestation refused", "remote", cn.nc.RemoteAddr().String(), "credential", peerName(cn), "error", err)
		return protocol.NewError(protocol.CodePermissionDenied, "attest: %v", err)
	case err != nil:
		h.log.Warn("attestation not verified: the verifier did not answer", "remote", cn.nc.RemoteAddr().String(), "error", err)
		return protocol.NewError(protocol.CodeUnavailable, "attest: the credential could not be verified now: %v", err)
	}
	if cn.peer != nil && cn.peer.NodeID != a.NodeID {
		h.m.authRefusals.WithLabelValues("attestation").Inc()
		h.log.Warn("attestation refused: the certificate and the platform name different nodes", "credential", cn.peer.String(), "attested", a.NodeID, "subject", a.Subject)
		return protocol.NewError(protocol.CodePermissionDenied, "attest: the token attests pod %q but the certificate names %s", a.NodeID, cn.peer)
	}
	cn.attested = &a
	h.log.Debug("connection attested", "node", a.NodeID, "subject", a.Subject, "expires", a.Expires)
	return &protocol.Attested{NodeID: a.NodeID, ExpiresUnixMs: a.Expires.UnixMilli()}
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
