package coordinator

import (
	"sync"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

// evidence is what this coordinator has itself observed of each record's
// current version, and so which time-based transitions it may propose
// (ADR 0001 amendment, "liveness judged from the store"). No decision
// reads it: eligibility is a function of the records alone. It only
// decides when this coordinator proposes to the store that a record is
// late (after unhealthy-after) or expired (after lease-ttl); the store
// applies a proposal only if the record is still the version seen, so a
// heartbeat that lands first always wins, and any number of coordinators
// may propose.
//
// A version's age counts only time this coordinator observed: from when
// it first saw the version, or from when its current observation began,
// whichever is later. Observation begins again after a failed read, a gap
// between reads longer than maxGap (its own stall) or a restart; and
// nothing is proposed before it has observed for a heartbeat interval.
type evidence struct {
	timing cluster.Timing

	mu       sync.Mutex // guards the fields below
	since    time.Time  // start of the current continuous observation; zero: not observing
	versions map[cluster.Key]seenVersion
	last     time.Time // start of the read last observed (observeEvery)
	gen      uint64    // observations so far: versions not marked with the latest are no longer listed
	// own are the renewals this coordinator accepted since it last
	// published them (takeOwn), for its peers (renewals.go); nil when the
	// store keeps no renewal log, so nothing is kept for nobody.
	own map[cluster.Key]state.Renewal
}

// observeEvery is how often observeThrottled looks at a view's records:
// a tenth of the heartbeat interval, at most 50 ms. Every view read
// (each batch of lookups, each API page) is not a new observation worth a
// pass over every record; ages then count from up to this much later,
// which only ever delays a proposal, by a small part of unhealthy-after.
func (e *evidence) observeEvery() time.Duration {
	return min(e.timing.HeartbeatInterval/10, 50*time.Millisecond)
}

// observeThrottled is observe for a read that started at now, unless a
// read that started less than observeEvery before was observed (nil
// then); after interrupt the next read is always observed.
func (e *evidence) observeThrottled(records []*cluster.Record, now time.Time) []proposal {
	e.mu.Lock()
	if !e.since.IsZero() && !e.last.IsZero() && now.Sub(e.last) < e.observeEvery() {
		e.mu.Unlock()
		return nil
	}
	e.mu.Unlock()
	return e.observe(records, now)
}

// seenVersion is one record version as this coordinator saw it.
type seenVersion struct {
	incarnation string
	seq         uint64
	late        bool
	firstSeen   time.Time
	// proposed is the transition last proposed for this version and
	// when; a proposal is repeated after a heartbeat interval while the
	// version stays.
	proposed   state.Transition
	proposedAt time.Time
	gen        uint64 // the observation that last listed it
	// heardMs is the latest heartbeat of this incarnation this
	// coordinator knows of that its record may not show (wall clock,
	// Unix ms): one it accepted that only renewed the lease, or a renewal
	// the store reported when it refused a proposal. Kept across versions
	// of the same incarnation.
	heardMs int64
}

// proposal is one transition to propose for the version seen.
type proposal struct {
	key         cluster.Key
	incarnation string
	seq         uint64
	transition  state.Transition
}

func newEvidence(t cluster.Timing) *evidence {
	return &evidence{timing: t, versions: map[cluster.Key]seenVersion{}}
}

// interrupt ends the current observation: a failed read or a gap.
func (e *evidence) interrupt() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.since = time.Time{}
}

// observe takes the records of a read that started at now and returns the
// transitions due. A record version seen for the first time counts from
// now; versions no longer listed are forgotten.
func (e *evidence) observe(records []*cluster.Record, now time.Time) []proposal {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.since.IsZero() {
		e.since = now
	}
	if now.After(e.last) {
		e.last = now
	}
	observing := now.Sub(e.since) >= e.timing.HeartbeatInterval
	var due []proposal
	e.gen++
	for _, r := range records {
		k := r.Key()
		v, ok := e.versions[k]
		if !ok || v.incarnation != r.IncarnationID || v.seq != r.HeartbeatSeq {
			heard := v.heardMs
			if v.incarnation != r.IncarnationID {
				heard = 0
			}
			v = seenVersion{incarnation: r.IncarnationID, seq: r.HeartbeatSeq, firstSeen: now, heardMs: heard}
		}
		v.late = r.Late
		if tr := e.dueLocked(v, now); observing && tr != 0 {
			v.proposed, v.proposedAt = tr, now
			due = append(due, proposal{key: k, incarnation: v.incarnation, seq: v.seq, transition: tr})
		}
		v.gen = e.gen
		e.versions[k] = v
	}
	if len(e.versions) > len(records) { // some are no longer listed
		for k, v := range e.versions {
			if v.gen != e.gen {
				delete(e.versions, k)
			}
		}
	}
	return due
}

// dueLocked returns the transition due for v at now, or 0.
func (e *evidence) dueLocked(v seenVersion, now time.Time) state.Transition {
	from := v.firstSeen
	if e.since.After(from) {
		from = e.since
	}
	age := now.Sub(from)
	var tr state.Transition
	switch {
	case age >= e.timing.LeaseTTL:
		tr = state.TransitionExpire
	case age >= e.timing.UnhealthyAfter && !v.late:
		tr = state.TransitionLate
	default:
		return 0
	}
	if v.proposed == tr && now.Sub(v.proposedAt) < e.timing.HeartbeatInterval {
		return 0 // proposed a moment ago; its answer is on the way
	}
	return tr
}

// renewed notes the store's answer to proposal p that the record's lease
// was renewed at at (on this coordinator's clock; wallMs the same instant
// on the wall clock, as early as it can have been): the version seen is
// alive as of then, so its age counts from then, and the next proposal
// for it waits until it could be due again.
func (e *evidence) renewed(p proposal, at time.Time, wallMs int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	v, ok := e.versions[p.key]
	if !ok || v.incarnation != p.incarnation || v.seq != p.seq {
		return
	}
	if at.After(v.firstSeen) {
		v.firstSeen = at
	}
	v.proposed, v.proposedAt = 0, time.Time{}
	v.heardMs = max(v.heardMs, wallMs)
	e.versions[p.key] = v
}

// heard notes a heartbeat of incarnation this coordinator accepted at
// wallMs that only renewed the lease, for a record it lists, and keeps it
// for its peers (takeOwn).
func (e *evidence) heard(key cluster.Key, incarnation string, wallMs int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if v, ok := e.versions[key]; ok && v.incarnation == incarnation {
		v.heardMs = max(v.heardMs, wallMs)
		e.versions[key] = v
	}
	if e.own != nil && len(e.own) < state.MaxRenewalBatch {
		e.own[key] = state.Renewal{Role: key.Role, NodeID: key.NodeID, Incarnation: state.IncarnationTag(incarnation), AtUnixMs: wallMs}
	}
}

// shareRenewals makes heard keep this coordinator's renewals for takeOwn:
// called once, before Run, when the store keeps a renewal log.
func (e *evidence) shareRenewals() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.own = map[cluster.Key]state.Renewal{}
}

// takeOwn returns the renewals heard since the last call and forgets them.
func (e *evidence) takeOwn() []state.Renewal {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.own) == 0 {
		return nil
	}
	out := make([]state.Renewal, 0, len(e.own))
	for _, r := range e.own {
		out = append(out, r)
	}
	clear(e.own)
	return out
}

// learn notes renewals a peer accepted (its wall clock): each raises the
// heartbeat time of the record it names while that record's incarnation
// carries the renewal's tag. It returns how many applied.
func (e *evidence) learn(clusterID string, rs []state.Renewal) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, r := range rs {
		k := cluster.Key{ClusterID: clusterID, Role: r.Role, NodeID: r.NodeID}
		if v, ok := e.versions[k]; ok && state.IncarnationTag(v.incarnation) == r.Incarnation && r.AtUnixMs > v.heardMs {
			v.heardMs = r.AtUnixMs
			e.versions[k] = v
			n++
		}
	}
	return n
}

// heardAt returns the latest heartbeat of incarnation this coordinator
// knows of beyond its record (renewed, heard), Unix ms; 0 if none.
func (e *evidence) heardAt(key cluster.Key, incarnation string) int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if v, ok := e.versions[key]; ok && v.incarnation == incarnation {
		return v.heardMs
	}
	return 0
}
