package cluster

import "maps"

// NeedsStatusWrite reports whether an accepted heartbeat (DecisionAdvance)
// of incoming over stored must write the whole record, or may only renew
// the slot's liveness (its lease), leaving the stored record as it is
// (issue 36; Kubernetes' KEP-0009 splits node liveness from node status
// the same way). It must write when:
//
//   - statusEvery is 0 (every heartbeat writes, the behaviour before
//     renewals);
//   - the store marked the record late: an accepted update clears the mark;
//   - a field that placement, health or an operator's view depends on
//     changed (StatusChanged);
//   - the stored counters are statusEvery or more heartbeats old: counters
//     and fast-moving gauges are refreshed once per status interval.
//
// The rule reads no clock: the sequence counts heartbeats, so every
// coordinator decides alike for the same stored record.
func NeedsStatusWrite(stored, incoming *Record, statusEvery uint64) bool {
	switch {
	case statusEvery == 0 || stored == nil || stored.Late:
		return true
	case incoming.HeartbeatSeq < stored.HeartbeatSeq || incoming.HeartbeatSeq-stored.HeartbeatSeq >= statusEvery:
		return true
	}
	return StatusChanged(stored, incoming)
}

// StatusChanged reports whether incoming differs from stored in a field
// that placement, health or an operator's view of the process depends on:
// everything but the heartbeat sequence, the store-issued fields, the
// cumulative counters and the gauges that move with traffic (resident
// bytes, blocks, pages, in-flight loads). Capacity and the store's health
// count: they are configuration and health, not traffic.
func StatusChanged(stored, incoming *Record) bool {
	return identityChanged(stored, incoming) || healthChanged(stored, incoming) || !maps.Equal(stored.Labels, incoming.Labels)
}

// identityChanged compares what names the process and its build: the
// incarnation, addresses, version, feature level, start time, credential.
func identityChanged(a, b *Record) bool {
	return a.IncarnationID != b.IncarnationID || a.Address != b.Address || a.AdminAddress != b.AdminAddress ||
		a.Version != b.Version || a.FeatureLevel != b.FeatureLevel || a.StartTimeUnixMs != b.StartTimeUnixMs ||
		a.CredentialSerial != b.CredentialSerial
}

// healthChanged compares health, readiness, capacity and a coordinator's
// published placement.
func healthChanged(a, b *Record) bool {
	return a.Health != b.Health || a.Ready != b.Ready || a.NotReadyReason != b.NotReadyReason || a.Drained != b.Drained ||
		a.Capacity.CapacityBytes != b.Capacity.CapacityBytes || a.Capacity.StoreHealthy != b.Capacity.StoreHealthy ||
		a.PlacementVersion != b.PlacementVersion || a.EligibleWorkers != b.EligibleWorkers
}

// StatusEvery returns how many heartbeats one status interval spans
// (rounded up, at least 1), the statusEvery of NeedsStatusWrite; 0 when
// statusInterval is 0 (every heartbeat writes the record).
func (t Timing) StatusEvery() uint64 {
	if t.StatusInterval <= 0 || t.HeartbeatInterval <= 0 {
		return 0
	}
	return uint64(max((t.StatusInterval+t.HeartbeatInterval-1)/t.HeartbeatInterval, 1))
}
