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
//     clock (Observations). It is for display only (ages shown to
//     operators): nothing decides liveness from it.
//   - Time-based transitions happen only in the store: by the backend's own
//     lease (etcd's lease, memory's TTL; Kubernetes has none) or by
//     ProposeTransition, a compare-and-swap against the version of the
//     record a coordinator watched go unchanged (TransitionLate stores it
//     with Late set and keeps its lease deadline; TransitionExpire deletes
//     it). A heartbeat or restart that lands first makes the proposal
//     stale; of any number of proposers exactly one applies it.
//   - RemoveNode deletes a record only when the incarnation matches, so a
//     late deregistration can never delete a restarted process's record.
//   - Snapshot is one linearizable read of every record the store holds for
//     a cluster, ordered by role then node ID, with an opaque Revision and
//     the observation time of the read. No reader filters records by its
//     own clock, so two coordinators that read the same revision see the
//     same records, late marks included, and compute the same eligible set.
//   - Every backend's writes are one loop, Write, over a small per-backend
//     primitive (Slots: read a slot, compare-and-swap it), with the rule
//     injected (Upsert, Remove, Propose).
//   - Watch delivers, in order and without gaps or duplicates, every change
//     after a revision. When that revision is no longer available it ends
//     with ErrCompacted; the caller takes a new Snapshot and watches again
//     from its revision.
//   - Revisions are opaque tokens: compare them for equality only.
//
// The read side is written once too. Reflector keeps a Mirror of a
// backend's records in step with the store: it lists, watches from the
// listing's revision, lists again after any watch failure with the one
// backoff, and lets a consistent read wait until it has applied a
// revision (the backend nudges it: an etcd progress request, a Kubernetes
// fence). Both caching backends run it with their List and Watch injected,
// and serve Store.Watch from the changes it applies: one watch per store,
// however many callers watch. A revision the store has compacted still
// ends a watch with ErrCompacted (the reflector asks the backend before
// replaying), and a lost watch ends every watcher with its cause.
//
// The fan-out is written once too. FanOut hands published events to the
// watchers, with a ring of recent events for a watcher whose revision is
// behind: a watch from a revision older than the ring ends with
// ErrCompacted, and a watcher that falls a ring's worth behind ends with
// ErrUnavailable, on every backend (the reflector's and the memory
// store's watches are both served by it).
//
// Every backend also implements EventLog, the cluster's shared log of node
// events, beside Store (the coordinator finds it by a type assertion): a
// bounded, leased ring, not a time series. An event's ID is deterministic
// (EventID), and AppendEvent creates it only if absent, so every
// coordinator may append what it observed and the log holds it once.
//
// Backends that can say how full their database is and which alarms it
// raised (etcd) also implement CapacityReporter; it is not part of Store.
//
// Every method takes a context and honours its deadline; a store is safe for
// concurrent use by many goroutines.
package state
