// Package app builds the talon daemon's command tree (coordinator, worker,
// dev, get, bench, pki, config, version) and wires the two roles from their
// configuration: the state store, the listeners, the metrics registry, the
// role's runtime and its admin listener (CoordinatorProcess,
// WorkerProcess). cmd/talon only runs it. The dev cluster (package
// devcluster) and the benchmarks (package bench/harness) run processes
// wired here: they receive this package's constructors (devRoles,
// BenchRoles) rather than importing it.
//
// Invariants:
//
//   - Wiring has no behaviour of its own: every rule lives in the packages
//     it assembles (coordinator, worker, admin, config).
//   - Construction has no cycle: what is built later is handed to what was
//     built earlier explicitly (the worker runtime to the data server's
//     readiness gate), never through a closure over an unassigned variable.
//   - A role's admin listener starts before the role and stops after the
//     role's Run returned, so /readyz reports the drain while it happens. A
//     standalone worker's (RunWorker) starts before its cache scan, and
//     /readyz says "starting" until the runtime exists.
//   - Under systemd (NOTIFY_SOCKET), the standalone roles send READY=1 when
//     /readyz would first answer 200 and STOPPING=1 when the drain starts.
//   - Everything New* builds is released on every error path; Close
//     releases a process that will not run; Run releases the rest (store,
//     cache, clients) when it returns.
//   - Exit codes: 0 success, 1 runtime error, 2 usage or configuration
//     error; a second SIGINT/SIGTERM exits at once with 128+signal.
package app
