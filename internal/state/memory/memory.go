package memory

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

// Defaults for Options.
const (
	DefaultHistoryLimit  = 10_000
	DefaultSweepInterval = time.Second
	// DefaultStallThreshold is Options.StallThreshold with the real clock.
	DefaultStallThreshold = 5 * time.Second
)

// Options configures a Store. The zero value is valid.
type Options struct {
	// Clock returns the current time. Default time.Now; tests inject a fake
	// clock to drive lease expiry.
	Clock func() time.Time
	// HistoryLimit bounds the watch history (the fan-out's ring), in
	// events. Default DefaultHistoryLimit. A watch from a revision older
	// than the history ends with state.ErrCompacted; a watcher that falls
	// this many events behind ends with state.ErrUnavailable.
	HistoryLimit int
	// SweepInterval is how often each open watch expires due leases, so a
	// watcher sees an expiry when nothing else touches the store. Default
	// DefaultSweepInterval; negative disables (expiry then happens only
	// inside operations and Sweep).
	SweepInterval time.Duration
	// Logger receives debug logs of expiries and compactions. Default: discard.
	Logger *slog.Logger
	// StallThreshold is the longest step of the clock between two of the
	// store's observations (operations, sweeps, its ticks) that counts in
	// full: of a longer step (the process was stopped, the machine paused)
	// only StallThreshold counts, and every lease deadline moves out by the
	// rest, as etcd's lessor extends leases after a leader change. Default
	// DefaultStallThreshold with the real clock, off with an injected Clock
	// (tests then drive expiry by advancing it); negative disables. With it
	// on, the store's observations are its operations and the sweeps of
	// its open watches (every SweepInterval): a store nobody watches or
	// calls for longer than StallThreshold counts that time as a stall.
	StallThreshold time.Duration
}

// Store is the in-memory state.Store. Create it with New; the zero value is
// not usable. See the package documentation for its invariants.
type Store struct {
	clock         func() time.Time
	log           *slog.Logger
	historyLimit  int
	sweepInterval time.Duration
	stallLimit    time.Duration // 0: off

	closing chan struct{} // closed by Close
	// lifetime is cancelled by Close: it ends the watches (and their
	// sweepers).
	lifetime context.Context
	stop     context.CancelFunc
	// fan serves Watch: the history ring and the watchers, with its own
	// lock, taken after mu. Writers publish to it under mu.
	fan *state.FanOut
	// spawnMu guards spawnOff and adding to wg, so Close never races an Add.
	spawnMu  sync.Mutex
	spawnOff bool
	wg       sync.WaitGroup // the watches' goroutines and their sweepers

	// faultMu guards the fields below. It may be taken while mu is held
	// (Watch checks the fault after subscribing), never the other way round.
	faultMu      sync.Mutex
	fault        error
	faultChanged chan struct{} // closed and replaced on every SetFault

	// observed is the clock (unix ns) at the store's last observation of
	// it; readers advance it under mu held shared, hence atomic (see
	// noteLocked and observeLocked).
	observed atomic.Int64

	// events is the shared event log (events.go), with its own lock.
	events eventRing
	// cordons are the persisted cordons (cordons.go), with their own lock.
	cordons cordonTable
	// jobs are the cache jobs (jobs.go), with their own lock.
	jobs jobTable

	// mu guards the fields below.
	mu       sync.RWMutex
	closed   bool
	rev      uint64         // current revision
	revTok   state.Revision // rev as a token
	slots    map[cluster.Key]*slot
	gens     map[cluster.Key]uint64 // last generation issued per slot; outlives its records
	clusters map[string]*view       // only clusters with at least one record
	expiry   expiryHeap
}

// slot is one stored record and its lease.
type slot struct {
	key       cluster.Key
	rec       *cluster.Record // immutable once stored
	modRev    uint64          // revision that wrote rec: the slot's version
	expiresAt time.Time
	renewedAt time.Time // the last renewal without a write since rec was written; zero if none (moved with expiresAt by unobserved time)
	heapIdx   int
}

// view is one cluster's records, sorted by role then node ID.
type view struct {
	recs []*cluster.Record
}

var _ state.Store = (*Store)(nil)

// New returns an empty store. It starts no goroutine: watches start their
// own and Close ends them.
func New(opts Options) *Store {
	s := &Store{
		clock:         opts.Clock,
		log:           opts.Logger,
		historyLimit:  opts.HistoryLimit,
		sweepInterval: opts.SweepInterval,
		closing:       make(chan struct{}),
		faultChanged:  make(chan struct{}),
		rev:           1,
		revTok:        state.NewRevision("1"),
		slots:         make(map[cluster.Key]*slot),
		gens:          make(map[cluster.Key]uint64),
		clusters:      make(map[string]*view),
	}
	switch {
	case opts.StallThreshold > 0:
		s.stallLimit = opts.StallThreshold
	case opts.StallThreshold == 0 && s.clock == nil:
		s.stallLimit = DefaultStallThreshold
	}
	if s.clock == nil {
		s.clock = time.Now
	}
	s.observed.Store(s.clock().UnixNano())
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.historyLimit <= 0 {
		s.historyLimit = DefaultHistoryLimit
	}
	s.lifetime, s.stop = context.WithCancel(context.Background())
	s.fan = state.NewFanOut(s.lifetime, "memory store", s.historyLimit, s.rev, s.spawnWatch)
	if s.sweepInterval == 0 {
		s.sweepInterval = DefaultSweepInterval
	}
	return s
}

// Backend returns "memory".
func (s *Store) Backend() string { return "memory" }

// Snapshot returns the cluster's non-expired records, ordered by role then
// node ID, at one revision. The records are shared and must not be modified.
func (s *Store) Snapshot(ctx context.Context, clusterID string) (*state.Snapshot, error) {
	if err := s.gate(ctx, "snapshot"); err != nil {
		return nil, err
	}
	if err := cluster.ValidateID("clusterId", clusterID); err != nil {
		return nil, fmt.Errorf("memory store snapshot: %w: %w", state.ErrInvalidRecord, err)
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return nil, fmt.Errorf("memory store snapshot: %w", state.ErrClosed)
	}
	now := s.clock()
	if !s.pendingLocked(now) {
		defer s.mu.RUnlock()
		return s.snapshotLocked(clusterID, now), nil
	}
	s.mu.RUnlock()

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("memory store snapshot: %w", state.ErrClosed)
	}
	now = s.clock()
	s.sweepLocked(now)
	return s.snapshotLocked(clusterID, now), nil
}

// snapshotLocked builds a snapshot; mu must be held (shared is enough).
func (s *Store) snapshotLocked(clusterID string, now time.Time) *state.Snapshot {
	var recs []*cluster.Record
	if v := s.clusters[clusterID]; v != nil {
		recs = slices.Clone(v.recs)
	} else {
		recs = []*cluster.Record{}
	}
	return &state.Snapshot{
		ClusterID:        clusterID,
		Records:          recs,
		Revision:         s.revTok,
		ObservedAtUnixMs: now.UnixMilli(),
	}
}

// CheckReady returns nil unless a fault is injected or the store is closed.
func (s *Store) CheckReady(ctx context.Context) error {
	return s.gate(ctx, "check ready")
}

// Close ends every open watch (each receives state.ErrClosed when its
// consumer is ready for it; otherwise its channel is just closed), waits for
// their goroutines and makes every later operation fail with ErrClosed. It
// is idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.closing)
	s.mu.Unlock()
	s.spawnMu.Lock()
	s.spawnOff = true
	s.spawnMu.Unlock()
	s.stop()
	s.wg.Wait()
	return nil
}

// SetFault makes every operation fail with err until ClearFault: Upsert,
// RemoveNode, Snapshot and CheckReady return an error wrapping err, and
// every open watch and every watch opened meanwhile ends with a batch
// carrying it. When err wraps state.ErrTimeout, operations instead block
// until their context ends (or the fault is cleared, after which they
// proceed), like requests to a server that stopped answering, and then
// return an error wrapping state.ErrTimeout and the context's error.
// SetFault(nil) is ClearFault. Sweep and Compact ignore faults.
func (s *Store) SetFault(err error) {
	s.faultMu.Lock()
	defer s.faultMu.Unlock()
	s.fault = err
	close(s.faultChanged)
	s.faultChanged = make(chan struct{})
	if err != nil {
		// faultMu is held: a watch that subscribes meanwhile checks the
		// fault after subscribing and ends itself.
		s.fan.End(fmt.Errorf("memory store watch: %w", err))
	}
}

// ClearFault restores service after SetFault.
func (s *Store) ClearFault() { s.SetFault(nil) }

func (s *Store) currentFault() (<-chan struct{}, error) {
	s.faultMu.Lock()
	defer s.faultMu.Unlock()
	return s.faultChanged, s.fault
}

// gate is the entry check of every operation: the caller's context, Close
// and the injected fault.
func (s *Store) gate(ctx context.Context, op string) error {
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("memory store %s: %w", op, err)
		}
		select {
		case <-s.closing:
			return fmt.Errorf("memory store %s: %w", op, state.ErrClosed)
		default:
		}
		changed, fault := s.currentFault()
		if fault == nil {
			return nil
		}
		if !errors.Is(fault, state.ErrTimeout) {
			return fmt.Errorf("memory store %s: %w", op, fault)
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("memory store %s: %w: %w", op, fault, ctx.Err())
			}
			return fmt.Errorf("memory store %s: %w", op, ctx.Err())
		case <-changed:
		case <-s.closing:
			return fmt.Errorf("memory store %s: %w", op, state.ErrClosed)
		}
	}
}

// Sweep expires every record whose lease is due now and returns how many it
// expired. Operations sweep on their own; Sweep exists for callers that want
// expiry delivered to watchers at a moment of their choosing.
func (s *Store) Sweep() int {
	s.mu.RLock()
	due := !s.closed && s.pendingLocked(s.clock())
	s.mu.RUnlock()
	if !due {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0
	}
	return s.sweepLocked(s.clock())
}

// Compact discards the watch history up to and including rev, so a watch
// from an older revision ends with state.ErrCompacted. Open watches keep
// what is queued for them. rev must be a revision of
// this store no newer than the current one.
func (s *Store) Compact(rev state.Revision) error {
	r, err := strconv.ParseUint(rev.String(), 10, 64)
	if err != nil {
		return fmt.Errorf("memory store compact: revision %q is not a revision of this store", rev.String())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r > s.rev {
		return fmt.Errorf("memory store compact: revision %d is newer than the current revision %d", r, s.rev)
	}
	s.compactLocked(r)
	return nil
}

// CompactAll discards the whole watch history: only a watch from the
// current revision can still start.
func (s *Store) CompactAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.compactLocked(s.rev)
}

func (s *Store) compactLocked(r uint64) {
	s.fan.Compact(r)
	s.log.Debug("memory store compacted", "revision", r)
}

// dueLocked reports whether some lease has expired at now; mu must be held.
func (s *Store) dueLocked(now time.Time) bool {
	return len(s.expiry) > 0 && !now.Before(s.expiry[0].expiresAt)
}

// sweepLocked expires every due lease, each as its own change; mu must be
// held exclusively.
func (s *Store) sweepLocked(now time.Time) int {
	s.observeLocked(now)
	n := 0
	for s.dueLocked(now) {
		sl := s.expiry[0]
		s.deleteLocked(sl)
		s.appendLocked(state.Event{Type: state.EventDelete, Key: sl.key})
		s.log.Debug("memory store lease expired", "key", sl.key.String(), "incarnation", sl.rec.IncarnationID, "revision", s.rev)
		n++
	}
	return n
}

// deleteLocked removes sl from every index; mu must be held exclusively.
func (s *Store) deleteLocked(sl *slot) {
	delete(s.slots, sl.key)
	heap.Remove(&s.expiry, sl.heapIdx)
	v := s.clusters[sl.key.ClusterID]
	v.remove(sl.key)
	if len(v.recs) == 0 {
		delete(s.clusters, sl.key.ClusterID)
	}
}

// appendLocked records one change under the next revision and publishes
// it to the watchers; mu must be held exclusively.
func (s *Store) appendLocked(ev state.Event) {
	s.rev++
	s.revTok = state.NewRevision(strconv.FormatUint(s.rev, 10))
	ev.Revision = s.revTok
	s.fan.Publish([]state.FanEvent{{Rev: s.rev, Event: ev}})
}

func compareKey(r *cluster.Record, k cluster.Key) int {
	if c := cmp.Compare(r.Role, k.Role); c != 0 {
		return c
	}
	return cmp.Compare(r.NodeID, k.NodeID)
}

// put inserts or replaces r, keeping the order.
func (v *view) put(r *cluster.Record) {
	i, found := slices.BinarySearchFunc(v.recs, r.Key(), compareKey)
	if found {
		v.recs[i] = r
		return
	}
	v.recs = slices.Insert(v.recs, i, r)
}

func (v *view) remove(k cluster.Key) {
	if i, found := slices.BinarySearchFunc(v.recs, k, compareKey); found {
		v.recs = slices.Delete(v.recs, i, i+1)
	}
}

// expiryHeap is a min-heap of slots by expiry, each slot knowing its index
// so a refreshed lease is fixed in place.
type expiryHeap []*slot

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].expiresAt.Before(h[j].expiresAt) }
func (h expiryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIdx = i
	h[j].heapIdx = j
}

func (h *expiryHeap) Push(x any) {
	sl := x.(*slot)
	sl.heapIdx = len(*h)
	*h = append(*h, sl)
}

func (h *expiryHeap) Pop() any {
	old := *h
	n := len(old)
	sl := old[n-1]
	old[n-1] = nil
	*h = old[:n-1]
	sl.heapIdx = -1
	return sl
}
