package status

import (
	"fmt"
	"strings"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cli/cmdutil"
	"github.com/talonhq/talon/internal/format"
)

// presence is "2 of 2 present, 2 ready", red with the missing names when
// fewer than expected are present or ready.
func presence(cs *cmdutil.ColorScheme, p apiv1.CoordinatorPresence) string {
	s := fmt.Sprintf("%d of %d present, %d ready", p.Present, p.Expected, p.Ready)
	if len(p.Missing) > 0 {
		s += "; missing: " + strings.Join(apiv1.MissingNames(p.Missing), ", ")
	}
	if !p.Complete {
		return cs.Red(s)
	}
	return s
}

// capacity is "9.0G resident of 64G (14%) on 5 workers".
func capacity(c apiv1.ClusterCapacity) string {
	pct := ""
	if c.CapacityBytes > 0 {
		pct = " (" + format.Percent(float64(c.ResidentBytes)/float64(c.CapacityBytes)) + ")"
	}
	return fmt.Sprintf("%s resident of %s%s on %d %s", format.Bytes(c.ResidentBytes), format.Bytes(c.CapacityBytes), pct, c.Workers, plural(c.Workers, "worker", "workers"))
}

// hitRatio is the cluster's hit ratio, "-" before any request.
func hitRatio(c apiv1.ClusterCapacity) string {
	if c.HitRatio == nil {
		return "-"
	}
	return format.Percent(*c.HitRatio)
}

// traffic is "120 req/s, 1.2M bytes/s, 0 backend errors/s (3 of 5
// workers)", or why there are no rates yet.
func traffic(c apiv1.ClusterCapacity) string {
	if c.RequestsPerSecond == nil {
		return "- (rates appear once the answering coordinator has seen two status writes of a worker: up to a status interval)"
	}
	s := fmt.Sprintf("%s req/s, %s bytes/s, %s backend errors/s", format.Rate(*c.RequestsPerSecond), format.Rate(*c.BytesServedPerSecond), format.Rate(*c.BackendErrorsPerSecond))
	if c.RateWorkers < c.Workers {
		s += fmt.Sprintf(" (%d of %d workers)", c.RateWorkers, c.Workers)
	}
	return s
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
