// Package coordinator is the coordinator runtime (ADR 0001 sections 1, 7
// and 8): worker registration and heartbeats, placement lookups and
// placement-version pushes over the binary control protocol, all served by
// every coordinator alike. There is no leader and no authoritative local
// state: everything a request is answered from comes from a Snapshot of the
// shared store taken after the request arrived.
//
// Invariants:
//
//   - Agreement: eligibility and the PlacementVersion are a function of the
//     records a snapshot holds (placement.Eligible reads no clock), so two
//     coordinators that read the same revision answer alike, however long
//     each has been running or observing.
//   - Liveness from the store: a record turns unhealthy only when the store
//     marks it late, and leaves only when the store deletes it (its lease,
//     or an expiry). Each coordinator proposes those transitions
//     (evidence.go) after watching a record's version go unchanged for
//     unhealthy-after or lease-ttl of its own continuous observation; the
//     store applies a proposal only to the version it names, so a heartbeat
//     that lands first wins, and any number may propose. Time this
//     coordinator did not observe (its stall, a failed read) never counts.
//   - Consistency: View returns a snapshot whose read started after the
//     call; concurrent callers share one in-flight read (batching). Reads
//     are applied in start order; one that finishes late answers with the
//     later read's view.
//   - Fail closed: when no snapshot can be had within RequestTimeout the
//     coordinator turns unready, placement lookups fail with a retryable
//     not_ready error and writes fail with the store's retryable error.
//     It does not wait for the hanging read to fail: once no read that
//     started within RequestTimeout has succeeded (the refresh loop starts
//     one at least three times per RequestTimeout), the view is
//     unconfirmed, readiness says so and lookups answer not_ready at once.
//     A store refusing a client's write for authorization while it also
//     refuses this coordinator's own record is this coordinator's
//     condition (a store still starting): not_ready, not permission_denied.
//     An active store alarm (state.CapacityReporter: etcd's NOSPACE or
//     CORRUPT) is a readiness reason too, in words: such a store refuses
//     the writes liveness needs (heartbeats, late marks, expiries), so a
//     dead worker could stay eligible. It clears when the alarm does.
//     After the store answers again, or after a gap in its own reads, it
//     answers from the first good read at once when the interruption was
//     too short for any live record to expire (BlipTolerance: a blip
//     costs no more than itself; observation starts over, so no
//     coordinator marks a live record late for it); after a longer one
//     it stays unready and answers not_ready for RecoveryHold and, when
//     its own record could have expired, until the store accepted that
//     record again (recovery.go, tracker.go); writes are served meanwhile, so
//     workers whose records lapsed heartbeat or re-register. The last good
//     view is kept only for diagnostics (LastGood).
//   - Lifecycle: Run serves until ctx ends, then reports unready, keeps
//     serving for DrainDelay, stops accepting, lets in-flight requests
//     finish within ShutdownTimeout, sends every connection the drain
//     notice (the draining code under the push request ID, so clients and
//     workers move on without a failed call) and closes them after a short
//     linger, removes its own record and returns.
//     Every goroutine it starts has ended when Run returns.
//
// Parts: the Coordinator (coordinator.go) holds the options and its
// parts; run.go wires them (New) and runs them (Run, the drain). Each
// concern is a type or file of its own:
//
//   - the placement lookup: View, Lookup and LastGood (lookup.go), the
//     batched read (wire.go) and what an applied read does (fetch.go);
//   - the control-protocol server (controlServer, control.go): the
//     listener, connections and their limits, framing, the peer's
//     authentication, version pushes and the drain; it asks the rest only
//     through a small interface (controlHandler) that handler
//     (control_handler.go) implements: lookups, the writes within the
//     admission limits it owns (writes.go), attestations (attest.go),
//     authorization (authorize.go), instructions and jobs;
//   - liveness: the evidence of silent records (evidence.go) and the
//     proposer that sends the transitions and revocations it finds due to
//     the store (proposer, proposals.go); the refresher (loops.go) that
//     reads the view periodically and on relevant changes; the
//     coordinator's own record (ownRecord, self.go); the renewal log
//     (renewalPublisher, renewals.go);
//   - events: the in-memory list (events.go), the store's shared log
//     (events_shared.go), and the membership log that turns two views'
//     difference into node events (membershipLog, membership_log.go);
//   - the operator's cordons (cordons, cordon.go) and cache jobs
//     (JobBoard, jobs.go);
//   - readiness: one readiness.Tracker (readiness.go) whose conditions
//     are set by shutdown or probed from the view, the store and the
//     own-record loop; /readyz, talon_ready and the own record read it.
//
// The parts that act for the coordinator (handler, proposer, refresher,
// ownRecord, renewalPublisher, cordons) embed it for its options, store,
// metrics and log, and are created by New; nothing below them calls back
// up into run.go.
//
// Concurrency: a Coordinator is safe for concurrent use. Each concern has
// its own lock: Coordinator.mu (lifecycle), controlServer.mu (connections),
// tracker.mu
// (the view, store state and recovery), evidence.mu, subscribers.mu, the
// batcher's mu, and the own-record loop's (package membership). No lock is
// held across store or network I/O except conn.wmu, which serialises
// writes to one connection; subscribers.mu may be taken while holding
// conn.wmu (the Subscribe reply), never the other way round; eventLog.mu
// (events.go: the bounded in-memory list of what this coordinator
// observed) is a leaf, taken with the readiness tracker's lock held (its
// probes take tracker.mu and the own-record loop's lock); no other two
// locks are held at once. Placement-version pushes go through a one-slot
// mailbox per subscriber, written by that connection's own goroutine, so a
// slow subscriber never delays a snapshot read.
package coordinator
