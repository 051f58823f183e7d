// Package worker is the worker runtime: it registers with the
// coordinators, heartbeats its bounded status record every interval, and
// serves its data listener (blocks of objects from its cache).
//
// Invariants:
//
//   - Identity: the node ID is stable (configuration); the incarnation ID
//     is random per process start; heartbeat_seq starts at 0 (the Register)
//     and grows by one with every attempt, whether or not an earlier attempt
//     was answered, so a retried or delayed heartbeat can never move the
//     record backward.
//   - Failover: a worker knows every coordinator address and moves to the
//     next on a connection error, a draining or not-ready coordinator;
//     other retryable errors are retried with jittered backoff.
//   - Lifecycle: Run reports unready (one more heartbeat carries
//     ready=false), keeps serving data for DrainDelay, drains in-flight
//     data requests within ShutdownTimeout, deregisters and returns. Every
//     goroutine it starts has ended when Run returns.
package worker
