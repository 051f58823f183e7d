// Package coordinator is the coordinator runtime (ADR 0001 sections 1, 7
// and 8): worker registration and heartbeats, placement lookups and
// placement-version pushes over the binary control protocol, all served by
// every coordinator alike. There is no leader and no authoritative local
// state: everything a request is answered from comes from a Snapshot of the
// shared store taken after the request arrived.
//
// Invariants:
//
//   - Consistency: View returns a snapshot whose read started after the
//     call; concurrent callers share one in-flight read (batching), so a
//     burst of lookups costs one store read, never a stale answer.
//   - Fail closed: when no snapshot can be had within RequestTimeout the
//     coordinator turns unready, placement lookups fail with a retryable
//     not_ready error and writes fail with the store's retryable error. The
//     last good view is kept only for diagnostics (LastGood), marked with
//     its observation time. Recovery is automatic.
//   - Lifecycle: Run serves until ctx ends, then reports unready, keeps
//     serving for DrainDelay, stops accepting, lets in-flight requests
//     finish within ShutdownTimeout, removes its own record and returns.
//     Every goroutine it starts has ended when Run returns.
//
// Concurrency: a Coordinator is safe for concurrent use. No lock is held
// across store or network I/O except conn.wmu, which serialises writes to
// one connection; Coordinator.mu may be taken while holding conn.wmu (the
// Subscribe reply), never the other way round. Placement-version pushes go
// through a one-slot mailbox per subscriber, written by that connection's
// own goroutine, so a slow subscriber never delays a snapshot read.
package coordinator
