package apiv1

import (
	"fmt"
	"maps"
	"strconv"

	"github.com/talonhq/talon/internal/cluster"
)

// NodeFromRecord converts a status record to its API form. observedAtUnixMs
// is the time against which the record's age is measured (the snapshot's
// observation time, on the store's clock) and t the timing that turns age
// into effective health. A record updated "after" observedAtUnixMs (clock
// skew) has age 0.
func NodeFromRecord(r *cluster.Record, observedAtUnixMs int64) Node {
	labels := maps.Clone(r.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	// The fields Node shares with Record by name and type are copied by
	// nodeFields (convert_gen.go, generated); the rest are derived here.
	n := nodeFields(r)
	n.Role = string(r.Role)
	n.HeartbeatAtUnixMs = r.HeartbeatAt()
	n.HeartbeatAgeMs = max(0, observedAtUnixMs-r.HeartbeatAt())
	n.Health = string(r.EffectiveHealth())
	n.ReportedHealth = string(r.Health)
	n.Labels = labels
	n.StatusAgeMs = max(0, observedAtUnixMs-r.UpdatedAtUnixMs)
	if r.StatusAtUnixMs > 0 {
		n.StatusAgeMs = max(0, observedAtUnixMs-r.StatusAtUnixMs)
	}
	if r.Cordoned() {
		n.Cordon = &NodeCordon{By: r.CordonedBy, AtUnixMs: r.CordonedAtUnixMs, Persist: r.CordonPersist}
	}
	if r.Revoked() {
		n.Revocation = &NodeRevocation{By: r.RevokedBy, Reason: r.RevokedReason}
	}
	return n
}

// FormatU64 renders a 64-bit value (a PlacementVersion or an HRW score) as
// the API does: 16 lowercase hex digits.
func FormatU64(v uint64) string { return fmt.Sprintf("%016x", v) }

// ParseU64 parses the API's 16-hex-digit form of a 64-bit value.
func ParseU64(s string) (uint64, error) {
	if len(s) != 16 {
		return 0, fmt.Errorf("%q: must be 16 lowercase hex digits", s)
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return 0, fmt.Errorf("%q: must be 16 lowercase hex digits", s)
		}
	}
	return strconv.ParseUint(s, 16, 64)
}

// HealthRank orders health states from best to worst, in the order of
// cluster.HealthStates (healthy, degraded, unhealthy, unknown); anything
// else ranks last. Every view that sorts by health uses it (talonctl,
// top) or pins its own copy to it in a test (the web UI).
func HealthRank(h string) int {
	states := cluster.HealthStates()
	for i, s := range states {
		if string(s) == h {
			return i
		}
	}
	return len(states)
}
