package coordinator

import (
	"log/slog"
	"strings"
	"sync"
)

// readinessLog logs each change of readiness once, with its cause: the
// first time the coordinator is ready, every ready-to-unready change (at
// warn, with the reasons; at info for the drain, which was asked for) and
// every return to ready. Readiness is computed
// on every probe and every view; only the changes reach the log, so an
// outage costs two lines, not one per /readyz request.
type readinessLog struct {
	log    *slog.Logger
	events *eventLog // receives each change as an event, like the log

	mu      sync.Mutex // guards the fields below
	known   bool       // a readiness was noted
	ready   bool
	everUp  bool // ready at least once: warming up is no outage
	reasons string
}

// note logs r when it differs from the last readiness noted.
func (l *readinessLog) note(r Readiness) {
	reasons := strings.Join(r.Reasons, "; ")
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.known && l.ready == r.Ready {
		return
	}
	wasKnown := l.known
	l.known, l.ready = true, r.Ready
	if l.events != nil && (l.everUp || r.Ready) {
		e := Event{Type: EventSelfReady, Old: "not_ready", New: "ready"}
		if !r.Ready {
			e = Event{Type: EventSelfUnready, Old: "ready", New: "not_ready", Reason: reasons}
		} else if !l.everUp {
			e.Old = ""
		} else {
			e.Reason = "was: " + l.reasons
		}
		l.events.add(e)
	}
	switch {
	case r.Ready:
		if l.everUp {
			l.log.Info("coordinator ready again", "was", l.reasons)
		} else {
			l.log.Info("coordinator ready")
		}
		l.everUp = true
	case l.everUp && strings.HasPrefix(reasons, "draining"):
		l.log.Info("coordinator unready: draining", "reasons", reasons) // asked for, no outage
	case l.everUp:
		l.log.Warn("coordinator unready", "reasons", reasons)
	case !wasKnown:
		l.log.Debug("coordinator not ready yet", "reasons", reasons)
	}
	l.reasons = reasons
}
