//go:build unix

package placement

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time (user + system) the test process has used,
// and true. Benchmarks report it beside wall time because the development
// and CI machines are shared: wall time counts time spent descheduled, CPU
// time does not.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
