package coordinator

import (
	"sync"
	"time"

	"github.com/talonhq/talon/internal/cluster"
)

// departureTTL is how long a deregistration this coordinator served is
// remembered: its next views (one refresh, a few at most) show the
// record gone.
const departureTTL = time.Minute

// departures remembers the deregistrations this coordinator served, so
// that its view diff reports the record's disappearance as an orderly
// leave (info) rather than an expiry or removal to look into (warn): a
// rolling restart of workers, or Ctrl-C on `talon dev`, is no incident.
// Bounded by max entries; the oldest go first when full.
type departures struct {
	max int

	mu   sync.Mutex // guards the fields below; a leaf
	left map[departure]time.Time
}

type departure struct {
	key         cluster.Key
	incarnation string
}

func newDepartures(max int) *departures {
	return &departures{max: max, left: map[departure]time.Time{}}
}

// note records that key's incarnation deregistered at now.
func (d *departures) note(key cluster.Key, incarnation string, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for k, at := range d.left {
		if now.Sub(at) > departureTTL {
			delete(d.left, k)
		}
	}
	if len(d.left) >= d.max {
		var oldest departure
		var at time.Time
		for k, t := range d.left {
			if at.IsZero() || t.Before(at) {
				oldest, at = k, t
			}
		}
		delete(d.left, oldest)
	}
	d.left[departure{key, incarnation}] = now
}

// take reports, once, whether key's incarnation deregistered through this
// coordinator within departureTTL of now.
func (d *departures) take(key cluster.Key, incarnation string, now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	k := departure{key, incarnation}
	at, ok := d.left[k]
	delete(d.left, k)
	return ok && now.Sub(at) <= departureTTL
}
