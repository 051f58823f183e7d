// Package testsupport holds the small helpers Talon's tests share: a
// FakeClock that moves only when told, a SyncBuffer for capturing the
// output of concurrent writers, WaitFor for polling a condition with a
// deadline, and Loopback, the raw loopback-TCP-with-sendfile ceiling the
// data listener's benchmarks compare with. Its subpackage coordtest runs a real coordinator for tests;
// talontest runs real talon processes for the end-to-end tests.
//
// Only _test.go files and test support (its own subpackages) import this
// package and its subpackages; the boundary test in internal/deptest
// fails when production code does.
//
// Concurrency: FakeClock and SyncBuffer are safe for concurrent use.
// WaitFor reports failure with t.Fatalf, so it must run on the test's own
// goroutine.
package testsupport
