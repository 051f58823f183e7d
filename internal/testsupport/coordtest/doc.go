// Package coordtest is test support for the packages that talk to a
// coordinator: it runs a real coordinator.Coordinator over a state.Store
// (by default a new memory store) on a loopback listener, optionally with
// its admin server (internal/admin) on an httptest server. The small
// helpers those tests share (FakeClock, SyncBuffer, WaitFor) are in the
// parent package testsupport.
//
// Only _test.go files import it. The coordinator's and the admin server's
// own tests cannot (it imports both), nor can tests inside the packages the
// admin server imports (client, worker, ...); their external test packages
// (package client_test, ...) can.
//
// Invariants:
//
//   - Lifecycle: everything Start starts ends when the test ends, through
//     t.Cleanup, in reverse order of starting: the admin server closes,
//     then the coordinator drains and returns (removing its own record),
//     then the store Start created closes. A store passed in Options.Store
//     belongs to the caller and is never closed here. Stop ends the
//     coordinator earlier; it is idempotent.
//   - Nothing here touches the wall clock except where a test asks for it:
//     the coordinator, the admin server
//     and a store Start creates take their clocks from Options.
//   - Failures are reported on the testing.TB given, with t.Fatal from the
//     goroutine that called Start or WaitFor.
//
// Concurrency: a Coordinator's fields are set by Start and read-only afterwards, and its
// methods are safe for concurrent use.
package coordtest
