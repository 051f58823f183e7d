package app

import (
	"crypto/tls"
	"crypto/x509"
	"github.com/talonhq/talon/internal/cluster"
	"net/http"

	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"log/slog"

	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/pki"
)

// planeTLS is a process's mutual TLS for the control and data planes; the
// zero value (insecure-control-plane) serves and dials plain TCP.
type planeTLS struct {
	src *pki.Source
}

// loadPlaneTLS loads cfg's credential and checks that it names this
// process: cluster, role and node ID, so one process's certificate cannot
// be mounted into another by mistake, and a certificate of another
// cluster sharing the CA is refused, here and from every peer. Without TLS it logs the insecure
// choice once.
func loadPlaneTLS(cfg *config.Config, log *slog.Logger) (planeTLS, error) {
	if !cfg.TLS.Enabled() {
		log.Warn("insecure-control-plane: the control and data ports run without TLS; anyone who can reach them can register, heartbeat or deregister any worker and read cached data (not for production)")
		return planeTLS{}, nil
	}
	src, err := pki.Load(pki.Files{CAFile: cfg.TLS.CAFile, CertFile: cfg.TLS.CertFile, KeyFile: cfg.TLS.KeyFile, DenyFile: cfg.TLS.DenyFile}, pki.Options{ClusterID: cfg.ClusterID, Logger: log.With("component", "tls")})
	if err != nil {
		return planeTLS{}, &usageError{err}
	}
	id, err := src.Identity()
	if err != nil {
		return planeTLS{}, &usageError{fmt.Errorf("tls-cert-file %q: %w", cfg.TLS.CertFile, err)}
	}
	want := pki.Identity{Role: pki.Role(cfg.Role), NodeID: cfg.NodeID, Cluster: cfg.ClusterID}
	if id != want {
		return planeTLS{}, &usageError{fmt.Errorf("tls-cert-file %q names %s but this process is %s: each process needs its own certificate (CN = node ID, OU = role, and the SPIFFE ID of its cluster: talon pki issue --cluster-id %s)", cfg.TLS.CertFile, id, want, cfg.ClusterID)}
	}
	return planeTLS{src: src}, nil
}

// server returns the configuration of the control or data listener: any
// identity from the CA may connect (writes are authorized per request).
func (p planeTLS) server() *tls.Config {
	if p.src == nil {
		return nil
	}
	return p.src.ServerConfig(pki.Expect{})
}

// toCoordinators returns the client configuration for dialling
// coordinators.
func (p planeTLS) toCoordinators() *tls.Config {
	if p.src == nil {
		return nil
	}
	return p.src.ClientConfig(pki.Expect{Roles: []pki.Role{pki.RoleCoordinator}})
}

// revoked reports whether a verified peer's certificate is on the deny
// list now; nil without TLS.
func (p planeTLS) revoked() func(*x509.Certificate) bool {
	if p.src == nil {
		return nil
	}
	return p.src.Denied
}

// denyRecord reports whether the deny list refuses a record's
// credential; nil without TLS.
func (p planeTLS) denyRecord() func(cluster.Role, string, string) (string, bool) {
	if p.src == nil {
		return nil
	}
	return p.src.DeniesRecord
}

// registerDenials exports the deny list's refusals on reg.
func (p planeTLS) registerDenials(reg prometheus.Registerer) error {
	if p.src == nil {
		return nil
	}
	return reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "talon_tls_denied_total",
		Help: "Peers refused because their certificate is on tls-deny-file: handshakes on every port and requests on connections established before the entry.",
	}, func() float64 { return float64(p.src.Denials()) }))
}

// denyGuard refuses, with 403 and the connection closed, a request whose
// TLS peer is on the deny list (a connection established before the
// entry was added); nil revoked passes every request.
func denyGuard(next http.Handler, revoked func(*x509.Certificate) bool) http.Handler {
	if revoked == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 && revoked(r.TLS.PeerCertificates[0]) {
			w.Header().Set("Connection", "close")
			http.Error(w, "credential revoked: the certificate is on this worker's deny list", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}
