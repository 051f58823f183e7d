package etcd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

// Store is the etcd implementation of state.Store. It is safe for
// concurrent use; see the package documentation for its invariants.
type Store struct {
	// conn is the client, the request timeout and the store's lifetime
	// (conn.go); every log below holds it too.
	conn
	// skipLog counts the values reads left out (skipped.go).
	skipLog

	// The logs beside the records, each a concern of its own with its own
	// keys and lock: cache jobs, persisted cordons, node events, renewals.
	jobLog
	cordonLog
	*eventLog
	*renewalLog

	opts  Options // validated, defaults applied
	keys  keys
	log   *slog.Logger
	clock func() time.Time

	keeper *keeper
	cache  *watchCache // nil unless Options.CacheSnapshots

	compactor *compactor       // nil unless Options.CompactionInterval (compact.go)
	capacity  *capacityMonitor // nil unless Options.CapacityInterval (capacity.go)

	// leases are the incarnations' leases this store granted or learned
	// (leases.go), with their own lock.
	leases *leaseBook

	// mu guards hints. It is never held across a request, nor together
	// with any other lock: view releases it before it reads the watch
	// cache, whose Reflector has its own.
	mu    sync.RWMutex
	hints map[string]slotView // etcd key -> latest view this store wrote or read
	obs   *state.Observations // when this store first saw each record version

	memo      decodeMemo      // record versions decoded or written lately; safe for concurrent use
	commit    *committer      // group commit of UpsertNode's puts
	collector *statsCollector // registered with Options.Registerer; nil without

	stats statsCounters
}

// Bounds of the in-process caches. Evicting an entry only costs a read (a
// hint) or a keepalive that learns the lease again (a lease).
const (
	maxHints  = 1 << 16
	maxLeases = 1 << 16
	// maxAttempts bounds the compare-and-swap rounds of one write.
	maxAttempts = 8
)

// New connects to etcd and returns a store. It validates opts first (every
// error names the field), then dials; with a username it authenticates,
// so wrong credentials fail here with state.ErrUnauthenticated. New starts
// the snapshot cache's goroutine when Options.CacheSnapshots is set; Close
// ends it.
func New(ctx context.Context, opts Options) (*Store, error) {
	opts = opts.withDefaults()
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("etcd options: %w", err)
	}
	tlsCfg, err := opts.tlsConfig()
	if err != nil {
		return nil, fmt.Errorf("etcd options: %w", err)
	}
	dialOpts := []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(connUnaryInterceptor),
		grpc.WithChainStreamInterceptor(connStreamInterceptor),
		// gRPC's default reconnect backoff grows to 120 s: after an etcd
		// restart a coordinator could stay fail-closed for seconds to
		// minutes. Cap it so recovery follows the store within ~1 s.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: 2 * time.Second,
		}),
	}
	dialOpts = append(dialOpts, opts.dialOptions...)
	lifetime, stop := context.WithCancel(context.Background())
	// The client's own context: it bounds authentication in clientv3.New
	// (with DialTimeout) and carries the callInfo that classifies its error.
	clientCtx, ci := withCallInfo(lifetime)
	cfg := clientv3.Config{
		Endpoints:   opts.Endpoints,
		Username:    opts.Username,
		Password:    opts.Password,
		TLS:         tlsCfg,
		DialTimeout: opts.DialTimeout,
		DialOptions: dialOpts,
		Logger:      clientLogger(opts.Logger, opts.Endpoints, time.Now),
		Context:     clientCtx,
	}
	s := &Store{
		opts:  opts,
		keys:  keys{prefix: opts.Prefix},
		log:   opts.Logger.With("backend", "etcd"),
		clock: opts.Clock,
		hints: make(map[string]slotView),
		obs:   state.NewObservations(opts.Clock),
	}
	s.conn.endpoints, s.conn.timeout = opts.Endpoints, opts.RequestTimeout
	s.conn.lifetime, s.conn.stop = lifetime, stop
	s.skipLog.log = s.log
	c, k, skip := &s.conn, s.keys, &s.skipLog
	s.jobLog = jobLog{c: c, keys: k, skip: skip}
	s.cordonLog = cordonLog{c: c, keys: k, skip: skip}
	s.eventLog = &eventLog{c: c, keys: k, skip: skip, clock: opts.Clock}
	s.renewalLog = &renewalLog{c: c, keys: k, skip: skip, clock: opts.Clock, stats: &s.stats}
	s.commit = newCommitter(s)
	// A caller that gives up on New cancels the dial.
	stopDial := context.AfterFunc(ctx, stop)
	client, err := clientv3.New(cfg)
	if !stopDial() {
		if err == nil {
			_ = client.Close()
		}
		return nil, fmt.Errorf("etcd connect to %v: %w", opts.Endpoints, ctx.Err())
	}
	if err != nil {
		stop()
		return nil, s.mapError(fmt.Sprintf("connect to %v", opts.Endpoints), err, ci)
	}
	s.client = client
	if opts.CapacityInterval > 0 {
		s.capacity = newCapacityMonitor(s, opts.CapacityInterval)
		s.conn.noSpace = s.capacity.noteNoSpace
	}
	// The client keeps its own copy; the store keeps none, so printing the
	// store (or its options) cannot show it.
	s.opts.Password = ""
	s.keeper = newKeeper(pb.NewLeaseClient(client.ActiveConnection()), lifetime, s.spawn, s.log)
	s.leases = newLeaseBook(c, s.keeper, &s.stats, s.log)
	if opts.Registerer != nil {
		s.collector = newStatsCollector(s)
		if err := opts.Registerer.Register(s.collector); err != nil {
			stop()
			_ = client.Close()
			return nil, fmt.Errorf("etcd metrics: %w", err)
		}
	}
	if opts.CacheSnapshots {
		s.cache = newWatchCache(s)
		s.spawn(s.cache.run)
	}
	s.startMaintenance()
	s.log.Debug("etcd store created", "options", opts)
	return s, nil
}

// Backend returns "etcd".
func (s *Store) Backend() string { return "etcd" }

// Close ends the store's goroutines, streams and connection. Operations in
// flight and later fail with state.ErrClosed; open watches end. It is
// idempotent.
func (s *Store) Close() error {
	if !s.shut() {
		return nil
	}
	if s.collector != nil {
		s.opts.Registerer.Unregister(s.collector)
	}
	var errs []error
	if s.cache != nil {
		errs = append(errs, s.cache.close())
	}
	if err := s.client.Close(); err != nil && !errors.Is(err, context.Canceled) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// CheckReady returns nil when etcd answers a linearizable read of the
// prefix with these credentials now.
func (s *Store) CheckReady(ctx context.Context) error {
	ctx, cancel, ci, err := s.begin(ctx, "check ready")
	if err != nil {
		return err
	}
	defer cancel()
	if _, err := s.client.Get(ctx, s.keys.revisionProbe(), clientv3.WithCountOnly()); err != nil {
		return s.mapError("check ready", err, ci)
	}
	return nil
}

// Stats are cumulative counters of one store, for metrics and tests.
type Stats struct {
	// UnsupportedSkipped counts records of a schema version this build
	// cannot read that snapshots and watches skipped.
	UnsupportedSkipped uint64
	// MalformedSkipped counts values under the prefix that are not records
	// (or are stored under another record's key) that were skipped.
	MalformedSkipped uint64
	// LeaseGrants, LeaseRevokes and LeaseKeepAlives count lease requests.
	LeaseGrants     uint64
	LeaseRevokes    uint64
	LeaseKeepAlives uint64
	// WriteConflicts counts compare-and-swap rounds lost to another writer
	// or to a stale view.
	WriteConflicts uint64
	// CacheResyncs counts full reads of the prefix by the snapshot cache
	// (one at start, one after each lost watch).
	CacheResyncs uint64
	// CacheSnapshots and RangeSnapshots count snapshots answered from the
	// cache and by a prefix range read.
	CacheSnapshots uint64
	RangeSnapshots uint64
	// RecordDecodes counts stored values decoded. Each version is decoded
	// at most once however many of the store's watches deliver it, and a
	// version this store wrote is not decoded at all (see decodeMemo).
	RecordDecodes uint64
	// GroupCommits counts transactions that carried the puts of several
	// UpsertNode calls, and GroupedPuts the puts they carried (see
	// committer).
	GroupCommits uint64
	GroupedPuts  uint64
	// Renewals counts accepted heartbeats that only renewed their record's
	// lease (state.StatusEvery): no write, no revision.
	Renewals uint64
	// TTLChecks counts LeaseTimeToLive reads of transitions' silence
	// checks (state.MinSilence).
	TTLChecks uint64
	// RenewalLogBytes counts the bytes of the renewal batches this store
	// published (state.RenewalLog).
	RenewalLogBytes uint64
}

type statsCounters struct {
	grants, revokes, keepAlives, conflicts atomic.Uint64
	resyncs, cacheSnaps, rangeSnaps        atomic.Uint64
	decodes, groupCommits, groupedPuts     atomic.Uint64
	renewals, ttlChecks, renewalBytes      atomic.Uint64
	transitions                            state.TransitionCounts
}

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	c := &s.stats
	return Stats{
		UnsupportedSkipped: s.skipLog.unsupported.Load(),
		MalformedSkipped:   s.skipLog.malformed.Load(),
		LeaseGrants:        c.grants.Load(),
		LeaseRevokes:       c.revokes.Load(),
		LeaseKeepAlives:    c.keepAlives.Load(),
		WriteConflicts:     c.conflicts.Load(),
		CacheResyncs:       c.resyncs.Load(),
		CacheSnapshots:     c.cacheSnaps.Load(),
		RangeSnapshots:     c.rangeSnaps.Load(),
		RecordDecodes:      c.decodes.Load(),
		GroupCommits:       c.groupCommits.Load(),
		GroupedPuts:        c.groupedPuts.Load(),
		Renewals:           c.renewals.Load(),
		TTLChecks:          c.ttlChecks.Load(),
		RenewalLogBytes:    c.renewalBytes.Load(),
	}
}

// stored is one decoded etcd value: the record, or why it is unusable.
type stored struct {
	rec    *cluster.Record // nil when absent or unusable
	bad    error           // non-nil when a value exists but is unusable
	modRev int64           // 0 when absent
	lease  int64
}

// ClockSkew estimates how far the clocks of the coordinators whose writes
// this store saw are ahead of this one (state.Observations.ClockSkew).
func (s *Store) ClockSkew() (time.Duration, bool) { return s.obs.ClockSkew() }

// revision wraps an etcd revision as an opaque token.
func revision(r int64) state.Revision { return state.NewRevision(strconv.FormatInt(r, 10)) }

// parseRevision reads back a token made by revision.
func parseRevision(r state.Revision) (int64, bool) {
	n, err := strconv.ParseInt(r.String(), 10, 64)
	if err != nil || n <= 0 {
		return 0, false
	}
	return n, true
}
