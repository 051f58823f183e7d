package admin

import (
	"log/slog"
	"net/netip"
	"sync"
	"time"
)

// refusalEvery is how often one client's refused requests (401, 429) are
// logged: the first at once, then one line per interval with the count.
const refusalEvery = 10 * time.Second

// maxRefusalClients bounds the clients whose refusals are being counted;
// past it the quietest are dropped (their next refusal logs at once).
const maxRefusalClients = 10000

// refusalLog rate-limits the log lines of refused admin requests per
// client: a scanner or a misconfigured client retrying in a loop costs one
// line per interval, not one per request.
type refusalLog struct {
	log *slog.Logger
	now func() time.Time

	mu      sync.Mutex // guards clients
	clients map[netip.Addr]*refusals
}

type refusals struct {
	logged     time.Time // when the last line was written
	suppressed int       // refusals since then not logged
}

func newRefusalLog(log *slog.Logger, now func() time.Time) *refusalLog {
	return &refusalLog{log: log, now: now, clients: map[netip.Addr]*refusals{}}
}

// note logs a refused request of client unless one was logged within
// refusalEvery; the next line says how many were not.
func (l *refusalLog) note(client netip.Addr, args ...any) {
	now := l.now()
	l.mu.Lock()
	r := l.clients[client]
	if r == nil {
		if len(l.clients) >= maxRefusalClients {
			for k, v := range l.clients {
				if now.Sub(v.logged) > refusalEvery {
					delete(l.clients, k)
				}
			}
		}
		r = &refusals{}
		l.clients[client] = r
	} else if now.Sub(r.logged) < refusalEvery {
		r.suppressed++
		l.mu.Unlock()
		return
	}
	suppressed := r.suppressed
	r.logged, r.suppressed = now, 0
	l.mu.Unlock()
	if suppressed > 0 {
		args = append(args, "not_logged_since_last", suppressed)
	}
	l.log.Info("admin request refused (logged at most once per client per 10s)", append(args, "client", client.String())...)
}
