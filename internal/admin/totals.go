package admin

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cluster"
)

// Bounds of the totals tracker's memory.
const (
	// missingFor is how long a coordinator that left stays listed as
	// missing (while fewer than the expected are present).
	missingFor = time.Hour
	// maxSeenCoordinators bounds the coordinator names remembered.
	maxSeenCoordinators = 256
)

// totals remembers, between API requests, what the cluster's totals and
// presence need beyond one view: each worker's previous status (for
// rates) and the coordinators seen live (to name the missing ones). Its
// memory is bounded by the live records plus maxSeenCoordinators.
type totals struct {
	mu      sync.Mutex           // guards the fields below
	status  map[string]statusAt  // worker node ID -> its last two status writes
	seen    map[string]seenCoord // coordinator node ID -> when last seen live
	lastGen uint64               // views observed, to drop workers gone
	own     ownPlacement         // this coordinator's placement and since when
}

// ownPlacement is the placement the answering coordinator's views gave,
// and when an API request first saw it.
type ownPlacement struct {
	version  string
	eligible int64
	since    time.Time
}

// seenCoord is a coordinator as last seen live.
type seenCoord struct {
	at    time.Time
	admin string
}

// statusAt is a worker's status as of one write, and the rate it showed
// against the previous write of the same incarnation.
type statusAt struct {
	incarnation string
	atMs        int64
	counters    cluster.Counters
	rate        *rates
	gen         uint64
}

// rates are per-second counter rates of one worker.
type rates struct{ requests, bytes, backendErrors float64 }

func newTotals() *totals {
	return &totals{status: map[string]statusAt{}, seen: map[string]seenCoord{}}
}

// presence compares the live coordinators of records with expected,
// naming the ones seen before (at most missingFor ago) that are absent.
func (t *totals) presence(records []*cluster.Record, expected int, now time.Time) apiv1.CoordinatorPresence {
	p := apiv1.CoordinatorPresence{Expected: max(expected, 1), Missing: []apiv1.MissingCoordinator{}}
	present := coordinators(records)
	for _, r := range records {
		if r.Role == cluster.RoleCoordinator {
			p.Present++
			if r.Ready {
				p.Ready++
			}
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seeLocked(present, now)
	for id, sc := range t.seen {
		if now.Sub(sc.at) > missingFor {
			delete(t.seen, id)
		} else if _, live := present[id]; !live && p.Present < p.Expected {
			p.Missing = append(p.Missing, apiv1.MissingCoordinator{NodeID: id, AdminAddress: sc.admin, LastSeenUnixMs: sc.at.UnixMilli()})
		}
	}
	slices.SortFunc(p.Missing, func(a, b apiv1.MissingCoordinator) int { return strings.Compare(a.NodeID, b.NodeID) })
	p.Complete = p.Present >= p.Expected && p.Ready >= p.Expected
	return p
}

// coordinators maps the coordinators of records to their admin addresses.
func coordinators(records []*cluster.Record) map[string]string {
	out := map[string]string{}
	for _, r := range records {
		if r.Role == cluster.RoleCoordinator {
			out[r.NodeID] = r.AdminAddress
		}
	}
	return out
}

// seeCoordinators notes the coordinators of records as seen live at now.
func (t *totals) seeCoordinators(records []*cluster.Record, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seeLocked(coordinators(records), now)
}

// seeLocked notes the coordinators of present (node ID -> admin address)
// as seen at now.
func (t *totals) seeLocked(present map[string]string, now time.Time) {
	for id, admin := range present {
		t.seen[id] = seenCoord{at: now, admin: admin}
	}
	t.boundSeenLocked()
}

// boundSeenLocked forgets the longest-unseen coordinators past
// maxSeenCoordinators.
func (t *totals) boundSeenLocked() {
	for len(t.seen) > maxSeenCoordinators {
		var oldest string
		for id, sc := range t.seen {
			if oldest == "" || sc.at.Before(t.seen[oldest].at) {
				oldest = id
			}
		}
		delete(t.seen, oldest)
	}
}

// capacity sums the live workers of records and their rates, learning
// each worker's status write for the next call.
func (t *totals) capacity(records []*cluster.Record) apiv1.ClusterCapacity {
	var c apiv1.ClusterCapacity
	var hits, misses uint64
	var sum rates
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lastGen++
	for _, r := range records {
		if r.Role != cluster.RoleWorker {
			continue
		}
		c.Workers++
		c.CapacityBytes += r.Capacity.CapacityBytes
		c.ResidentBytes += r.Capacity.ResidentBytes
		hits += r.Counters.HitsTotal
		misses += r.Counters.MissesTotal
		if rt := t.observeLocked(r); rt != nil {
			c.RateWorkers++
			sum.requests += rt.requests
			sum.bytes += rt.bytes
			sum.backendErrors += rt.backendErrors
		}
	}
	for id, s := range t.status {
		if s.gen != t.lastGen {
			delete(t.status, id)
		}
	}
	if hits+misses > 0 {
		c.HitRatio = ptr(float64(hits) / float64(hits+misses))
	}
	if c.RateWorkers > 0 {
		c.RequestsPerSecond, c.BytesServedPerSecond, c.BackendErrorsPerSecond = ptr(sum.requests), ptr(sum.bytes), ptr(sum.backendErrors)
	}
	return c
}

// observeLocked notes worker r's status and returns its rate over its
// last two status writes of the same incarnation, or nil.
func (t *totals) observeLocked(r *cluster.Record) *rates {
	at := r.StatusAtUnixMs
	if at == 0 {
		at = r.UpdatedAtUnixMs
	}
	prev, ok := t.status[r.NodeID]
	cur := statusAt{incarnation: r.IncarnationID, atMs: at, counters: r.Counters, gen: t.lastGen}
	switch {
	case ok && prev.incarnation == r.IncarnationID && at <= prev.atMs:
		cur = prev // the same write, or an older view's
		cur.gen = t.lastGen
	case ok && prev.incarnation == r.IncarnationID && at > prev.atMs:
		dt := float64(at-prev.atMs) / 1000
		d := func(now, before uint64) float64 {
			if now < before {
				return 0
			}
			return float64(now-before) / dt
		}
		cur.rate = &rates{
			requests:      d(r.Counters.RequestsTotal, prev.counters.RequestsTotal),
			bytes:         d(r.Counters.BytesServedTotal, prev.counters.BytesServedTotal),
			backendErrors: d(r.Counters.BackendErrorsTotal, prev.counters.BackendErrorsTotal),
		}
	}
	t.status[r.NodeID] = cur
	return cur.rate
}

func ptr[T any](v T) *T { return &v }

// placementHeld notes the answering coordinator's placement (version,
// eligible) and returns how long it has held it, as far as API requests
// saw.
func (t *totals) placementHeld(version string, eligible int64, now time.Time) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.own.version != version || t.own.eligible != eligible || t.own.since.IsZero() {
		t.own = ownPlacement{version: version, eligible: eligible, since: now}
	}
	return now.Sub(t.own.since)
}

// agreement is a coordinator node's Agree (apiv1.Node): "yes" when the
// placement its record publishes is the answering coordinator's (or it is
// the answering one), "no" when they differ although both have been held
// for settle (a coordinator publishes a new placement within a heartbeat
// interval), "-" otherwise.
func agreement(n *apiv1.Node, self, version string, eligible int64, held, settle time.Duration, nowMs int64) string {
	switch {
	case n.Role != string(cluster.RoleCoordinator):
		return ""
	case n.NodeID == self:
		return "yes"
	case n.PlacementVersion == "":
		return "-"
	case n.PlacementVersion == version && n.EligibleWorkers == eligible:
		return "yes"
	}
	published := n.StatusAtUnixMs
	if published == 0 {
		published = n.UpdatedAtUnixMs
	}
	if held >= settle && time.Duration(nowMs-published)*time.Millisecond >= settle {
		return "no"
	}
	return "-"
}
