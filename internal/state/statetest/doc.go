// Package statetest is the contract suite every state.Store backend passes
// (ADR 0001 section 4). A backend's tests call Run with a Factory that
// builds a Harness: the store, a way to move its clock, a short lease, a way
// to cause each Fault for real and a way to compact its history.
//
// The suite cannot be passed by omission: every case needs every hook, and a
// missing hook fails the case instead of skipping it. Cases use cluster IDs
// unique to the case, run one after another, and bound every wait with a
// wall-clock deadline, so a harness may share one server across cases.
//
// What it checks: the ordering rule with its outcomes and decisions,
// restarts, cluster and role identity, per-record leases and their expiry,
// removal by incarnation, snapshot order, revisions and observation time,
// ordered watches that resume without gaps or duplicates, compaction
// recovery, validation sentinels, fault sentinels and their retry class,
// and, with github.com/anishathalye/porcupine, that concurrent interleaved,
// duplicated and reordered heartbeats with concurrent snapshots form a
// linearizable history of the ordering rule.
package statetest
