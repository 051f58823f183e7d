package kube

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

// BackendName is what Backend returns.
const BackendName = "kubernetes"

var _ state.Store = (*Store)(nil)

// gcQueueSize bounds the expired Leases waiting for deletion; Snapshot drops
// candidates beyond it (the next Snapshot or sweep offers them again).
const gcQueueSize = 1024

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

	// mu guards the fields below. Watch holds it while it adds to wg, so
	// Close (which sets closed under mu, then waits) never races an Add.
	mu       sync.Mutex
	closed   bool
	wg       sync.WaitGroup
	gcQueued map[string]bool // Lease names in gcq, so a name is queued once
}

// gcItem is one expired Lease observed at a resourceVersion.
type gcItem struct {
	name, resourceVersion string
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
		cache:        newLeaseCache(),
	}
	s.wg.Add(1)
	go s.runGC()
	return s, nil
}

// Backend returns "kubernetes".
func (s *Store) Backend() string { return BackendName }

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

// leaseTTLSeconds converts a TTL to Lease seconds, rounding up: a Lease
// counts whole seconds and must not expire before the caller asked.
func leaseTTLSeconds(ttl time.Duration) (int32, error) {
	if ttl <= 0 {
		return 0, fmt.Errorf("%w: lease ttl %s: must be positive", state.ErrInvalidRecord, ttl)
	}
	secs := ttl / time.Second
	if ttl%time.Second != 0 {
		secs++
	}
	if secs > math.MaxInt32 {
		return 0, fmt.Errorf("%w: lease ttl %s: must be at most %d seconds", state.ErrInvalidRecord, ttl, math.MaxInt32)
	}
	return int32(secs), nil
}

// expired reports whether l's lease has run out at now: renewTime plus
// leaseDurationSeconds is not after now. A Lease without either field has
// no lease to run and counts as expired.
func expired(l *coordv1.Lease, now time.Time) bool {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return true
	}
	end := l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second)
	return !now.Before(end)
}

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

// get reads a Lease by name; a missing Lease is (nil, nil).
func (s *Store) get(ctx context.Context, name string) (*coordv1.Lease, error) {
	rctx, cancel := s.reqCtx(ctx)
	defer cancel()
	l, err := s.leases.Get(rctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return l, err
}

// UpsertNode applies rec to its Lease under the ordering rule. It decides
// with cluster.Order against the record in the Lease's annotation (an
// expired or missing Lease holds no record) and writes with that Lease's
// resourceVersion as precondition, so a concurrent writer makes the write
// fail instead of being overwritten; it then reads again and re-decides, at
// most ConflictRetries times before returning ErrConflict. The first
// decision is made on the Lease as this store last wrote it, if it did (one
// request per heartbeat when a worker keeps talking to the same
// coordinator); a rejection is only ever made on a fresh read. Duplicate
// and stale updates write nothing.
func (s *Store) UpsertNode(ctx context.Context, rec *cluster.Record, leaseTTL time.Duration) (state.WriteResult, error) {
	if err := s.checkOpen(); err != nil {
		return state.WriteResult{}, err
	}
	if err := state.ValidateRecord(rec); err != nil {
		return state.WriteResult{}, err
	}
	secs, err := leaseTTLSeconds(leaseTTL)
	if err != nil {
		return state.WriteResult{}, err
	}
	key := rec.Key()
	name := LeaseName(key)
	useCache := true
	for attempt := 0; attempt <= s.opts.ConflictRetries; attempt++ {
		if attempt > 0 {
			if err := backoff(ctx, attempt); err != nil {
				return state.WriteResult{}, mapError("kube upsert "+key.String(), err)
			}
		}
		// The first attempt decides on the Lease as this store last wrote
		// it, when it has it: the write's precondition fails if anyone has
		// changed it since, so an accepted decision on the cached Lease is
		// the decision on the stored one. Otherwise, and after a conflict,
		// read it.
		var cur *coordv1.Lease
		cached := false
		if useCache && attempt == 0 {
			cur, cached = s.cache.get(name)
		}
		if !cached {
			var err error
			if cur, err = s.get(ctx, name); err != nil {
				return state.WriteResult{}, mapError("kube upsert "+key.String()+": get lease "+name, err)
			}
		}
		now := s.now()
		var stored *cluster.Record
		if cur != nil && !expired(cur, now) {
			stored, _, err = decodeLease(cur, key)
			switch {
			case err == nil:
			case errors.Is(err, errNotTalon):
				// A record that cannot be read holds no sequence to order
				// against: overwrite it (the write still has its
				// resourceVersion precondition).
				s.log.WarnContext(ctx, "overwriting unreadable lease", "lease", name, "err", err)
				stored = nil
			default:
				// Another schema version (its sequence cannot be read, so
				// the rule cannot be applied) or a name collision.
				return state.WriteResult{}, fmt.Errorf("kube upsert %s: %w", key, err)
			}
		}
		d := cluster.Order(stored, rec)
		if !d.Accepted() && cached {
			// Rejecting needs the stored Lease: another incarnation, an
			// expiry or a removal since the cached write would accept.
			s.cache.drop(name)
			useCache = false
			attempt--
			continue
		}
		if !d.Accepted() {
			o := state.OutcomeDuplicate
			if d == cluster.DecisionStale {
				o = state.OutcomeStale
			}
			return state.WriteResult{Outcome: o, Decision: d, Revision: state.NewRevision(cur.ResourceVersion), Record: stored}, nil
		}
		next := rec.Clone()
		next.UpdatedAtUnixMs = now.UnixMilli()
		enc, err := cluster.Encode(next)
		if err != nil {
			// The stamped time can push a record at the size limit over it.
			if verr := state.ValidateRecord(next); verr != nil {
				return state.WriteResult{}, verr
			}
			return state.WriteResult{}, fmt.Errorf("kube upsert %s: encode: %w", key, err)
		}
		lease := buildLease(cur, name, s.opts.Namespace, next, enc, secs, now, d)
		var written *coordv1.Lease
		rctx, cancel := s.reqCtx(ctx)
		if cur == nil {
			written, err = s.leases.Create(rctx, lease, metav1.CreateOptions{})
		} else {
			written, err = s.leases.Update(rctx, lease, metav1.UpdateOptions{})
		}
		cancel()
		switch {
		case err == nil:
			s.cache.put(name, written)
			return state.WriteResult{Outcome: state.OutcomeAccepted, Decision: d, Revision: state.NewRevision(written.ResourceVersion), Record: next}, nil
		case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err), cur != nil && apierrors.IsNotFound(err):
			s.cache.drop(name)
			// Another writer won the race (or deleted the Lease): re-read
			// and apply the rule to what it wrote.
			continue
		default:
			return state.WriteResult{}, mapError("kube upsert "+key.String()+": write lease "+name, err)
		}
	}
	return state.WriteResult{}, fmt.Errorf("kube upsert %s: %w: lost %d races in a row", key, state.ErrConflict, s.opts.ConflictRetries+1)
}

// backoff sleeps a short jittered time before conflict retry attempt
// (1-based): up to 2^attempt milliseconds, capped at 100 ms.
func backoff(ctx context.Context, attempt int) error {
	maxMs := min(1<<min(attempt, 7), 100)
	t := time.NewTimer(time.Duration(rand.IntN(maxMs)+1) * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// buildLease returns the Lease to write for record next: cur's object (its
// resourceVersion is the write's precondition; labels and annotations of
// other owners are kept) or a new one, with Talon's labels, annotations and
// lease spec. A new incarnation (or a Lease re-acquired after expiry)
// starts a new acquireTime; a holder change counts a transition.
func buildLease(cur *coordv1.Lease, name, namespace string, next *cluster.Record, enc []byte, secs int32, now time.Time, d cluster.Decision) *coordv1.Lease {
	var l *coordv1.Lease
	if cur != nil {
		l = cur.DeepCopy()
	} else {
		l = &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
	}
	key := next.Key()
	if l.Labels == nil {
		l.Labels = make(map[string]string, 4)
	}
	for k, v := range leaseLabels(key) {
		l.Labels[k] = v
	}
	if l.Annotations == nil {
		l.Annotations = make(map[string]string, 4)
	}
	l.Annotations[AnnotationCluster] = key.ClusterID
	l.Annotations[AnnotationRole] = string(key.Role)
	l.Annotations[AnnotationNode] = key.NodeID
	l.Annotations[AnnotationStatus] = string(enc)

	holder := next.IncarnationID
	prev := ""
	if l.Spec.HolderIdentity != nil {
		prev = *l.Spec.HolderIdentity
	}
	renew := metav1.NewMicroTime(now)
	if cur == nil || prev != holder || d == cluster.DecisionInsert || l.Spec.AcquireTime == nil {
		l.Spec.AcquireTime = &renew
	}
	if cur != nil && prev != holder {
		n := int32(1)
		if l.Spec.LeaseTransitions != nil {
			n = *l.Spec.LeaseTransitions + 1
		}
		l.Spec.LeaseTransitions = &n
	}
	if l.Spec.LeaseTransitions == nil {
		zero := int32(0)
		l.Spec.LeaseTransitions = &zero
	}
	l.Spec.HolderIdentity = &holder
	l.Spec.LeaseDurationSeconds = &secs
	l.Spec.RenewTime = &renew
	return l
}

// listSlot reads slot k's Lease with a consistent LIST (which, unlike a
// GET, returns a resourceVersion even when the Lease is missing).
func (s *Store) listSlot(ctx context.Context, k cluster.Key) (*coordv1.Lease, string, error) {
	rctx, cancel := s.reqCtx(ctx)
	defer cancel()
	list, err := s.leases.List(rctx, metav1.ListOptions{
		LabelSelector: slotSelector(k),
		FieldSelector: fields.OneTermEqualSelector("metadata.name", LeaseName(k)).String(),
	})
	if err != nil {
		return nil, "", err
	}
	if len(list.Items) == 0 {
		return nil, list.ResourceVersion, nil
	}
	return &list.Items[0], list.ResourceVersion, nil
}

// RemoveNode deletes slot key's Lease when its holder is incarnationID,
// with the read's resourceVersion as precondition, so it never deletes a
// Lease a restarted process renewed in between. An expired Lease holds no
// record: the outcome is OutcomeNotFound (and the Lease is deleted as
// garbage). The revision of an accepted removal is the resourceVersion of
// the deletion itself, the one watchers see on the EventDelete (see
// deleteObserved).
func (s *Store) RemoveNode(ctx context.Context, key cluster.Key, incarnationID string) (state.WriteResult, error) {
	if err := s.checkOpen(); err != nil {
		return state.WriteResult{}, err
	}
	if err := state.ValidateKey(key); err != nil {
		return state.WriteResult{}, err
	}
	op := "kube remove " + key.String()
	for attempt := 0; attempt <= s.opts.ConflictRetries; attempt++ {
		if attempt > 0 {
			if err := backoff(ctx, attempt); err != nil {
				return state.WriteResult{}, mapError(op, err)
			}
		}
		cur, rv, err := s.listSlot(ctx, key)
		if err != nil {
			return state.WriteResult{}, mapError(op, err)
		}
		if cur == nil {
			return state.WriteResult{Outcome: state.OutcomeNotFound, Revision: state.NewRevision(rv)}, nil
		}
		now := s.now()
		if expired(cur, now) {
			s.deleteExpired(ctx, gcItem{name: cur.Name, resourceVersion: cur.ResourceVersion})
			return state.WriteResult{Outcome: state.OutcomeNotFound, Revision: state.NewRevision(rv)}, nil
		}
		stored, _, err := decodeLease(cur, key)
		switch {
		case err == nil, errors.Is(err, errNotTalon), errors.Is(err, state.ErrUnsupportedVersion):
			// The holder identity decides; the record is returned when readable.
		default:
			return state.WriteResult{}, fmt.Errorf("%s: %w", op, err)
		}
		holder := ""
		if cur.Spec.HolderIdentity != nil {
			holder = *cur.Spec.HolderIdentity
		}
		if holder != incarnationID || (stored != nil && stored.IncarnationID != incarnationID) {
			return state.WriteResult{Outcome: state.OutcomeStale, Revision: state.NewRevision(rv), Record: stored}, nil
		}
		rev, err := s.deleteObserved(ctx, key, cur)
		if err == nil || apierrors.IsNotFound(err) {
			s.cache.drop(cur.Name)
		}
		switch {
		case err == nil:
			return state.WriteResult{Outcome: state.OutcomeAccepted, Revision: state.NewRevision(rev)}, nil
		case apierrors.IsConflict(err), apierrors.IsNotFound(err):
			continue
		default:
			return state.WriteResult{}, mapError(op, err)
		}
	}
	return state.WriteResult{}, fmt.Errorf("%s: %w: lost %d races in a row", op, state.ErrConflict, s.opts.ConflictRetries+1)
}

// deleteObserved deletes l with its resourceVersion as precondition and
// returns the resourceVersion of the deletion. A DELETE response carries no
// resourceVersion for Leases, so a watch on the one Lease, opened from the
// resourceVersion the delete is conditioned on, reports it: after a
// successful conditional delete the next event of that Lease is its
// DELETED event. Should the event not arrive within RequestTimeout, the
// resourceVersion of a consistent read after the delete stands in (not
// earlier than the deletion, though possibly later).
func (s *Store) deleteObserved(ctx context.Context, key cluster.Key, l *coordv1.Lease) (string, error) {
	rv := l.ResourceVersion
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	timer := time.AfterFunc(s.opts.RequestTimeout, wcancel)
	w, err := s.leases.Watch(wctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", l.Name).String(),
		ResourceVersion: rv,
	})
	if !timer.Stop() && err == nil {
		w.Stop()
		err = fmt.Errorf("%w: establishing the watch took longer than %s", state.ErrTimeout, s.opts.RequestTimeout)
	}
	if err != nil {
		return "", err
	}
	defer w.Stop()

	rctx, cancel := s.reqCtx(ctx)
	err = s.leases.Delete(rctx, l.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
	cancel()
	if err != nil {
		return "", err
	}
	wait := time.NewTimer(s.opts.RequestTimeout)
	defer wait.Stop()
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return s.revisionAfterDelete(ctx, key, l.Name)
			}
			if d, isLease := ev.Object.(*coordv1.Lease); ev.Type == watch.Deleted && isLease && d.Name == l.Name {
				return d.ResourceVersion, nil
			}
			if ev.Type == watch.Error {
				return s.revisionAfterDelete(ctx, key, l.Name)
			}
		case <-wait.C:
			return s.revisionAfterDelete(ctx, key, l.Name)
		case <-ctx.Done():
			return s.revisionAfterDelete(ctx, key, l.Name)
		}
	}
}

// revisionAfterDelete is deleteObserved's fallback: the resourceVersion of
// a consistent LIST after the delete. The delete has happened; an error
// here means only that its revision is unknown.
func (s *Store) revisionAfterDelete(ctx context.Context, key cluster.Key, name string) (string, error) {
	_, rv, err := s.listSlot(ctx, key)
	if err != nil {
		return "", fmt.Errorf("lease %s deleted, reading the revision after it: %w", name, err)
	}
	return rv, nil
}

// Snapshot lists the cluster's Leases with one consistent LIST (no
// resourceVersion: the API server's most recent, quorum-consistent read;
// further pages continue at the first page's resourceVersion), and returns
// the records of the unexpired ones, ordered by role then node ID, with the
// list's resourceVersion as the revision and the local clock after the read
// as the observation time. Expired Leases are handed to the GC goroutine;
// Leases of other schema versions and unreadable ones are skipped.
func (s *Store) Snapshot(ctx context.Context, clusterID string) (*state.Snapshot, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	if err := cluster.ValidateID("clusterId", clusterID); err != nil {
		return nil, fmt.Errorf("%w: %w", state.ErrInvalidRecord, err)
	}
	op := "kube snapshot " + clusterID
	items, rv, err := s.list(ctx, clusterSelector(clusterID))
	if err != nil {
		return nil, mapError(op, err)
	}
	now := s.now()
	snap := &state.Snapshot{ClusterID: clusterID, Revision: state.NewRevision(rv), ObservedAtUnixMs: now.UnixMilli()}
	var garbage []gcItem
	for i := range items {
		l := &items[i]
		key, ok := keyFromAnnotations(l.Annotations)
		if !ok || key.ClusterID != clusterID {
			continue // another cluster whose label value coincides, or not Talon's
		}
		if expired(l, now) {
			garbage = append(garbage, gcItem{name: l.Name, resourceVersion: l.ResourceVersion})
			continue
		}
		rec, _, err := decodeLease(l, key)
		if err != nil {
			if errors.Is(err, state.ErrUnsupportedVersion) {
				s.log.DebugContext(ctx, "skipping lease of another schema version", "lease", l.Name, "err", err)
			} else {
				s.log.WarnContext(ctx, "skipping unreadable lease", "lease", l.Name, "err", err)
			}
			continue
		}
		snap.Records = append(snap.Records, rec)
	}
	slices.SortFunc(snap.Records, func(a, b *cluster.Record) int {
		return cmp.Or(cmp.Compare(a.Role, b.Role), cmp.Compare(a.NodeID, b.NodeID))
	})
	s.enqueueGC(garbage)
	return snap, nil
}

// maxListRestarts bounds how often list starts over when a continue token
// expires between pages.
const maxListRestarts = 3

// list returns every Lease selector selects in the namespace from one
// consistent LIST, paginated, and the list's resourceVersion.
func (s *Store) list(ctx context.Context, selector string) ([]coordv1.Lease, string, error) {
	var lastErr error
	for range maxListRestarts {
		var items []coordv1.Lease
		rv, cont := "", ""
		for {
			rctx, cancel := s.reqCtx(ctx)
			page, err := s.leases.List(rctx, metav1.ListOptions{LabelSelector: selector, Limit: s.opts.ListPageSize, Continue: cont})
			cancel()
			if err != nil {
				if cont != "" && apierrors.IsResourceExpired(err) {
					lastErr = err // the continue token outlived compaction: start over
					break
				}
				return nil, "", err
			}
			if rv == "" {
				rv = page.ResourceVersion
			}
			items = append(items, page.Items...)
			cont = page.Continue
			if cont == "" {
				return items, rv, nil
			}
		}
	}
	return nil, "", fmt.Errorf("%w: list continue token expired %d times: %w", state.ErrUnavailable, maxListRestarts, lastErr)
}
