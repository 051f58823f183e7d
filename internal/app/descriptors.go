package app

import (
	"log/slog"

	"github.com/talonhq/talon/internal/admin"
)

// reservedDescriptors are kept out of every listener's budget: the store's
// connections, cache and blob files, logs, the process's own.
const reservedDescriptors = 512

// budgets is how many connections each listener may hold.
type budgets struct {
	Main, Admin int
}

// descriptorBudgets raises the soft RLIMIT_NOFILE to its hard limit and
// sizes the listeners from it: the main listener's max-connections and
// the admin listener's cap together stay within the limit less
// reservedDescriptors, so no listener can exhaust the descriptors the
// others and the store need. A configured max-connections past that is
// lowered, and the lowering logged once.
func descriptorBudgets(maxConnections int, log *slog.Logger) budgets {
	soft, raised := raiseNoFile()
	if raised {
		log.Debug("raised the open-files limit (RLIMIT_NOFILE) to its hard limit", "limit", soft)
	}
	b, lowered := sizeBudgets(soft, maxConnections)
	if !lowered {
		return b
	}
	log.Warn("the open-files limit (RLIMIT_NOFILE) is too low for max-connections: listeners capped lower; raise the limit (LimitNOFILE= in the systemd unit, ulimit -n)",
		"limit", soft, "max_connections", maxConnections, "now", b.Main, "admin_connections", b.Admin, "reserved", reservedDescriptors)
	return b
}

// sizeBudgets fits the main listener's maxConnections and the admin
// listener's default cap within soft descriptors less reservedDescriptors
// (soft 0: unknown, nothing changes); lowered reports a change.
func sizeBudgets(soft uint64, maxConnections int) (b budgets, lowered bool) {
	b = budgets{Main: maxConnections, Admin: admin.DefaultMaxConnections}
	if soft == 0 {
		return b, false
	}
	avail := max(int(min(soft, 1<<30))-reservedDescriptors, 64)
	if b.Main+b.Admin <= avail {
		return b, false
	}
	b.Admin = max(16, min(b.Admin, avail/5))
	b.Main = max(16, avail-b.Admin)
	return b, true
}
