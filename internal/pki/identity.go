package pki

import (
	"crypto/x509"
	"encoding/asn1"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/talonhq/talon/internal/cluster"
)

// Role is what a credential may do.
type Role string

// Roles. Coordinator and worker match cluster's record roles.
const (
	RoleCoordinator Role = Role(cluster.RoleCoordinator)
	RoleWorker      Role = Role(cluster.RoleWorker)
	// RoleClient may look up placement and read data; it writes nothing.
	RoleClient Role = "client"
)

// Roles lists the recognised roles.
var Roles = []Role{RoleCoordinator, RoleWorker, RoleClient}

// ErrIdentity: a certificate names no valid identity, or not the expected one.
var ErrIdentity = errors.New("certificate identity")

// Identity is who a certificate speaks for: a role and node of one
// cluster.
type Identity struct {
	Role   Role
	NodeID string
	// Cluster is the cluster ID the certificate is bound to (its SPIFFE
	// ID, see URI); empty for a certificate issued without one, which a
	// Source bound to a cluster refuses.
	Cluster string
}

// String returns "role/node-id".
func (id Identity) String() string { return string(id.Role) + "/" + id.NodeID }

// TrustDomain is the trust domain of the SPIFFE IDs Talon issues. Talon
// trusts its CA, not the domain; the domain only makes the URI a valid
// SPIFFE ID.
const TrustDomain = "talon"

// URI returns id's SPIFFE ID, spiffe://talon/talon/CLUSTER/ROLE/NODE: the
// URI subject alternative name that binds a certificate to its cluster.
func (id Identity) URI() *url.URL {
	return &url.URL{Scheme: "spiffe", Host: TrustDomain, Path: "/talon/" + id.Cluster + "/" + string(id.Role) + "/" + id.NodeID}
}

// oidCommonName is the X.501 attribute type of a common name.
var oidCommonName = asn1.ObjectIdentifier{2, 5, 4, 3}

// IdentityOf returns the identity cert names. A certificate names exactly
// one identity: one CommonName (the node ID), one OrganizationalUnit (the
// role) and at most one Talon SPIFFE ID (spiffe://DOMAIN/talon/CLUSTER/
// ROLE/NODE), which must agree with them and gives the cluster. Several
// common names, units or Talon SPIFFE IDs are refused: which one counts
// would depend on the reader. Errors wrap ErrIdentity.
func IdentityOf(cert *x509.Certificate) (Identity, error) {
	cns := 0
	for _, a := range cert.Subject.Names {
		if a.Type.Equal(oidCommonName) {
			cns++
		}
	}
	if cns > 1 {
		return Identity{}, fmt.Errorf("%w: subject %q names %d common names: want exactly one (the node ID)", ErrIdentity, cert.Subject, cns)
	}
	switch ous := cert.Subject.OrganizationalUnit; {
	case len(ous) > 1:
		return Identity{}, fmt.Errorf("%w: subject %q names %d organizational units %v: want exactly one (the role)", ErrIdentity, cert.Subject, len(ous), ous)
	case len(ous) == 0 || !slices.Contains(Roles, Role(ous[0])):
		return Identity{}, fmt.Errorf("%w: subject %q has no role: want OU=coordinator, worker or client", ErrIdentity, cert.Subject)
	}
	id := Identity{Role: Role(cert.Subject.OrganizationalUnit[0]), NodeID: cert.Subject.CommonName}
	if err := cluster.ValidateID("certificate CN (node ID)", id.NodeID); err != nil {
		return Identity{}, fmt.Errorf("%w: %w", ErrIdentity, err)
	}
	var ids []*url.URL
	for _, u := range cert.URIs {
		if u.Scheme == "spiffe" && strings.HasPrefix(u.Path, "/talon/") {
			ids = append(ids, u)
		}
	}
	switch len(ids) {
	case 0:
		return id, nil
	case 1:
	default:
		return Identity{}, fmt.Errorf("%w: certificate %q names %d Talon SPIFFE IDs: want at most one", ErrIdentity, cert.Subject, len(ids))
	}
	parts := strings.Split(strings.TrimPrefix(ids[0].Path, "/talon/"), "/")
	if len(parts) != 3 || parts[1] != string(id.Role) || parts[2] != id.NodeID {
		return Identity{}, fmt.Errorf("%w: SPIFFE ID %s does not name the subject's %s: want spiffe://%s/talon/CLUSTER/%s/%s", ErrIdentity, ids[0], id, TrustDomain, id.Role, id.NodeID)
	}
	if err := cluster.ValidateID("certificate SPIFFE ID cluster", parts[0]); err != nil {
		return Identity{}, fmt.Errorf("%w: %w", ErrIdentity, err)
	}
	id.Cluster = parts[0]
	return id, nil
}

// Expect is a check of a peer's identity.
type Expect struct {
	// Roles the peer may have; empty means any.
	Roles []Role
	// NodeID the peer must have; empty means any.
	NodeID string
}

// Check returns nil when id satisfies e, else an error wrapping
// ErrIdentity that names both.
func (e Expect) Check(id Identity) error {
	if len(e.Roles) > 0 && !slices.Contains(e.Roles, id.Role) {
		return fmt.Errorf("%w: peer is %s, want role %v", ErrIdentity, id, e.Roles)
	}
	if e.NodeID != "" && id.NodeID != e.NodeID {
		return fmt.Errorf("%w: peer is %s, want node %q", ErrIdentity, id, e.NodeID)
	}
	return nil
}
