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
//   - Failover: a worker knows every coordinator address and sends each
//     registration or heartbeat through the failover client (package
//     client) within min(request-timeout, interval/2), at least 500 ms
//     when request-timeout allows, half of it per coordinator attempt: a
//     connection error, an attempt deadline or a refusal (draining,
//     not_ready, unavailable) moves to the next address within the same
//     write, so one hung or dying coordinator costs no heartbeat; other
//     retryable errors are retried with jittered backoff.
//   - Lifecycle: Run reports unready (one more heartbeat carries
//     ready=false), keeps serving data for DrainDelay, drains in-flight
//     data requests within ShutdownTimeout, deregisters and returns. Every
//     goroutine it starts has ended when Run returns.
package worker
