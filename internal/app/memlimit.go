package app

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"strconv"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// memoryLimitRatio is the share of the container's memory limit that
// becomes the Go runtime's soft memory limit when GOMEMLIMIT is unset:
// the collector works harder as the heap nears it instead of letting the
// heap double between collections past what the container allows (a
// coordinator's heap is mostly its cache of records: its peak RSS is
// about three times its live heap without a limit). The rest is left for
// stacks, the runtime and the files the kernel charges to the container.
const memoryLimitRatio = 0.9

// setMemoryLimit sets the runtime's soft memory limit from the memory
// limit of the process's cgroup (v1 or v2, read by
// KimMachineGun/automemlimit) unless GOMEMLIMIT is set or AUTOMEMLIMIT is
// "off"; AUTOMEMLIMIT may also give the ratio. A malformed AUTOMEMLIMIT is
// a usage error; a limit that cannot be read is logged and left unset.
func setMemoryLimit(log *slog.Logger, getenv func(string) string, container memlimit.Provider) error {
	if v := getenv("GOMEMLIMIT"); v != "" {
		log.Info("soft memory limit from GOMEMLIMIT", "GOMEMLIMIT", v, "limit_bytes", debug.SetMemoryLimit(-1))
		return nil
	}
	ratio := memoryLimitRatio
	if v := getenv("AUTOMEMLIMIT"); v != "" {
		if v == "off" {
			log.Debug("no soft memory limit: AUTOMEMLIMIT=off")
			return nil
		}
		r, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(r) || r <= 0 || r > 1 {
			return &usageError{fmt.Errorf("AUTOMEMLIMIT %q: want off, or the share of the container's memory limit to use as the soft memory limit, above 0 and at most 1 (default %g)", v, memoryLimitRatio)}
		}
		ratio = r
	}
	limit, err := container()
	switch {
	case errors.Is(err, memlimit.ErrNoLimit):
		log.Debug("no soft memory limit: the container has no memory limit")
		return nil
	case err != nil:
		log.Warn("no soft memory limit: the container's memory limit could not be read; set GOMEMLIMIT to about 90% of it", "err", err)
		return nil
	}
	soft := int64(math.MaxInt64)
	if f := float64(limit) * ratio; f < math.MaxInt64 {
		soft = int64(f)
	}
	debug.SetMemoryLimit(soft)
	log.Info("soft memory limit set from the container's memory limit (GOMEMLIMIT overrides it, AUTOMEMLIMIT=off turns it off)",
		"limit_bytes", soft, "container_limit_bytes", limit, "ratio", ratio)
	return nil
}
