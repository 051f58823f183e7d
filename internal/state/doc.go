// Package state defines Store, the backend-neutral cluster-state contract of
// ADR 0001 section 4, and the sentinel errors every backend maps its own
// failures onto. Backends live in the subpackages memory, etcd and kube; the
// reusable contract suite every backend passes is statetest.
//
// Contract, in short:
//
//   - UpsertNode applies cluster.Order atomically against the stored record
//     (a registration unless the Heartbeat option is given): an accepted
//     update writes cluster.Next's record, with a store-issued generation,
//     and refreshes the record's lease; duplicate, stale, superseded and
//     unregistered updates change nothing and are not errors.
//   - Records returned by any method carry in UpdatedAtUnixMs the time this
//     store (this coordinator) first saw their current version, on its own
//     clock (Observations): ages never compare two hosts' clocks.
//   - RemoveNode deletes a record only when the incarnation matches, so a
//     late deregistration can never delete a restarted process's record.
//   - Snapshot is one linearizable read of every non-expired record of a
//     cluster, ordered by role then node ID, with an opaque Revision and the
//     observation time used to compute heartbeat ages.
//   - Watch delivers, in order and without gaps or duplicates, every change
//     after a revision. When that revision is no longer available it ends
//     with ErrCompacted; the caller takes a new Snapshot and watches again
//     from its revision.
//   - Revisions are opaque tokens: compare them for equality only.
//
// Every method takes a context and honours its deadline; a store is safe for
// concurrent use by many goroutines.
package state
