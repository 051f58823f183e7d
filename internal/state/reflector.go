package state

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/talonhq/talon/internal/backoff"
	"github.com/talonhq/talon/internal/cluster"
)

// MirrorChange is one change a reflector applies, in the store's order.
type MirrorChange[E MirrorEntry] struct {
	// Name is the stored object that changed; "" for a change that only
	// advances the revision (a progress notification, a bookmark, a key
	// outside the layout).
	Name string
	// Entry is what the object holds now; the zero E when it holds no
	// record any more (deleted, or no longer a record).
	Entry E
	// Rev is the change's revision, and Token the same as the backend
	// writes it (the revision of a watch event built from this change).
	Rev   uint64
	Token string
}

// ReflectorSource is what a backend gives a reflector: its list, its
// watch and how to read an entry.
type ReflectorSource[E MirrorEntry] struct {
	// Name names the reflector in logs ("etcd snapshot cache").
	Name string
	// List lists every object at one revision. It runs outside the
	// reflector's lock.
	List func(ctx context.Context) (entries []E, rev uint64, token string, err error)
	// Watch watches from the stream's revision until it fails or ctx
	// ends: it calls stream.Established once its stream exists (from then
	// on every change after the listing arrives on it), and stream.Apply
	// with changes in the store's order. It returns the error that ended
	// it.
	Watch func(ctx context.Context, stream Stream[E]) error
	// Record returns the record an entry holds, or false for an entry
	// that holds no readable one (a snapshot leaves it out; so does a
	// watch event).
	Record func(E) (*cluster.Record, bool)
	// Final reports whether err ends the reflector for good rather than
	// being retried (nil: every error is retried).
	Final func(err error) bool
	// Available, if set, reports whether the store still has the changes
	// after revision after (nil) or has compacted them (an error wrapping
	// ErrCompacted): Subscribe asks it before replaying from the ring, so
	// a watch from a revision the store has compacted ends with
	// ErrCompacted as the Store contract says, even though the ring could
	// replay it.
	Available func(ctx context.Context, after uint64) error
	// Go runs f on a goroutine that the store's Close waits for, or
	// returns false once the store is closed. Subscribers' goroutines run
	// on it.
	Go func(f func()) bool
}

// Reflector keeps a Mirror of a backend's records in step with the store,
// fed by one watch: it lists every object at revision R, watches from R,
// and on any watch failure (compaction, a lost stream) lists again after
// the one backoff. It is what both caching backends (etcd, Kubernetes)
// run, with their List and Watch injected, the way Write serves writes.
//
// Its revision is the newest revision up to which it has applied every
// change: a consistent read waits until it reaches a revision the store
// returned (WaitFor), and asks the backend to move it on by its own
// means (an etcd progress request, a Kubernetes fence write).
//
// It also serves Store.Watch from the changes it applies (Subscribe),
// through its FanOut, so a coordinator holds one watch per store: the
// fan-out's ring replays what a subscriber's revision is behind by, a
// subscriber that falls a ring's worth behind ends with ErrUnavailable,
// and a lost watch ends every subscriber with its cause.
//
// Concurrency: mu guards the fields below it; the mirror's readers hold
// it for reading (Read). The fan-out has its own lock, taken after mu,
// never before.
type Reflector[E MirrorEntry] struct {
	src ReflectorSource[E]
	log *slog.Logger
	// lifetime is the owning store's: Run returns and subscribers end
	// when it ends.
	lifetime context.Context
	// fan serves Store.Watch from the changes applied (fanout.go).
	fan *FanOut

	mu sync.RWMutex
	// ready: the watch is established, so rev advances.
	ready bool
	// listing is set while a listing is in flight, until the reflector is
	// ready or the attempt fails: a reader waits for it rather than
	// reading the store a second time (AwaitReady).
	listing bool
	// off: Run has returned; Subscribe answers false.
	off bool
	// lastErr is what ended the last watch or listing, until the next
	// is established: a subscriber that comes meanwhile is told.
	lastErr error
	rev     uint64
	token   string
	idx     *Mirror[E]
	changed chan struct{} // closed and replaced whenever rev, ready or listing change
}

// DefaultRingSize is how many recent events a reflector keeps for
// subscribers whose revision it has passed: a coordinator subscribes
// right after the snapshot it watches from, so the gap is milliseconds of
// changes, and 8,192 covers several seconds of 10,000 workers'
// heartbeats.
const DefaultRingSize = 8192

// NewReflector returns a reflector that Run starts. A listing counts as
// in flight from the start, so a reader that comes before Run's first
// listing waits for it. ringSize <= 0 means DefaultRingSize.
func NewReflector[E MirrorEntry](lifetime context.Context, log *slog.Logger, src ReflectorSource[E], ringSize int) *Reflector[E] {
	return &Reflector[E]{
		src: src, log: log, lifetime: lifetime,
		fan: NewFanOut(lifetime, src.Name, ringSize, 0, src.Go),
		idx: NewMirror[E](), changed: make(chan struct{}), listing: true,
	}
}

// resyncPolicy is the one backoff between a lost watch and the next
// listing.
var resyncPolicy = backoff.Policy{Initial: 50 * time.Millisecond, Max: 5 * time.Second, Jitter: 0.2}

// Run keeps the mirror in step until the lifetime ends or the source
// reports a final error: list, watch, and after any failure list again
// after a backoff.
func (r *Reflector[E]) Run() {
	defer r.stop()
	retry := backoff.New(resyncPolicy)
	for r.lifetime.Err() == nil {
		synced, err := r.syncAndWatch()
		r.lost(err)
		if r.lifetime.Err() != nil {
			return
		}
		if r.src.Final != nil && r.src.Final(err) {
			r.log.Info(r.src.Name+" off", "err", err)
			return
		}
		if synced {
			retry.Reset()
		}
		wait := retry.Next()
		level := r.log.Warn
		if errors.Is(err, ErrCompacted) {
			level = r.log.Info
		}
		level(r.src.Name+" lost its watch; listing again", "err", err, "retryIn", wait)
		if backoff.Sleep(r.lifetime, wait) != nil {
			return
		}
	}
}

// syncAndWatch lists, then runs the watch until it fails. synced reports
// whether the listing succeeded.
func (r *Reflector[E]) syncAndWatch() (synced bool, err error) {
	r.setListing()
	entries, rev, token, err := r.src.List(r.lifetime)
	if err != nil {
		return false, err
	}
	r.reset(entries, rev, token)
	err = r.src.Watch(r.lifetime, Stream[E]{r})
	if err == nil {
		err = fmt.Errorf("%w: %s watch ended", ErrUnavailable, r.src.Name)
	}
	return true, err
}

// Stream is how a source's Watch feeds its reflector.
type Stream[E MirrorEntry] struct{ r *Reflector[E] }

// Established marks the watch as set up: from now on the reflector's
// revision advances with the changes applied.
func (s Stream[E]) Established() { s.r.setReady() }

// Apply applies changes, in the store's order.
func (s Stream[E]) Apply(changes []MirrorChange[E]) { s.r.apply(changes) }

// Revision returns the reflector's revision, to resume a watch from.
func (s Stream[E]) Revision() (uint64, string) { return s.r.Revision() }

// broadcastLocked wakes every waiter; mu must be held for writing.
func (r *Reflector[E]) broadcastLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *Reflector[E]) setListing() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.listing = true
	r.broadcastLocked()
}

func (r *Reflector[E]) setReady() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ready, r.listing, r.lastErr = true, false, nil
	r.broadcastLocked()
}

// lost marks the reflector not ready after its watch or listing failed
// with err, and ends every subscriber with it: they missed what comes
// before the next listing.
func (r *Reflector[E]) lost(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ready, r.listing = false, false
	if err == nil || r.lifetime.Err() != nil {
		err = fmt.Errorf("%s stopped: %w", r.src.Name, ErrClosed)
	}
	r.lastErr = err
	r.fan.End(fmt.Errorf("%s lost its watch: %w", r.src.Name, err))
	r.broadcastLocked()
}

// stop marks the reflector off for good.
func (r *Reflector[E]) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.off, r.ready, r.listing = true, false, false
	r.fan.End(fmt.Errorf("%s stopped: %w", r.src.Name, ErrClosed))
	r.broadcastLocked()
}

// reset replaces the mirror with a listing at rev; the reflector is not
// ready until its watch is established. The ring restarts at rev.
func (r *Reflector[E]) reset(entries []E, rev uint64, token string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.idx.Reset(entries)
	r.rev, r.token = rev, token
	r.fan.Reset(rev)
	r.broadcastLocked()
}

// apply applies changes in order, advances the revision and hands the
// watch events they make to the fan-out.
func (r *Reflector[E]) apply(changes []MirrorChange[E]) {
	if len(changes) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var events []FanEvent
	for _, ch := range changes {
		if ch.Name != "" {
			if ev, ok := r.changeLocked(ch); ok {
				events = append(events, FanEvent{Rev: ch.Rev, Event: ev})
			}
		}
		if ch.Rev > r.rev {
			r.rev, r.token = ch.Rev, ch.Token
		}
	}
	r.fan.Publish(events)
	r.broadcastLocked()
}

// changeLocked applies one change to the mirror and returns the watch
// event it makes: a put of a readable record, or a delete of a slot that
// held one (a watcher sees what a snapshot would).
func (r *Reflector[E]) changeLocked(ch MirrorChange[E]) (Event, bool) {
	old, had := r.idx.Get(ch.Name)
	hadRecord := had && r.readable(old)
	var zero E
	if ch.Entry == zero {
		r.idx.Delete(ch.Name)
		if !hadRecord {
			return Event{}, false
		}
		return Event{Type: EventDelete, Key: old.MirrorKey(), Revision: NewRevision(ch.Token)}, true
	}
	r.idx.Put(ch.Entry)
	if rec, ok := r.src.Record(ch.Entry); ok {
		return Event{Type: EventPut, Key: ch.Entry.MirrorKey(), Record: rec, Revision: NewRevision(ch.Token)}, true
	}
	if hadRecord {
		return Event{Type: EventDelete, Key: old.MirrorKey(), Revision: NewRevision(ch.Token)}, true
	}
	return Event{}, false
}

func (r *Reflector[E]) readable(e E) bool {
	_, ok := r.src.Record(e)
	return ok
}

// Ready reports whether the watch is established.
func (r *Reflector[E]) Ready() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.ready
}

// AwaitReady reports whether the reflector is ready, waiting first while
// a listing is in flight (it ends within the backend's request timeout).
// It returns false at once while the reflector backs off after a failure.
func (r *Reflector[E]) AwaitReady(ctx context.Context) bool {
	for {
		r.mu.RLock()
		ready, listing, changed := r.ready, r.listing, r.changed
		r.mu.RUnlock()
		if ready || !listing {
			return ready
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return false
		case <-r.lifetime.Done():
			return false
		}
	}
}

// Revision returns the reflector's revision and its token.
func (r *Reflector[E]) Revision() (uint64, string) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.rev, r.token
}

// Reached reports, without waiting, whether the reflector is ready and
// whether its revision has reached target.
func (r *Reflector[E]) Reached(target uint64) (reached, ready bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.ready && r.rev >= target, r.ready
}

// WaitFor blocks until the revision reaches target (reached), the
// reflector stops being ready (!ready), limit passes (limit > 0), or ctx
// ends (err). The backend nudges a slow revision between calls.
func (r *Reflector[E]) WaitFor(ctx context.Context, target uint64, limit time.Duration) (reached, ready bool, err error) {
	var expired <-chan time.Time
	if limit > 0 {
		t := time.NewTimer(limit)
		defer t.Stop()
		expired = t.C
	}
	for {
		r.mu.RLock()
		ready, rev, changed := r.ready, r.rev, r.changed
		r.mu.RUnlock()
		switch {
		case !ready:
			return false, false, nil
		case rev >= target:
			return true, true, nil
		}
		select {
		case <-changed:
		case <-expired:
			return false, true, nil
		case <-ctx.Done():
			return false, true, fmt.Errorf("%s at revision %d waiting for revision %d: %w", r.src.Name, rev, target, ctx.Err())
		}
	}
}

// Read calls f with the mirror, its revision and token, under the read
// lock, if the reflector is ready and its revision is at least min; it
// reports whether it called f. f must not keep idx.
func (r *Reflector[E]) Read(min uint64, f func(idx *Mirror[E], rev uint64, token string)) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if !r.ready || r.rev < min {
		return false
	}
	f(r.idx, r.rev, r.token)
	return true
}
