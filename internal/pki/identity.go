package pki

import (
	"crypto/x509"
	"errors"
	"fmt"
	"slices"

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

// Identity is who a certificate speaks for.
type Identity struct {
	Role   Role
	NodeID string
}

// String returns "role/node-id".
func (id Identity) String() string { return string(id.Role) + "/" + id.NodeID }

// IdentityOf returns the identity cert names: CommonName is the node ID and
// exactly one OrganizationalUnit is a role. Errors wrap ErrIdentity.
func IdentityOf(cert *x509.Certificate) (Identity, error) {
	var roles []Role
	for _, ou := range cert.Subject.OrganizationalUnit {
		if slices.Contains(Roles, Role(ou)) && !slices.Contains(roles, Role(ou)) {
			roles = append(roles, Role(ou))
		}
	}
	switch len(roles) {
	case 0:
		return Identity{}, fmt.Errorf("%w: subject %q has no role: want OU=coordinator, worker or client", ErrIdentity, cert.Subject)
	case 1:
	default:
		return Identity{}, fmt.Errorf("%w: subject %q names %d roles %v: want exactly one", ErrIdentity, cert.Subject, len(roles), roles)
	}
	id := Identity{Role: roles[0], NodeID: cert.Subject.CommonName}
	if err := cluster.ValidateID("certificate CN (node ID)", id.NodeID); err != nil {
		return Identity{}, fmt.Errorf("%w: %w", ErrIdentity, err)
	}
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
