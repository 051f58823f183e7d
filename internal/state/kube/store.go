package kube

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

// BackendName is what Backend returns.
const BackendName = "kubernetes"

var _ state.Store = (*Store)(nil)

// Store is the Kubernetes backend of state.Store: one coordination.k8s.io/v1
// Lease per Talon process in one namespace (see the package documentation
// for the mapping and its invariants).
//
// A Store is safe for concurrent use. It owns one goroutine per open
// Watch, the snapshot cache's goroutine and those of its shared probes and
// fence writes; Close ends them all, deletes the fence and closes the
// store's idle connections.
type Store struct {
	// lifecycle is the store's lifetime and the goroutines Close waits
	// for (lifecycle.go).
	lifecycle

	// The logs beside the records, each a concern of its own with its own
	// client and names: cache jobs, persisted cordons, node events.
	jobLog
	cordonLog
	*eventLog

	leases coordclient.LeaseInterface
	// cacheLeases is leases without the client-side rate limiter, for the
	// snapshot cache's probes, fences, list and watch (see New).
	cacheLeases coordclient.LeaseInterface
	opts        Options // with defaults applied; read-only after New
	log         *slog.Logger
	now         func() time.Time
	// transport is the store's own HTTP transport, closed by Close.
	transport http.RoundTripper
	// watchSession is how long the API server keeps one watch request
	// open before the store resumes with a new one (tests shorten it).
	watchSession time.Duration

	// cache holds the Leases this store wrote last, so a heartbeat costs
	// one request (a PATCH) instead of two (GET, PATCH).
	cache *leaseCache
	// writes bounds the Lease writes in flight (Options.MaxInflightWrites).
	writes *writeGate
	// transitions counts ProposeTransition calls by operation and outcome.
	transitions transitionCounter
	// snaps is the snapshot cache (nil unless Options.CacheSnapshots); its
	// goroutine starts with the first Snapshot (startSnaps).
	snaps      *snapCache
	startSnaps sync.Once
	// fenceName is the name of this store's fence Lease (FenceName of
	// Options.Identity); nonce makes its fence writes differ from those of
	// other stores of the same identity.
	fenceName, nonce string

	// stats are the store's counters (Stats); statsMetrics exports them.
	stats        storeStats
	statsMetrics prometheus.Collector

	// observer remembers when this store first saw each Lease version.
	observer
}

// observer remembers when this store first saw each Lease at its current
// resourceVersion: the origin of the record ages shown (UpdatedAtUnixMs),
// never of liveness. It is safe for concurrent use.
type observer struct {
	obs *state.Observations
	// pruned is when (unix ns) Snapshot last pruned obs.
	pruned atomic.Int64
}

// storeStats are the counters behind Stats.
type storeStats struct {
	decodes, cacheSnaps, listSnaps, probes, fences, resyncs, renewals atomic.Uint64
}

// newTransitionCounter is talon_state_kube_transitions_total, with every
// series of its bounded labels present from the start.
func newTransitionCounter() *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "talon_state_kube_transitions_total",
		Help: "ProposeTransition calls, by operation (the transition: late, expire) and outcome (accepted, stale, not_found, error).",
	}, []string{"operation", "outcome"})
	for _, tr := range []state.Transition{state.TransitionLate, state.TransitionExpire} {
		for _, o := range []string{"accepted", "stale", "not_found", "error"} {
			c.WithLabelValues(tr.String(), o)
		}
	}
	return c
}

// transitionCounter is talon_state_kube_transitions_total.
type transitionCounter struct{ *prometheus.CounterVec }

// note counts one ProposeTransition answer.
func (c transitionCounter) note(tr state.Transition, res state.WriteResult, err error) {
	outcome := res.Outcome.String()
	if err != nil || res.Outcome < state.OutcomeAccepted || res.Outcome > state.OutcomeNotFound {
		outcome = "error"
	}
	c.WithLabelValues(tr.String(), outcome).Inc()
}

// Stats are cumulative counters of one store (exported as
// talon_state_kube_* metrics, and read by tests).
type Stats struct {
	// RecordDecodes counts records decoded from Lease annotations. A
	// heartbeat decided on the write cache decodes none, and the snapshot
	// cache decodes each Lease version at most once (none it wrote).
	RecordDecodes uint64
	// CacheSnapshots and ListSnapshots count snapshots answered from the
	// snapshot cache and with a LIST of the cluster's Leases.
	CacheSnapshots, ListSnapshots uint64
	// RevisionProbes counts the consistent reads of the current revision
	// the cache's snapshots sent (shared by concurrent snapshots), and
	// FenceWrites the fence writes (likewise shared).
	RevisionProbes, FenceWrites uint64
	// CacheResyncs counts the cache's LISTs of the namespace: one at start,
	// one after each lost watch.
	CacheResyncs uint64
	// Renewals counts accepted heartbeats that only renewed their Lease
	// (a merge patch of renewTime and AnnotationRenewSeq, see renew.go).
	Renewals uint64
}

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	return Stats{
		RecordDecodes:  s.stats.decodes.Load(),
		CacheSnapshots: s.stats.cacheSnaps.Load(),
		ListSnapshots:  s.stats.listSnaps.Load(),
		RevisionProbes: s.stats.probes.Load(),
		FenceWrites:    s.stats.fences.Load(),
		CacheResyncs:   s.stats.resyncs.Load(),
		Renewals:       s.stats.renewals.Load(),
	}
}

// decode is decodeLeaseSeq without the status sequence, counted.
func (s *Store) decode(l *coordv1.Lease, want cluster.Key) (*cluster.Record, cluster.Key, error) {
	rec, key, _, err := s.decodeSeq(l, want)
	return rec, key, err
}

// decodeSeq is decodeLeaseSeq, counted.
func (s *Store) decodeSeq(l *coordv1.Lease, want cluster.Key) (*cluster.Record, cluster.Key, uint64, error) {
	s.stats.decodes.Add(1)
	return decodeLeaseSeq(l, want)
}

// obsPruneInterval is how often Snapshot drops the observations of Leases
// no read has listed for obsKeep.
const (
	obsPruneInterval = time.Minute
	obsKeep          = 10 * time.Minute
)

// pruneObservations bounds obs by the Leases the store still lists. The
// snapshot cache observes a Lease version once, when it arrives, so the
// Leases it holds are marked as listed first.
func (s *Store) pruneObservations(now time.Time) {
	last := s.pruned.Load()
	if now.UnixNano()-last < int64(obsPruneInterval) || !s.pruned.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	if s.snaps != nil {
		s.snaps.touch()
	}
	s.obs.Prune(now.Add(-obsKeep))
}

// New builds a Store from opts. It validates opts (errors name the field)
// and builds the client, but does not contact the API server: CheckReady
// does. ctx is not retained.
func New(ctx context.Context, opts Options) (*Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	cfg, err := o.restConfig()
	if err != nil {
		return nil, err
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kube client: %w", err)
	}
	cs, err := kubernetes.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("kube client: %w", err)
	}
	// The snapshot cache's requests bypass the client-side rate limiter
	// (on the same connections): at most two probes and one fence are in
	// flight at a time, so they are bounded by their round trips, and a
	// burst of lookups must not take the heartbeats' request budget.
	cacheCfg := rest.CopyConfig(cfg)
	cacheCfg.QPS, cacheCfg.RateLimiter = -1, nil
	cacheCS, err := kubernetes.NewForConfigAndClient(cacheCfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("kube client: %w", err)
	}
	nonce := make([]byte, 8)
	_, _ = rand.Read(nonce)
	leases := cs.CoordinationV1().Leases(o.Namespace)
	s := &Store{
		lifecycle:    newLifecycle(),
		jobLog:       jobLog{leases: leases, namespace: o.Namespace, timeout: o.RequestTimeout},
		cordonLog:    cordonLog{leases: leases, namespace: o.Namespace, timeout: o.RequestTimeout},
		eventLog:     &eventLog{events: cs.CoreV1().Events(o.Namespace), namespace: o.Namespace, timeout: o.RequestTimeout, now: o.Clock},
		leases:       leases,
		cacheLeases:  cacheCS.CoordinationV1().Leases(o.Namespace),
		opts:         o,
		log:          o.Logger.With("backend", BackendName, "namespace", o.Namespace),
		now:          o.Clock,
		transport:    httpClient.Transport,
		watchSession: watchSessionSeconds * time.Second,
		observer:     observer{obs: state.NewObservations(o.Clock)},
		cache:        newLeaseCache(),
		writes:       newWriteGate(o.MaxInflightWrites, o.AdmissionWait),
		transitions:  transitionCounter{newTransitionCounter()},
		fenceName:    FenceName(o.Identity),
		nonce:        hex.EncodeToString(nonce),
	}
	s.statsMetrics = newStatsCollector(s)
	if o.CacheSnapshots {
		s.snaps = newSnapCache(s)
	}
	if o.Registerer != nil {
		collectors := s.collectors()
		for i, c := range collectors {
			if err := o.Registerer.Register(c); err != nil {
				for _, r := range collectors[:i] {
					o.Registerer.Unregister(r)
				}
				s.cancel()
				return nil, fmt.Errorf("kube metrics: %w", err)
			}
		}
	}
	return s, nil
}

// Backend returns "kubernetes".
func (s *Store) Backend() string { return BackendName }

// WriteLimit returns the store's bound on Lease writes in flight (negative:
// none) and how long a write waits for a slot before it is refused.
func (s *Store) WriteLimit() (maxInflight int, admissionWait time.Duration) {
	return s.opts.MaxInflightWrites, s.opts.AdmissionWait
}

// CachesSnapshots reports whether Snapshot answers from the watch-fed
// cache (Options.CacheSnapshots), and FenceLease names the store's fence.
func (s *Store) CachesSnapshots() (on bool, fenceLease string) { return s.snaps != nil, s.fenceName }

// Namespace returns the namespace that holds the store's Leases.
func (s *Store) Namespace() string { return s.opts.Namespace }

// Close ends the store's goroutines (open watches end without an error
// batch) and closes its idle connections. Later calls return ErrClosed.
func (s *Store) Close() error {
	if !s.shut() {
		return state.ErrClosed
	}
	s.deleteFence()
	utilnet.CloseIdleConnectionsFor(s.transport)
	if s.opts.Registerer != nil {
		for _, c := range s.collectors() {
			s.opts.Registerer.Unregister(c)
		}
	}
	return nil
}

// collectors are the store's metrics.
func (s *Store) collectors() []prometheus.Collector {
	return append(s.writes.collectors(), s.transitions.CounterVec, s.statsMetrics)
}

// snapshotCache returns the snapshot cache, starting its goroutine on
// first use, or nil when Options.CacheSnapshots is off.
func (s *Store) snapshotCache() *snapCache {
	if s.snaps == nil {
		return nil
	}
	s.startSnaps.Do(func() { _ = s.goOwned(s.snaps.run) })
	return s.snaps
}

// reqCtx bounds one request by RequestTimeout.
func (s *Store) reqCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.opts.RequestTimeout)
}

// CheckReady lists at most one Talon Lease with a consistent read: it proves
// the API server and etcd answer and that the identity may list Leases.
func (s *Store) CheckReady(ctx context.Context) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	rctx, cancel := s.reqCtx(ctx)
	defer cancel()
	_, err := s.leases.List(rctx, metav1.ListOptions{LabelSelector: managedSelector, Limit: 1})
	return mapError("kube check ready", err)
}

// observed returns rec with UpdatedAtUnixMs set to when this store first
// saw Lease l at its resourceVersion. The writer's stamp feeds the clock
// skew estimate.
func (o *observer) observed(l *coordv1.Lease, rec *cluster.Record) *cluster.Record {
	rec.UpdatedAtUnixMs = o.obs.See(l.Name, l.ResourceVersion, rec.UpdatedAtUnixMs).UnixMilli()
	return rec
}

// ClockSkew estimates how far the clocks of the coordinators whose Lease
// updates this store saw are ahead of this one (state.Observations
// ClockSkew). Changes are seen by listing, so the estimate is low by up to
// the interval between snapshots.
func (o *observer) ClockSkew() (time.Duration, bool) { return o.obs.ClockSkew() }

// Errors decodeLeaseSeq returns besides state.ErrUnsupportedVersion.
var (
	// errNotTalon: the Lease holds no readable Talon record.
	errNotTalon = errors.New("lease holds no readable talon record")
	// errCollision: the Lease holds another slot's record under the same
	// name (a 64-bit name hash collision). Never overwritten or deleted.
	errCollision = errors.New("lease name collision")
)

// decodeLeaseSeq returns the record a Lease holds for slot want (want
// zero: any slot), at the sequence of its last renewal (withRenewal), and
// the heartbeat sequence of the record in the status annotation. Errors
// wrap cluster.ErrUnsupportedVersion for a record of another schema
// version, or errNotTalon for anything else that is not a valid record
// (missing annotations, a malformed record), or errCollision for a record
// of another slot.
func decodeLeaseSeq(l *coordv1.Lease, want cluster.Key) (*cluster.Record, cluster.Key, uint64, error) {
	rec, key, err := decodeStatus(l, want)
	if err != nil {
		return nil, key, 0, err
	}
	statusSeq, err := withRenewal(l, rec)
	if err != nil {
		return nil, key, 0, err
	}
	return rec, key, statusSeq, nil
}

// decodeStatus returns the record in l's status annotation (decodeLease
// without the renewal).
func decodeStatus(l *coordv1.Lease, want cluster.Key) (*cluster.Record, cluster.Key, error) {
	key, ok := keyFromAnnotations(l.Annotations)
	if !ok {
		return nil, cluster.Key{}, fmt.Errorf("%w: lease %s has no valid %s, %s, %s annotations", errNotTalon, l.Name, AnnotationCluster, AnnotationRole, AnnotationNode)
	}
	if want != (cluster.Key{}) && key != want {
		return nil, key, fmt.Errorf("%w: lease %s holds slot %s, not %s", errCollision, l.Name, key, want)
	}
	raw, ok := l.Annotations[AnnotationStatus]
	if !ok {
		return nil, key, fmt.Errorf("%w: lease %s has no %s annotation", errNotTalon, l.Name, AnnotationStatus)
	}
	rec, err := cluster.Decode([]byte(raw))
	if err != nil {
		if errors.Is(err, cluster.ErrUnsupportedVersion) {
			return nil, key, fmt.Errorf("lease %s: %w: %w", l.Name, state.ErrUnsupportedVersion, err)
		}
		return nil, key, fmt.Errorf("%w: lease %s: %w", errNotTalon, l.Name, err)
	}
	if rec.Key() != key {
		return nil, key, fmt.Errorf("%w: lease %s: record of slot %s under annotations of slot %s", errNotTalon, l.Name, rec.Key(), key)
	}
	return rec, key, nil
}
