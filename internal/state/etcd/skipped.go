package etcd

import (
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/talonhq/talon/internal/cluster"
)

// skipLog counts, and logs, the values a read had to leave out: records
// of a schema version this build cannot read, and anything else under
// the prefix that is not what its key says. Every reader of the store
// (snapshots, watches, the logs) reports to the store's one skipLog.
// It is safe for concurrent use.
type skipLog struct {
	log                    *slog.Logger
	unsupported, malformed atomic.Uint64
	lastWarnUnixNano       atomic.Int64
}

// skipped counts and (at most once a minute, as a warning) logs a value a
// read had to leave out.
func (k *skipLog) skipped(key string, bad error) {
	if errors.Is(bad, cluster.ErrUnsupportedVersion) {
		k.unsupported.Add(1)
	} else {
		k.malformed.Add(1)
	}
	now := time.Now().UnixNano()
	last := k.lastWarnUnixNano.Load()
	if now-last >= int64(time.Minute) && k.lastWarnUnixNano.CompareAndSwap(last, now) {
		k.log.Warn("skipping unreadable record (further ones are logged at debug level for a minute)", "key", key, "err", bad,
			"unsupportedTotal", k.unsupported.Load(), "malformedTotal", k.malformed.Load())
		return
	}
	k.log.Debug("skipping unreadable record", "key", key, "err", bad)
}
