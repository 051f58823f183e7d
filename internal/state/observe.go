package state

import (
	"slices"
	"sync"
	"time"
)

// Observations is a store's local clock for record ages (ADR 0001 section
// 2's server-observed update time, made clock-skew free): for each slot it
// remembers the version of the record it last saw (an opaque backend
// token: an etcd mod revision, a Kubernetes resourceVersion) and when this
// process first saw that version, on its own clock (monotonic when the
// clock is time.Now). A record's age is the time since then; no other
// host's clock takes part, so two coordinators with skewed clocks that
// read the same revision age its records alike, up to the lag between
// their observations.
//
// A version seen for the first time counts from now: a coordinator that
// has just started treats every record as just updated, so for up to
// unhealthy-after it can count a process that died shortly before as
// healthy (the store's own lease still expires it).
//
// It also estimates the clock offset of the processes that wrote the
// records it sees change live (ClockSkew), from their own stamps.
//
// Concurrency: safe for concurrent use.
type Observations struct {
	clock func() time.Time

	mu      sync.Mutex // guards the fields below
	seen    map[string]observation
	samples []time.Duration // ring of recent skew samples
	next    int             // next ring slot
}

// observation is what the table knows of one slot: the last few versions
// it saw with when it first saw each, newest last. Keeping a few (not only
// the newest) lets a reader that lags a write by a version or two get the
// same time as every other reader of that version.
type observation struct {
	versions []seenVersion
	touched  time.Time // last seen, for Prune
}

type seenVersion struct {
	version string // an opaque token (See), or "" with rev (SeeRev)
	rev     int64
	at      time.Time
}

// versionsKept is how many versions of one slot the table remembers.
const versionsKept = 8

// skewSamples is how many recent samples ClockSkew takes the median of.
const skewSamples = 64

// NewObservations returns an empty table on clock.
func NewObservations(clock func() time.Time) *Observations {
	return &Observations{clock: clock, seen: make(map[string]observation)}
}

// See returns when this process first saw version of slot: now, when the
// version is new. writerUnixMs is the writer's own stamp of the version,
// or 0: it only feeds the skew estimate, and only when it replaces another
// version of a slot already known (a change seen as it happened).
func (o *Observations) See(slot, version string, writerUnixMs int64) time.Time {
	return o.see(slot, seenVersion{version: version}, writerUnixMs)
}

// SeeRev is See for a version that is a number (an etcd mod revision),
// without formatting it.
func (o *Observations) SeeRev(slot string, rev int64, writerUnixMs int64) time.Time {
	return o.see(slot, seenVersion{rev: rev}, writerUnixMs)
}

func (o *Observations) see(slot string, ver seenVersion, writerUnixMs int64) time.Time {
	now := o.clock()
	o.mu.Lock()
	defer o.mu.Unlock()
	ob, ok := o.seen[slot]
	ob.touched = now
	for _, v := range ob.versions {
		if v.version == ver.version && v.rev == ver.rev {
			o.seen[slot] = ob
			return v.at
		}
	}
	// A change of a slot already known was written moments ago: its
	// writer's stamp against now measures the writer's clock. A slot seen
	// for the first time may have been written long ago.
	if ok && writerUnixMs > 0 {
		o.sampleLocked(time.Duration(writerUnixMs-now.UnixMilli()) * time.Millisecond)
	}
	ver.at = now
	o.addLocked(slot, ob, ver)
	return now
}

func (o *Observations) addLocked(slot string, ob observation, v seenVersion) {
	if len(ob.versions) == versionsKept {
		ob.versions = slices.Delete(ob.versions, 0, 1)
	}
	ob.versions = append(ob.versions, v)
	o.seen[slot] = ob
}

// Age returns how long ago this process first saw version of slot (see
// See), and records the sighting.
func (o *Observations) Age(slot, version string) time.Duration {
	at := o.See(slot, version, 0)
	return o.clock().Sub(at)
}

// Prune drops slots not seen since before, so the table holds only what
// the store still lists.
func (o *Observations) Prune(before time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for k, ob := range o.seen {
		if ob.touched.Before(before) {
			delete(o.seen, k)
		}
	}
}

func (o *Observations) sampleLocked(d time.Duration) {
	if len(o.samples) < skewSamples {
		o.samples = append(o.samples, d)
		return
	}
	o.samples[o.next] = d
	o.next = (o.next + 1) % skewSamples
}

// ClockSkew estimates how far the clocks of the processes whose writes
// this store saw arrive are ahead of this one (negative: behind), as the
// median over the last changes seen live of their stamp minus the local
// time of arrival. It includes the propagation delay (a few milliseconds
// on a watch; up to the refresh interval where changes are seen by
// listing). ok is false before any sample.
func (o *Observations) ClockSkew() (skew time.Duration, ok bool) {
	o.mu.Lock()
	s := slices.Clone(o.samples)
	o.mu.Unlock()
	if len(s) == 0 {
		return 0, false
	}
	slices.Sort(s)
	return s[len(s)/2], true
}
