// Package kube is the Kubernetes backend of state.Store (ADR 0001 section
// 6): one namespaced coordination.k8s.io/v1 Lease per Talon process, no
// custom resource, no operator. The shared event log (state.EventLog) is
// core/v1 Events in the same namespace, one per node event (events.go).
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
//     coordinators, through ProposeTransition: a late mark (a write of
//     the status annotation that keeps the spec, so renewTime stays the
//     holder's) or an expiry (a DELETE), each with the resourceVersion the
//     proposer read as precondition, so a renewal in between wins and any
//     number of coordinators may propose.
//   - Renewals (issue 36, renew.go). A heartbeat that changes nothing
//     cluster.NeedsStatusWrite counts, within a status interval
//     (state.StatusEvery) of the record in talon.io/status, is one small
//     JSON merge patch: spec.renewTime and its sequence in
//     talon.io/renew-seq. Every read decodes a Lease's record at the
//     larger of the status's sequence and talon.io/renew-seq, so each
//     renewal is a new version (incarnation, sequence) that every
//     coordinator sees at the same resourceVersion: liveness, the
//     ordering rule and a stale proposal work as for a full write. A full
//     write (a status change or interval, a late mark, a registration)
//     writes the record at that sequence and removes talon.io/renew-seq.
//     state.MinSilence needs no check here: no renewal is hidden from the
//     version.
//   - Concurrency control. Every write carries the resourceVersion of the
//     read it was decided on (metadata.resourceVersion in every merge
//     patch, which sends only what changed; a Preconditions.ResourceVersion
//     on delete). A write that loses a race
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
//   - Revisions. A revision is a Kubernetes resourceVersion, kept opaque
//     to callers: a Snapshot's is the snapshot cache's revision (below) or,
//     from a LIST, that LIST's resourceVersion (a LIST without
//     resourceVersion, which the API server serves as a quorum-consistent
//     read), an event's and a write's the Lease's resourceVersion after the
//     change, a removal's that of a consistent read after the DELETE. Watch
//     resumes from any of them; a resourceVersion the API server no longer
//     has ends the watch with state.ErrCompacted and the caller relists.
//     Only the snapshot cache compares resourceVersions, as the decimal
//     etcd revisions every API server backed by etcd returns; when one is
//     not a decimal integer, snapshots are LISTs.
//   - Admission. At most Options.MaxInflightWrites Lease writes are in
//     flight per store: an UpsertNode or RemoveNode holds one slot from its
//     first request to its last (conflict retries included), so an
//     admitted write is never refused halfway. A write that finds no slot
//     free within Options.AdmissionWait fails before any request with an
//     error wrapping state.ErrUnavailable (retryable; the coordinator
//     answers the wire code unavailable) and nothing is written.
//     ProposeTransition is admitted like any write. Reads (Snapshot, CheckReady,
//     Watch) and fence writes take no slot. Bounding the writes keeps the API server's queue,
//     and so the latency of the writes admitted, short under saturation.
//   - Errors. Every error wraps a state sentinel where one applies: 401
//     unauthenticated, 403 permission denied, 410 compacted, 409 after the
//     retries conflict, deadlines and server timeouts timeout, refused or
//     reset connections and 5xx unavailable.
//   - Credentials. The store never logs or formats its rest.Config; bearer
//     tokens and keys stay inside client-go, whose String method redacts
//     them.
//
// # Snapshots and the watch-fed cache
//
// Without the cache (Options.CacheSnapshots off), a Snapshot is one
// consistent LIST of the cluster's Leases: every Lease, 1.5 KB of status
// each, read, sent, decoded per lookup batch.
//
// With it (the coordinator turns it on), the first Snapshot starts a
// goroutine that mirrors every Talon Lease of the namespace
// (app.kubernetes.io/managed-by=talon): a consistent LIST, paginated, at
// resourceVersion R, then a watch from R with bookmarks, resumed from the
// last resourceVersion seen when a watch request ends, and a new LIST
// after any watch failure (410 Gone, a lost stream). The cache's revision
// C is the resourceVersion of the last event or bookmark applied; a
// watch delivers events in resourceVersion order, so the mirror is the
// namespace's Talon Leases as of C. The loop is state.Reflector, the one
// both caching backends share (and which serves Store.Watch from the
// cache, so a coordinator holds one watch), rather than client-go's
// reflector: the cache must know the instant its watch breaks
// (snapshots then fall back to LISTs instead of waiting), list with a
// consistent read rather than the reflector's resourceVersion "0", and
// decode each version once into the records snapshots return; the
// reflector's retries, store and handler queue would hide all three.
// Each Lease version is decoded once when it arrives (a version this store
// wrote is taken from its write cache, not decoded) and observed then
// (its UpdatedAtUnixMs is when this store first saw it; pruning the
// observations keeps those of every Lease the cache holds).
//
// Snapshot then probes the current resourceVersion T with a consistent
// LIST of the store's fence by name (no resourceVersion: a quorum read; at
// most one small object, a single key for etcd); concurrent snapshots
// share probes, each taking the first probe that starts after it asked,
// at most two in flight. When C >= T it answers with the mirror's records
// of the cluster at C: every write that completed before the call is at
// or below T, so the read is linearizable, as kube-apiserver's own
// consistent reads from its watch cache are. C may stay below T: the
// revision is etcd's and global, so a write of anything else (another
// namespace, another resource, the API server's own Leases) advances it
// without an event here, and bookmarks come about once a minute. So when
// C has not reached T within 10 ms the store writes its fence, a Lease
// named FenceName(Options.Identity) with labels managed-by=talon and
// talon.io/role=fence and no slot annotations (a merge patch of its
// renewTime and a talon.io/fence value that changes every time; created
// when missing), and waits, at most RequestTimeout, for the fence's event:
// its resourceVersion exceeds T, and events arrive in order. Fence writes
// are shared like probes, one in flight. Fences are never records: no
// cluster label (no LIST or Watch of a cluster selects one), a role no
// record has, a name with a '.' that no LeaseName has; Close deletes the
// store's fence. The probes, fences and the cache's LIST and watch use a
// client without the client-side rate limiter (they are bounded by their
// concurrency, and must not take the heartbeats' budget). While the cache
// is resynchronising, or a fence does not arrive in time, or a fence write
// fails (say, RBAC without patch), Snapshot falls back to the LIST.
// Expiry and late marks read Snapshot's records like any other caller, so
// the cache changes nothing else: ProposeTransition still writes with the
// resourceVersion the proposer read as precondition. Stats (and the
// talon_state_kube_* counters) count snapshots by form, probes, fence
// writes and resyncs.
//
// Lifecycle and concurrency: New validates Options and builds the client
// without contacting the API server. A Store is safe for concurrent use;
// it owns one goroutine per open Watch, the snapshot cache's goroutine
// (from the first Snapshot) and those running shared probes and fence
// writes; Close ends them, deletes the fence and closes its idle
// connections. Every request is bounded by Options.RequestTimeout and the
// caller's context.
//
// Store is carved by concern, each part a small type that holds only what
// it needs: lifecycle (the lifetime and the goroutines Close waits for,
// under its own lock), observer (when each Lease version was first seen),
// and the logs beside the records, jobLog, cordonLog and eventLog, each
// with its own client and names. Store embeds them, so it implements
// state.JobLog, CordonLog, EventLog and EventWatcher through them.
package kube
