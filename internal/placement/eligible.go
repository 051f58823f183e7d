package placement

import (
	"cmp"
	"slices"
	"strings"

	"github.com/talonhq/talon/internal/cluster"
)

// Reason says why a worker record is not placement-eligible.
type Reason string

// Exclusion reasons, in precedence order: a record that qualifies for
// several carries the first.
const (
	// ReasonRevoked: a coordinator found the incarnation's credential on
	// its deny list (Record.RevokedBy): out of placement everywhere.
	ReasonRevoked Reason = "revoked"
	// ReasonUnhealthy: the effective health is unhealthy (reported so, or
	// marked late by the store: cluster.Record.Late) or unknown.
	ReasonUnhealthy Reason = "unhealthy"
	// ReasonNotReady: healthy or degraded but reporting ready=false, that is
	// deliberately out of service.
	ReasonNotReady Reason = "not_ready"
	// ReasonCordoned: an operator's cordon in the store (Record.CordonedBy),
	// whatever the worker reports.
	ReasonCordoned Reason = "cordoned"
)

// Exclusion is a worker left out of placement and why.
type Exclusion struct {
	NodeID string
	Reason Reason
	// Health is the effective health (cluster.Record.EffectiveHealth), so an explanation can tell a worker
	// that reported unknown from one that reported unhealthy or went silent.
	Health cluster.Health
}

// Eligible splits the worker records of a snapshot into the nodes that may
// own keys and the ones that may not. It reads the records alone, no clock:
// two coordinators that read the same revision get the same lists.
// Records of other roles (coordinators) and nil records appear in neither
// list. Both lists are sorted by node ID (then address, then reason, so the
// output does not depend on input order even for malformed input).
//
// A worker is eligible when its effective health
// is healthy or degraded, and it reports ready. Degraded workers stay
// eligible: degraded means "serving, with reduced capacity or a failing
// dependency", and removing them would move their keys for a condition that
// does not stop them serving. Unknown health is not eligible and is reported
// as ReasonUnhealthy: a process that cannot vouch for itself gets no new
// keys (fail closed), and a record with a health value this build does not
// know is treated the same way. A record the store marks late is unhealthy
// whatever the process last claimed (cluster.Record.EffectiveHealth);
// an expired record is not in the store at all. An operator's cordon
// (the store's mark) excludes a worker at once, and its lifting includes
// it at once: a worker not ready only because it still reports the
// cordon the store no longer holds (cluster.Record.UncordonPending) is
// eligible, since it serves what is routed to it all along.
//
// Eligible does not check for duplicate node IDs; New rejects them.
func Eligible(records []*cluster.Record) (eligible []Node, excluded []Exclusion) {
	for _, r := range records {
		if r == nil || r.Role != cluster.RoleWorker {
			continue
		}
		health := r.EffectiveHealth()
		switch {
		case r.Revoked():
			excluded = append(excluded, Exclusion{NodeID: r.NodeID, Reason: ReasonRevoked, Health: health})
		case health != cluster.HealthHealthy && health != cluster.HealthDegraded:
			excluded = append(excluded, Exclusion{NodeID: r.NodeID, Reason: ReasonUnhealthy, Health: health})
		case r.Cordoned():
			excluded = append(excluded, Exclusion{NodeID: r.NodeID, Reason: ReasonCordoned, Health: health})
		case !r.Ready && !r.UncordonPending():
			excluded = append(excluded, Exclusion{NodeID: r.NodeID, Reason: ReasonNotReady, Health: health})
		default:
			eligible = append(eligible, Node{ID: r.NodeID, Address: r.Address, Role: r.Role})
		}
	}
	slices.SortFunc(eligible, compareNodes)
	slices.SortFunc(excluded, func(a, b Exclusion) int {
		return cmp.Or(cmp.Compare(a.NodeID, b.NodeID), cmp.Compare(a.Reason, b.Reason), cmp.Compare(a.Health, b.Health))
	})
	return eligible, excluded
}

// compareNodes orders nodes canonically: by ID, then (only relevant for the
// duplicates New rejects) by address and role.
func compareNodes(a, b Node) int {
	if c := strings.Compare(a.ID, b.ID); c != 0 {
		return c // cmp.Or would evaluate the other comparisons too
	}
	return cmp.Or(strings.Compare(a.Address, b.Address), cmp.Compare(a.Role, b.Role))
}
