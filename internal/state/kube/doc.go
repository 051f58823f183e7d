// Package kube is the Kubernetes backend of state.Store (ADR 0001 section
// 6): one namespaced coordination.k8s.io/v1 Lease per Talon process, no
// custom resource, no operator.
//
// Invariants:
//
//   - Naming. Slot (cluster, role, node) lives in the Lease named
//     LeaseName(key): "talon-<cluster>-<role>-<node>-<hash>", the readable
//     parts lowercased, other characters turned into '-', each cut to 63
//     bytes, and <hash> 16 hex digits of SHA-256 over the exact key. The
//     name is a valid DNS-1123 subdomain for every valid key and the hash
//     makes the mapping injective; a store that finds another slot's record
//     under a name (a hash collision) refuses to touch it.
//   - Labels select, annotations identify. Every Lease carries
//     app.kubernetes.io/managed-by=talon and talon.io/cluster, talon.io/role,
//     talon.io/node with LabelValue of the IDs (the ID itself when it is a
//     valid label value, else a readable prefix and a hash). Label values
//     may coincide, so the exact IDs are in annotations of the same keys and
//     every read filters by them. The record, in its versioned encoding
//     (cluster.Encode), is the talon.io/status annotation.
//   - Liveness. The Lease spec is the liveness authority: holderIdentity is
//     the incarnation ID, leaseDurationSeconds the lease TTL rounded up to
//     whole seconds, renewTime the writer's clock when it accepted the
//     update (shown by kubectl; never read for liveness), acquireTime the
//     start of the incarnation's tenure, leaseTransitions the number of
//     holder changes. No reader decides that a Lease has run out: every
//     Talon Lease a store lists is in its snapshot, whatever its age or its
//     renewTime, so two coordinators that read the same resourceVersion
//     see the same records. Time-based transitions come only from
//     coordinators, through ProposeTransition: a late mark (an UPDATE of
//     the status annotation that keeps the spec, so renewTime stays the
//     holder's) or an expiry (a DELETE), each with the resourceVersion the
//     proposer read as precondition, so a renewal in between wins and any
//     number of coordinators may propose.
//   - Concurrency control. Every write carries the resourceVersion of the
//     read it was decided on (metadata.resourceVersion on update, a
//     Preconditions.ResourceVersion on delete). A write that loses a race
//     re-reads the Lease and re-applies the rule (state.Write over
//     kubeSlots), at most Options.ConflictRetries times, then fails with
//     state.ErrConflict.
//     Duplicate and stale updates write nothing and do not renew the lease.
//   - Write cache. A store remembers the Lease it last wrote per slot and
//     decides the next heartbeat on it, writing with its resourceVersion:
//     if anyone changed the Lease since, the write fails with Conflict and
//     the store reads and re-decides. So the cache is only ever a guess
//     that costs a failed request when wrong; a duplicate or stale verdict
//     is never given on it (a restart, removal or expiry since would make
//     the rule accept), only on a fresh read. The cache keeps the record it
//     wrote beside the Lease, so a heartbeat decided on it decodes nothing.
//   - Revisions. A revision is a Kubernetes resourceVersion, kept opaque:
//     a Snapshot's is its LIST's resourceVersion (a LIST without
//     resourceVersion, which the API server serves as a quorum-consistent
//     read), an event's and a write's the Lease's resourceVersion after the
//     change, a removal's that of a consistent read after the DELETE. Watch
//     resumes from any of them; a resourceVersion the API server no longer
//     has ends the watch with state.ErrCompacted and the caller relists.
//   - Admission. At most Options.MaxInflightWrites Lease writes are in
//     flight per store: an UpsertNode or RemoveNode holds one slot from its
//     first request to its last (conflict retries included), so an
//     admitted write is never refused halfway. A write that finds no slot
//     free within Options.AdmissionWait fails before any request with an
//     error wrapping state.ErrUnavailable (retryable; the coordinator
//     answers the wire code unavailable) and nothing is written.
//     ProposeTransition is admitted like any write. Reads (Snapshot, CheckReady,
//     Watch) take no slot. Bounding the writes keeps the API server's queue,
//     and so the latency of the writes admitted, short under saturation.
//   - Errors. Every error wraps a state sentinel where one applies: 401
//     unauthenticated, 403 permission denied, 410 compacted, 409 after the
//     retries conflict, deadlines and server timeouts timeout, refused or
//     reset connections and 5xx unavailable.
//   - Credentials. The store never logs or formats its rest.Config; bearer
//     tokens and keys stay inside client-go, whose String method redacts
//     them.
//
// Lifecycle and concurrency: New validates Options and builds the client
// without contacting the API server. A Store is safe for concurrent use;
// it owns one goroutine per open Watch, and Close ends them and closes its
// idle connections. Every request is bounded by
// Options.RequestTimeout and the caller's context.
package kube
