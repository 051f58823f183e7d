package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state/kube"
)

// codedError is a failure with a code of its own for Result.Failures.
type codedError struct {
	code string
	err  error
}

func (e *codedError) Error() string { return e.code + ": " + e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

// RawEtcdOptions configures PrepareRawEtcd.
type RawEtcdOptions struct {
	// Prefix is the key prefix of the writers' keys (<Prefix>/w00000...);
	// nothing else may live under it.
	Prefix  string
	Writers int
	// LeaseTTL is the TTL of each writer's lease (at least a minute, and
	// at least minRenewTTL: the store renews such leases without a write).
	LeaseTTL time.Duration
	// Streams, when positive, is the number of LeaseKeepAlive streams the
	// writers share (writer w on stream w mod Streams, several requests in
	// flight on each), as Talon's etcd store multiplexes its keepalives;
	// zero gives each writer a stream of its own.
	Streams int
}

// RawEtcd is the raw etcd ceiling of Talon's heartbeats: Writers keys,
// each holding the typical record's JSON attached to a lease of its own,
// written by writers that issue straight to etcd what Talon's store issues
// per heartbeat (see Run). It is set up once (PrepareRawEtcd) and measured
// in as many phases as asked; Close ends its keepalive streams. The keys
// and leases stay; CleanEtcd removes them.
type RawEtcd struct {
	cli   *clientv3.Client
	lc    pb.LeaseClient
	value string
	keys  []string
	// Writer w's entries below are touched only by the goroutine Run gives
	// it (and by PrepareRawEtcd before any Run).
	leases  []clientv3.LeaseID
	revs    []int64                         // the mod revision writer w last wrote
	streams []pb.Lease_LeaseKeepAliveClient // writer w's keepalive stream; nil: open one
	shared  *sharedStreams                  // with RawEtcdOptions.Streams: the streams the writers share instead
	mix     *mixer
	// lifetime bounds the keepalive streams; Close, or the end of a Run's
	// context, cancels it.
	lifetime context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup // the shared streams' receivers
}

// PrepareRawEtcd grants each writer a lease, puts its key with the typical
// record on it and opens its LeaseKeepAlive stream. On error what it
// granted and put stays for CleanEtcd (or expires).
func PrepareRawEtcd(ctx context.Context, cli *clientv3.Client, o RawEtcdOptions) (*RawEtcd, error) {
	payload, err := cluster.Encode(Record("raw", "w", 1))
	if err != nil {
		return nil, err
	}
	lifetime, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r := &RawEtcd{cli: cli, lc: pb.NewLeaseClient(cli.ActiveConnection()), value: string(payload), keys: make([]string, o.Writers),
		leases: make([]clientv3.LeaseID, o.Writers), revs: make([]int64, o.Writers), streams: make([]pb.Lease_LeaseKeepAliveClient, o.Writers),
		mix: newMixer(o.Writers), lifetime: lifetime, cancel: cancel}
	if o.Streams > 0 {
		r.shared = newSharedStreams(r.lc, lifetime, o.Streams, &r.wg)
	}
	ttl := max(int64(o.LeaseTTL/time.Second), 60)
	err = parallel(ctx, o.Writers, 64, func(ctx context.Context, w int) error {
		r.keys[w] = fmt.Sprintf("%s/w%05d", o.Prefix, w)
		lease, err := cli.Grant(ctx, ttl)
		if err != nil {
			return fmt.Errorf("raw etcd: grant a lease: %w", err)
		}
		r.leases[w] = lease.ID
		p, err := cli.Put(ctx, r.keys[w], r.value, clientv3.WithLease(lease.ID))
		if err != nil {
			return fmt.Errorf("raw etcd: put %s: %w", r.keys[w], err)
		}
		r.revs[w] = p.Header.Revision
		if r.shared != nil {
			return nil
		}
		return r.openStream(w)
	})
	if err != nil {
		cancel()
		return nil, err
	}
	return r, nil
}

// Created returns the number of leases the writers hold.
func (r *RawEtcd) Created() int { return len(r.leases) }

// Run has every writer heartbeat back to back for d and measures it. With
// MixRenew a heartbeat is what Talon's etcd store sends for it: one lease
// keepalive on the writer's own stream (etcd answers a stream's requests in
// order; Talon's store spreads its keepalives over a few streams), and,
// every statusEvery-th heartbeat of the writer, instead a transaction that
// compares the key's ModRevision with the one the writer last wrote and
// puts the record with its lease (Talon's store also sends a keepalive
// beside that put; this does not). With MixWrite every heartbeat is that
// transaction. Result.Renewals counts the keepalives.
func (r *RawEtcd) Run(ctx context.Context, d time.Duration, mix Mix, statusEvery uint64) Result {
	defer context.AfterFunc(ctx, r.cancel)() // a stream waiting on etcd ends with ctx
	if mix == MixWrite {
		statusEvery = 0
	}
	res := Run(ctx, len(r.keys), d, r.mix.op(statusEvery, r.keepAlive, r.put))
	res.Renewals = int(r.mix.renewals.Load())
	return res
}

// Close ends the keepalive streams.
func (r *RawEtcd) Close() {
	r.cancel()
	r.wg.Wait()
}

// openStream opens writer w's LeaseKeepAlive stream.
func (r *RawEtcd) openStream(w int) error {
	s, err := r.lc.LeaseKeepAlive(clientv3.WithRequireLeader(r.lifetime))
	if err != nil {
		return fmt.Errorf("raw etcd: open a lease keepalive stream: %w", err)
	}
	r.streams[w] = s
	return nil
}

// keepAlive renews writer w's lease with one request on its stream (or
// on the stream it shares).
func (r *RawEtcd) keepAlive(ctx context.Context, w int, _ uint64) error {
	if r.shared != nil {
		resp, err := r.shared.keepAlive(ctx, w%len(r.shared.slots), r.leases[w])
		if err != nil {
			return err
		}
		if resp.TTL <= 0 {
			return &codedError{code: "lease_gone", err: fmt.Errorf("lease %x expired", resp.ID)}
		}
		return nil
	}
	if r.streams[w] == nil {
		if err := r.openStream(w); err != nil {
			return err
		}
	}
	s := r.streams[w]
	err := s.Send(&pb.LeaseKeepAliveRequest{ID: int64(r.leases[w])})
	var resp *pb.LeaseKeepAliveResponse
	if err == nil {
		resp, err = s.Recv()
	}
	if err != nil {
		r.streams[w] = nil // the next heartbeat opens a new one
		return err
	}
	if resp.TTL <= 0 {
		return &codedError{code: "lease_gone", err: fmt.Errorf("lease %x expired", resp.ID)}
	}
	return nil
}

// put writes writer w's record in a compare-and-swap on its key's
// ModRevision, with its lease.
func (r *RawEtcd) put(ctx context.Context, w int, _ uint64) error {
	k := r.keys[w]
	resp, err := r.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", r.revs[w])).
		Then(clientv3.OpPut(k, r.value, clientv3.WithLease(r.leases[w]))).Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return errConflict
	}
	r.revs[w] = resp.Header.Revision
	return nil
}

// CleanEtcd revokes the leases attached to the keys under prefix and
// deletes the keys; it returns how many of each it removed. prefix must
// end in "/" so that it names a directory, not every key sharing a start.
func CleanEtcd(ctx context.Context, cli *clientv3.Client, prefix string) (keys, leases int, err error) {
	if !strings.HasSuffix(prefix, "/") {
		return 0, 0, fmt.Errorf("clean etcd prefix %q: must end with \"/\"", prefix)
	}
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return 0, 0, fmt.Errorf("clean etcd prefix %q: %w", prefix, err)
	}
	ids := map[clientv3.LeaseID]bool{}
	for _, kv := range resp.Kvs {
		if kv.Lease != 0 {
			ids[clientv3.LeaseID(kv.Lease)] = true
		}
	}
	var (
		mu   sync.Mutex // guards leases and errs
		errs []error
	)
	// 32 at a time: a fleet run leaves tens of thousands of leases, each
	// revoke a Raft write.
	list := slices.Collect(maps.Keys(ids))
	_ = parallel(ctx, len(list), 32, func(ctx context.Context, i int) error {
		_, err := cli.Revoke(ctx, list[i])
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err == nil:
			leases++
		case !errors.Is(err, rpctypes.ErrLeaseNotFound): // expired meanwhile: nothing to do
			errs = append(errs, fmt.Errorf("revoke lease %x: %w", list[i], err))
		}
		return nil
	})
	// Revoking deleted the keys attached; this deletes the rest.
	if _, err := cli.Delete(ctx, prefix, clientv3.WithPrefix()); err != nil {
		errs = append(errs, fmt.Errorf("delete prefix %q: %w", prefix, err))
	} else {
		keys = len(resp.Kvs)
	}
	return keys, leases, errors.Join(errs...)
}

// RawKubeOptions configures PrepareRawKube.
type RawKubeOptions struct {
	// Namespace holds the Leases; NamePrefix starts their names
	// (<NamePrefix>w00000...).
	Namespace  string
	NamePrefix string
	Writers    int
	// LeaseTTL is the Leases' leaseDurationSeconds, as Talon's store sets
	// it from lease-ttl; at least a second.
	LeaseTTL time.Duration
}

// RawKube is the raw Kubernetes ceiling of Talon's heartbeats: a Lease per
// writer, shaped like the store's (the typical record in the status
// annotation), written by writers that send straight to the API server
// what Talon's store sends per heartbeat (see Run). It is set up once
// (PrepareRawKube) and measured in as many phases as asked. The Leases
// stay; the caller removes them.
type RawKube struct {
	api     coordinationv1client.LeaseInterface
	payload string
	// leases[w] is writer w's Lease as last written; only the goroutine
	// Run gives writer w touches it.
	leases []*coordinationv1.Lease
	mix    *mixer
}

// PrepareRawKube creates the writers' Leases. On error it returns how many
// it created: they stay for the caller to remove.
func PrepareRawKube(ctx context.Context, cs kubernetes.Interface, o RawKubeOptions) (*RawKube, int, error) {
	payload, err := cluster.Encode(Record("raw", "w", 1))
	if err != nil {
		return nil, 0, err
	}
	r := &RawKube{api: cs.CoordinationV1().Leases(o.Namespace), payload: string(payload), leases: make([]*coordinationv1.Lease, o.Writers), mix: newMixer(o.Writers)}
	secs := int32(max(o.LeaseTTL/time.Second, 1))
	var mu sync.Mutex // guards created
	created := 0
	err = parallel(ctx, o.Writers, 16, func(ctx context.Context, w int) error {
		name := fmt.Sprintf("%sw%05d", o.NamePrefix, w)
		now := metav1.NewMicroTime(time.Now())
		holder := "raw-incarnation-" + name
		l, err := r.api.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{RawLabel: "true"},
				Annotations: map[string]string{kube.AnnotationCluster: "raw", kube.AnnotationRole: string(cluster.RoleWorker), kube.AnnotationNode: name,
					kube.AnnotationStatus: r.payload}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, AcquireTime: &now, RenewTime: &now},
		}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("raw kubernetes: create Lease: %w", err)
		}
		r.leases[w] = l
		mu.Lock()
		created++
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, created, err
	}
	return r, created, nil
}

// Created returns the number of Leases the writers hold.
func (r *RawKube) Created() int { return len(r.leases) }

// Run has every writer heartbeat back to back for d and measures it. With
// MixRenew a heartbeat is what Talon's Kubernetes store sends for it: a
// JSON merge patch of spec.renewTime and the renewal's sequence in
// talon.io/renew-seq (about 140 bytes), and, every statusEvery-th
// heartbeat of the writer, instead a merge patch of the status annotation
// (dropping talon.io/renew-seq) and the spec; both conditioned on the
// resourceVersion the writer last wrote. With MixWrite every heartbeat is
// an UPDATE of the whole Lease (renewTime) with optimistic concurrency on
// its resourceVersion. Result.Renewals counts the renewal patches.
func (r *RawKube) Run(ctx context.Context, d time.Duration, mix Mix, statusEvery uint64) Result {
	renew, write := r.renew, r.statusPatch
	if mix == MixWrite {
		statusEvery, write = 0, r.update
	}
	res := Run(ctx, len(r.leases), d, r.mix.op(statusEvery, renew, write))
	res.Renewals = int(r.mix.renewals.Load())
	return res
}

// Close does nothing: the writers hold nothing open. It lets RawKube and
// RawEtcd be used alike.
func (r *RawKube) Close() {}

// renew patches writer w's Lease as a renewal of heartbeat seq.
func (r *RawKube) renew(ctx context.Context, w int, seq uint64) error {
	return r.patch(ctx, w, map[string]any{
		"metadata": map[string]any{"resourceVersion": r.leases[w].ResourceVersion,
			"annotations": map[string]string{kube.AnnotationRenewSeq: strconv.FormatUint(seq, 10)}},
		"spec": map[string]any{"renewTime": metav1.NewMicroTime(time.Now())},
	})
}

// statusPatch writes writer w's status as a merge patch of what a status
// write changes: the status annotation, the renewal's sequence removed,
// and the spec with a new renewTime.
func (r *RawKube) statusPatch(ctx context.Context, w int, _ uint64) error {
	spec := r.leases[w].Spec.DeepCopy()
	now := metav1.NewMicroTime(time.Now())
	spec.RenewTime = &now
	return r.patch(ctx, w, map[string]any{
		"metadata": map[string]any{"resourceVersion": r.leases[w].ResourceVersion,
			"annotations": map[string]any{kube.AnnotationStatus: r.payload, kube.AnnotationRenewSeq: nil}},
		"spec": spec,
	})
}

// patch sends patch to writer w's Lease as a JSON merge patch.
func (r *RawKube) patch(ctx context.Context, w int, patch map[string]any) error {
	b, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	l, err := r.api.Patch(ctx, r.leases[w].Name, types.MergePatchType, b, metav1.PatchOptions{})
	return r.wrote(w, l, err)
}

// update writes writer w's whole Lease with a new renewTime.
func (r *RawKube) update(ctx context.Context, w int, _ uint64) error {
	l := r.leases[w].DeepCopy()
	now := metav1.NewMicroTime(time.Now())
	l.Spec.RenewTime = &now
	nl, err := r.api.Update(ctx, l, metav1.UpdateOptions{})
	return r.wrote(w, nl, err)
}

// wrote keeps the Lease a write of writer w returned, or classifies its
// error.
func (r *RawKube) wrote(w int, l *coordinationv1.Lease, err error) error {
	if err != nil {
		if apierrors.IsConflict(err) {
			return errConflict
		}
		return kubeError(err)
	}
	r.leases[w] = l
	return nil
}

// RawLabel marks the Leases RawKube creates.
const RawLabel = "bench.talon.io/raw"

// kubeError gives an API server error its reason as the code.
func kubeError(err error) error {
	if r := apierrors.ReasonForError(err); r != metav1.StatusReasonUnknown {
		return &codedError{code: strings.ToLower(string(r)), err: err}
	}
	return err
}

// parallel calls f for 0 to n-1 from at most width goroutines and returns
// the first error.
func parallel(ctx context.Context, n, width int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	sem := make(chan struct{}, width)
	for i := range n {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := f(ctx, i); err != nil {
				once.Do(func() { first = err; cancel() })
			}
		})
	}
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		first = context.Cause(ctx)
	}
	return first
}
