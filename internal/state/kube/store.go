package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"

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
// A Store is safe for concurrent use. It owns one goroutine that deletes
// expired Leases and one per open Watch; Close ends them all and closes the
// store's idle connections.
type Store struct {
	leases coordclient.LeaseInterface
	opts   Options // with defaults applied; read-only after New
	log    *slog.Logger
	now    func() time.Time
	// transport is the store's own HTTP transport, closed by Close.
	transport http.RoundTripper
	// watchSession is how long the API server keeps one watch request
	// open before the store resumes with a new one (tests shorten it).
	watchSession time.Duration

	// ctx is canceled by Close; it ends the GC goroutine and every watch.
	ctx    context.Context
	cancel context.CancelFunc
	// gcq carries expired Leases to the GC goroutine.
	gcq chan gcItem
	// cache holds the Leases this store wrote last, so a heartbeat costs
	// one request (UPDATE) instead of two (GET, UPDATE).
	cache *leaseCache
	// writes bounds the Lease writes in flight (Options.MaxInflightWrites).
	writes *writeGate

	// mu guards the fields below. Watch holds it while it adds to wg, so
	// Close (which sets closed under mu, then waits) never races an Add.
	mu       sync.Mutex
	closed   bool
	wg       sync.WaitGroup
	gcQueued map[string]bool // Lease names in gcq, so a name is queued once

	// obs remembers when this store first saw each Lease at its current
	// resourceVersion: the origin of record ages and of expiry.
	obs *state.Observations
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
	writes := newWriteGate(o.MaxInflightWrites, o.AdmissionWait)
	if o.Registerer != nil {
		collectors := writes.collectors()
		for i, c := range collectors {
			if err := o.Registerer.Register(c); err != nil {
				for _, r := range collectors[:i] {
					o.Registerer.Unregister(r)
				}
				return nil, fmt.Errorf("kube metrics: %w", err)
			}
		}
	}
	sctx, cancel := context.WithCancel(context.Background())
	s := &Store{
		leases:       cs.CoordinationV1().Leases(o.Namespace),
		opts:         o,
		log:          o.Logger.With("backend", BackendName, "namespace", o.Namespace),
		now:          o.Clock,
		transport:    httpClient.Transport,
		watchSession: watchSessionSeconds * time.Second,
		ctx:          sctx,
		cancel:       cancel,
		gcq:          make(chan gcItem, gcQueueSize),
		gcQueued:     make(map[string]bool),
		obs:          state.NewObservations(o.Clock),
		cache:        newLeaseCache(),
		writes:       writes,
	}
	s.wg.Add(1)
	go s.runGC()
	return s, nil
}

// Backend returns "kubernetes".
func (s *Store) Backend() string { return BackendName }

// WriteLimit returns the store's bound on Lease writes in flight (negative:
// none) and how long a write waits for a slot before it is refused.
func (s *Store) WriteLimit() (maxInflight int, admissionWait time.Duration) {
	return s.opts.MaxInflightWrites, s.opts.AdmissionWait
}

// Namespace returns the namespace that holds the store's Leases.
func (s *Store) Namespace() string { return s.opts.Namespace }

// Close ends the store's goroutines (open watches end without an error
// batch) and closes its idle connections. Later calls return ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return state.ErrClosed
	}
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	utilnet.CloseIdleConnectionsFor(s.transport)
	if s.opts.Registerer != nil {
		for _, c := range s.writes.collectors() {
			s.opts.Registerer.Unregister(c)
		}
	}
	return nil
}

func (s *Store) checkOpen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return state.ErrClosed
	}
	return nil
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

// expired reports whether l's lease has run out as this store observed it:
// l has been at its resourceVersion for leaseDurationSeconds since this
// store first saw it there, on this store's own (monotonic) clock. The
// renewTime a writer stamped is not read: another coordinator's clock
// never decides whether a Lease is live. A Lease without a duration has
// no lease to run and counts as expired.
func (s *Store) expired(l *coordv1.Lease) bool {
	if l.Spec.LeaseDurationSeconds == nil {
		return true
	}
	return s.obs.Age(l.Name, l.ResourceVersion) >= time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second
}

// observed returns rec with UpdatedAtUnixMs set to when this store first
// saw Lease l at its resourceVersion. The writer's stamp feeds the clock
// skew estimate.
func (s *Store) observed(l *coordv1.Lease, rec *cluster.Record) *cluster.Record {
	rec.UpdatedAtUnixMs = s.obs.See(l.Name, l.ResourceVersion, rec.UpdatedAtUnixMs).UnixMilli()
	return rec
}

// ClockSkew estimates how far the clocks of the coordinators whose Lease
// updates this store saw are ahead of this one (state.Observations
// ClockSkew). Changes are seen by listing, so the estimate is low by up to
// the interval between snapshots.
func (s *Store) ClockSkew() (time.Duration, bool) { return s.obs.ClockSkew() }

// Errors decodeLease returns besides state.ErrUnsupportedVersion.
var (
	// errNotTalon: the Lease holds no readable Talon record.
	errNotTalon = errors.New("lease holds no readable talon record")
	// errCollision: the Lease holds another slot's record under the same
	// name (a 64-bit name hash collision). Never overwritten or deleted.
	errCollision = errors.New("lease name collision")
)

// decodeLease returns the record a Lease holds for slot want (want zero:
// any slot). Errors wrap cluster.ErrUnsupportedVersion for a record of
// another schema version, or errNotTalon for anything else that is not a
// valid record (missing annotations, a malformed record), or errCollision
// for a record of another slot.
func decodeLease(l *coordv1.Lease, want cluster.Key) (*cluster.Record, cluster.Key, error) {
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
