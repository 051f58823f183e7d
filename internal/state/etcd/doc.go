// Package etcd is the etcd backend of state.Store (ADR 0001, section 5).
// Talon does not embed or operate etcd: New connects to an existing
// cluster with an endpoint list, optional username and password, optional
// TLS, dial and request timeouts and a key prefix.
//
// # Key layout
//
// Each process's record lives at
//
//	<prefix>/clusters/<cluster-id>/nodes/<role>/<node-id>
//
// (prefix default "/talon"); the value is cluster.Encode's versioned
// record, readable with etcdctl. Cluster and node IDs cannot contain "/",
// and the "/nodes/" segment keeps cluster "a" from matching cluster "ab",
// so a cluster's records are exactly the keys under
// <prefix>/clusters/<cluster-id>/nodes/. Keys etcd returns in byte order are
// therefore ordered by role, then node ID: the snapshot order.
//
// The shared event log (state.EventLog) lives outside that range, at
//
//	<prefix>/events/<cluster-id>/<event-id>
//
// so that no snapshot or watch of the records sees it (events.go).
//
// # Writes: one compare-and-swap transaction per round
//
// UpsertNode decides with cluster.Order against a view of the slot (the
// stored record, its mod revision and its lease), then commits
//
//	Txn If(ModRevision(key) == view.modRev)          // 0 when absent: insert
//	    Then(Put(key, stamped record, WithLease(L)))
//	    Else(Get(key))
//
// If another writer got there first the Else branch returns the current
// record in the same round trip, and the update is decided again (at most
// 8 rounds, then state.ErrConflict). So no interleaving of writers,
// through any number of coordinators, moves a record backward: every put
// was decided against the exact revision it replaces. Duplicate and stale
// updates write nothing; when the view they were decided on did not come
// from etcd in this call they are confirmed by a read first (the record
// may have expired since), and their result carries that read's revision.
// The stored UpdatedAtUnixMs is the writer's Options.Clock stamp; records
// this store returns carry instead the time it first saw their mod
// revision (state.Observations), so ages never compare hosts' clocks.
// RemoveNode reads the slot, checks the incarnation and deletes with the
// same mod-revision compare.
//
// Concurrent writes share transactions (group commit, see committer): the
// puts of calls that arrive while earlier transactions are in flight go
// out together, each as a nested transaction with its own compare, so each
// call still gets the outcome of its own compare and Else read, and one
// Raft proposal carries the whole group. One put on an expired lease
// would fail the whole group; the group is then resent put by put. Puts
// of one group share a revision, so watch events of different keys may
// carry the same revision (never two of one key).
//
// The view comes, without a request, from the snapshot cache (below; it
// sees every coordinator's writes) or from this store's own last write or
// read of the slot, whichever is newer; with neither, from a read.
//
// # Leases: one per incarnation, refreshed, never re-granted per heartbeat
//
// A lease grant is a Raft write, and granting one per heartbeat leaks
// leases by the thousand, so:
//
//   - Each incarnation of each slot has one lease. Insert and Restart use
//     the lease this store holds for the incoming incarnation, else grant
//     one (once per incarnation). After a Restart's put succeeds, the old
//     incarnation's lease, which no longer holds the key, is left to
//     expire (see the removal rule below for why it is not revoked).
//   - Advance keeps the stored record's lease. Its ID comes from the
//     stored key-value (kv.Lease), so a coordinator that never wrote this
//     slot reuses the lease another coordinator granted. It is refreshed
//     with one keepalive sent beside the put, not before it: a put on a
//     lease that has gone fails, and a keepalive that finds it gone sends
//     the write back to a read. A new lease is granted only when
//     the keepalive reports it gone (TTL 0), or when the TTL it was
//     granted for differs from the requested one (this store's bounded
//     cache of slot+incarnation -> lease remembers the requested TTL; a
//     lease learned from another coordinator is checked against the TTL
//     its keepalive reports).
//   - Every accepted update refreshes, even a lease refreshed a moment ago:
//     each must restart the full TTL (ADR 0001, "lease_ttl without an
//     accepted update"), so skipping one would expire the record early by
//     the time since the last refresh, and granting leases longer to allow
//     skips would let records outlive their TTL.
//   - Refreshes use a few long-lived LeaseKeepAlive streams, one request
//     and one response per refresh (see keeper). clientv3's KeepAliveOnce
//     would open a stream per call, and with a username the client
//     re-authenticates on every new stream: an extra request (a password
//     check and a Raft write) per heartbeat.
//   - A removal or an expiry (RemoveNode, ProposeTransition) deletes the
//     key and leaves its lease to expire: the same incarnation may register
//     again at once through a store that reuses that lease, and a revoke
//     landing after that put would take the accepted record with it. A
//     lease granted in a call that ended up not using it is revoked before
//     the call returns.
//
// In steady state (the view is current: this store wrote the slot last,
// or the snapshot cache has seen the other coordinator's write) an
// accepted heartbeat costs exactly two requests, the keepalive and the
// transaction, sent at the same time. A stale view costs one more transaction round. The first
// heartbeat of an incarnation costs a read, a grant and the transaction
// (a grant is a Raft write, so a decision that needs one is confirmed by a
// read unless it was just read). A duplicate or stale heartbeat costs one
// read. TestRoundTrips counts them on the wire, with authentication on.
//
// # Snapshots and the watch-fed cache
//
// Without the cache, Snapshot is one linearizable range read of the
// cluster's prefix, returning the response's header revision.
//
// With Options.CacheSnapshots, a goroutine (state.Reflector, with this
// package's list and watch injected) keeps a mirror of every record
// under <prefix>/clusters/: a linearizable range read at revision R, then a
// watch from R+1 on a dedicated watch stream; after any watch failure
// (compaction, a lost stream) it lists again. The cache's revision is the
// newest revision up to which it has applied every change: that of the last
// event applied (etcd delivers whole revisions in order) or of a progress
// notification (etcd sends one only after all earlier events of the
// stream). Snapshot then asks etcd for its current revision T with a
// linearizable count-only read of one key that never exists (O(1) on the
// server, unlike a range over thousands of records), asks the watch stream
// for a progress notification if the cache is behind T (changes outside the
// prefix advance the revision without an event), waits until the cache's
// revision reaches T, and answers with the cache's records at its revision
// C >= T. That state includes every write that completed before Snapshot
// was called (they are at or below T) and is the consistent state at
// revision C, so the read is linearizable, the technique kube-apiserver
// uses for consistent reads from its watch cache. While the cache is
// listing the prefix (at start, or after losing its watch) Snapshot waits
// for that listing instead of reading the prefix a second time: at 10,000
// records two listings in flight at once, with their gRPC buffers, were
// most of a coordinator's peak memory. While the cache is backing off
// after a failed listing, Snapshot falls back to the range read.
//
// Both paths skip (and count, in Stats, and log at most once a minute)
// values of an unsupported schema version or otherwise unreadable, and
// nothing else: no record is left out for its age on this store's clock.
// Expiry is etcd's own lease (which checks every half second and restarts
// lease clocks on a leader change), so every coordinator that reads a
// revision sees the same records.
//
// # Decoding: once per version
//
// Each record version reaches a store up to three times (the answer to its
// own write, the cache's watch, each Watch). A small memo keyed by key and
// mod revision (and, for a write in flight, by its encoded value) lets
// them share one decode, and skip it for the store's own writes: per
// heartbeat the coordinator that handles it decodes the frame once and
// encodes the stored value once. Stats.RecordDecodes counts decodes.
//
// # Watches
//
// With the cache, Watch is served from the cache's own watch
// (state.Reflector): one etcd watch of the records per store however many
// callers watch (TestOneWatchPerStore counts them with etcd's own gauge);
// the event log (WatchEvents) and the renewal log (WatchRenewals) are
// watched once each by a coordinator, three etcd watches in all. A caller whose
// revision the cache has passed is replayed from a ring of recent events,
// once a count-only read at that revision shows etcd still has it; one
// etcd has compacted ends with state.ErrCompacted, as the contract says. A
// caller that falls a ring's worth behind ends with state.ErrUnavailable,
// and one the cache's lost watch strands ends with its cause. Without the
// cache, Watch is an etcd watch of the cluster's prefix from after+1; each
// response (whole revisions) becomes one batch. Compaction ends it with
// state.ErrCompacted; the caller takes a new Snapshot and watches from its
// revision. Lease expiry shows up as EventDelete either way.

// # Compaction and capacity (coordinators only)
//
// With Options.CompactionInterval, a goroutine compacts etcd's history
// once per interval across every store of the prefix, as kube-apiserver
// does: each round is one transaction on <prefix>/compaction (outside
// <prefix>/clusters/, so no snapshot or watch sees it) comparing the key's
// mod revision with the one this store last saw. The store whose compare
// holds writes the key and compacts to that revision, recorded one
// interval or more ago, so a watcher less than an interval behind never
// meets ErrCompacted; the others learn the key. Compactions are therefore
// at least one interval apart cluster-wide (see compactor). etcd lets only
// the root role compact; other users' rounds end permission_denied.
//
// With Options.CapacityInterval, a goroutine polls etcd's maintenance
// Status (each endpoint) and AlarmList; Capacity returns the last answer
// without I/O. It polls more often while an alarm is active, and at once
// after a request failed with "database space exceeded" (mapError).
//
// # Errors
//
// Every error wraps one of the state sentinels when it belongs to one:
// connection refused, no endpoint available and gRPC Unavailable ->
// ErrUnavailable (including a deadline that expired while no connection
// was ready, since the client waits for one); an expired deadline with a
// connection -> ErrTimeout; failed authentication or an invalid token ->
// ErrUnauthenticated; etcd's permission denied -> ErrPermissionDenied;
// compaction -> ErrCompacted; after Close -> ErrClosed.
//
// # Concurrency and lifecycle
//
// A Store is safe for concurrent use. New starts the cache, compaction and
// capacity goroutines (each when enabled); lease streams and Watch goroutines start on demand; Close ends
// all of them and the client. Operations whose context has no deadline get
// Options.RequestTimeout.
//
// Store is carved by concern, each part a small type that holds only what
// it needs and, where it has state, its own lock: conn (the client, the
// request timeout, the lifetime and the goroutines Close waits for),
// skipLog (values reads left out), leaseBook (the incarnations' leases),
// and the logs beside the records, jobLog, cordonLog, eventLog and
// renewalLog, each with its own keys. Store embeds the logs, so it
// implements state.JobLog, CordonLog, EventLog, EventWatcher and
// RenewalLog through them. No two of these locks are held together.
package etcd
