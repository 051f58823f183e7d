package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"syscall"
	"testing"
	"time"
)

// This file is the CPU time and the CPU profiles of the test process
// that the report's rows quote.

// cpuTime returns the process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// profile records a CPU profile of this process (the in-process
// coordinators and clients) until the returned function is called, then
// prints its top entries: the bottleneck docs/performance.md explains.
func profile(t *testing.T, name string) func() {
	t.Helper()
	return profileWith(t, name, "-top", "-nodecount=25")
}

// profileWith is profile printing go tool pprof's output with view, its
// options (such as -top -cum).
func profileWith(t *testing.T, name string, view ...string) func() {
	t.Helper()
	path := filepath.Join(os.TempDir(), "talon-bench-"+name+".pprof")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		t.Logf("no profile: %v", err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
		out, err := exec.Command("go", append(append([]string{"tool", "pprof"}, view...), path)...).CombinedOutput()
		if err != nil {
			t.Logf("pprof: %v", err)
			return
		}
		t.Logf("CPU profile of %s (%s):\n%s", name, path, out)
	}
}
