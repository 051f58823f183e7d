//go:build !unix

package placement

import "time"

// processCPU is unavailable here; benchmarks report wall time only.
func processCPU() (time.Duration, bool) { return 0, false }
