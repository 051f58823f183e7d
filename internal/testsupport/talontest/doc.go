// Package talontest runs real talon processes for the end-to-end tests
// (internal/integration/..., internal/bench/integration): it builds the
// talon binary, starts coordinators and workers on loopback with the flags
// a test needs (Start, CoordinatorArgs, WorkerArgs), runs talon and
// talonctl commands to completion (RunTalon, Ctl), issues mutual-TLS
// credentials (PKI), scrapes metrics (Scrape, ScrapeGauge, ScrapeText),
// speaks the control protocol as a simulated worker or client (Conn, Send,
// Callers), and runs the fault tests' cluster of live processes with a
// poller sampling every coordinator (LiveCluster, Poller, Summarize).
// The servers they run against (etcd, kube-apiserver, S3 and the other
// emulators) come from internal/testenv.
//
// Invariants:
//
//   - A test package that uses it calls Main from its TestMain: the first
//     process started builds the talon binary once per test binary into a
//     temporary directory that Main removes (TALON_TEST_BINARY runs a
//     given binary instead). This, and the set of ports FreeAddr handed
//     out, are the package's only package-level state.
//   - Every process and client it starts belongs to the test that started
//     it and ends in that test's t.Cleanup (processes are also killed
//     when the test binary dies, by Pdeathsig); a failed test logs each
//     process's output.
//   - Everything listens on 127.0.0.1, on ports FreeAddr picks, never the
//     same twice in one test binary.
//   - Tests call SkipShort first: nothing here runs under -short.
//   - Helpers report failures with t.Fatal and t.Fatalf, so they run on
//     the test's own goroutine. Poller and Callers have goroutines of
//     their own, which end with their Stop (StartPoller registers it with
//     t.Cleanup).
//
// Only tests import it: internal/deptest fails when production code does.
package talontest
