// Package app builds the talon daemon's command tree (coordinator, worker,
// dev, get, bench, config, version) and wires each role from its
// configuration: the state store, the listeners, the metrics registry, the
// role's runtime and its admin listener. cmd/talon only runs it.
//
// Invariants:
//
//   - Wiring has no behaviour of its own: every rule lives in the packages
//     it assembles (coordinator, worker, admin, config).
//   - A role's admin listener starts before the role and stops after the
//     role's Run returned, so /readyz reports the drain while it happens.
//   - Everything New* builds is released on every error path; Run releases
//     the rest (store, cache, clients) when it returns.
//   - Exit codes: 0 success, 1 runtime error, 2 usage or configuration
//     error; a second SIGINT/SIGTERM exits at once with 128+signal.
package app
