// Package harness runs `talon bench`: it sets up what a measurement needs
// around the phases of package bench (a run's own etcd prefix or
// Kubernetes namespace, seeded stores, coordinators started in this
// process or, in the fleet mode, coordinator and fleet processes of the
// talon binary), runs them and reports, as text or JSON.
//
// Invariants:
//
//   - The harness wires no process itself: Roles (package app) opens
//     stores and builds coordinators exactly as a talon process does, so a
//     benchmark measures production's wiring.
//   - Every run works under a prefix (PREFIX/run-ID) or namespace
//     (NAMESPACE-ID) of its own and removes it when it ends, with a minute
//     of its own even after Ctrl-C, unless Conn.Keep; coordinators it
//     started have stopped and their stores are closed when a run returns.
//     Processes it started (the fleet mode's coordinators and fleets) have
//     exited when a run returns, and the kernel kills them if the harness
//     dies first (Linux's parent-death signal).
//   - Validate methods name the flag, the value and the rule it broke;
//     callers mark those errors as usage errors. Errors from a run mean it
//     could not be set up or cleaned up; failures during the measurement
//     are counted in the report, as package bench counts them.
package harness
