package testsupport

import (
	"testing"
	"time"
)

// WaitFor polls cond until it returns true and fails the test with t.Fatalf
// naming what when timeout passes first. It polls every 10 ms during the
// first second and every 50 ms after that, so long waits on real processes
// do not keep them busy answering.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	for !cond() {
		now := time.Now()
		if now.After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		if now.Sub(start) < time.Second {
			time.Sleep(10 * time.Millisecond)
		} else {
			time.Sleep(50 * time.Millisecond)
		}
	}
}
