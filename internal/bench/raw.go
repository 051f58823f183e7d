package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/talonhq/talon/internal/cluster"
)

// codedError is a failure with a code of its own for Result.Failures.
type codedError struct {
	code string
	err  error
}

func (e *codedError) Error() string { return e.code + ": " + e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

// RawEtcdOptions configures RawEtcd.
type RawEtcdOptions struct {
	// Prefix is the key prefix of the writers' keys (<Prefix>/w00000...);
	// nothing else may live under it.
	Prefix   string
	Writers  int
	Duration time.Duration
	// LeaseTTL is the TTL of the one lease every key is put with.
	LeaseTTL time.Duration
}

// RawEtcd measures the raw etcd ceiling of Talon's ordered upsert: each of
// Writers keys holds the typical record's JSON with a lease, and each
// writer, back to back, puts it again in a transaction that compares the
// key's ModRevision with the one it last wrote (the compare-and-swap the
// etcd store issues per heartbeat). It returns the leases it granted (one).
// The keys and the lease stay; CleanEtcd removes them.
func RawEtcd(ctx context.Context, cli *clientv3.Client, o RawEtcdOptions) (Result, int, error) {
	ttl := max(int64(o.LeaseTTL/time.Second), 60)
	lease, err := cli.Grant(ctx, ttl)
	if err != nil {
		return Result{}, 0, fmt.Errorf("raw etcd: grant a lease: %w", err)
	}
	payload, err := cluster.Encode(Record("raw", "w", 1))
	if err != nil {
		return Result{}, 1, err
	}
	value := string(payload)
	key := func(w int) string { return fmt.Sprintf("%s/w%05d", o.Prefix, w) }
	revs := make([]int64, o.Writers)
	err = parallel(ctx, o.Writers, 64, func(ctx context.Context, w int) error {
		r, err := cli.Put(ctx, key(w), value, clientv3.WithLease(lease.ID))
		if err != nil {
			return fmt.Errorf("raw etcd: put %s: %w", key(w), err)
		}
		revs[w] = r.Header.Revision
		return nil
	})
	if err != nil {
		return Result{}, 1, err
	}
	res := Run(ctx, o.Writers, o.Duration, func(ctx context.Context, w int) error {
		k := key(w)
		r, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", revs[w])).
			Then(clientv3.OpPut(k, value, clientv3.WithLease(lease.ID))).Commit()
		if err != nil {
			return err
		}
		if !r.Succeeded {
			return errConflict
		}
		revs[w] = r.Header.Revision
		return nil
	})
	return res, 1, nil
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
	var errs []error
	for id := range ids {
		_, err := cli.Revoke(ctx, id)
		switch {
		case err == nil:
			leases++
		case !errors.Is(err, rpctypes.ErrLeaseNotFound): // expired meanwhile: nothing to do
			errs = append(errs, fmt.Errorf("revoke lease %x: %w", id, err))
		}
	}
	// Revoking deleted the keys attached; this deletes the rest.
	if _, err := cli.Delete(ctx, prefix, clientv3.WithPrefix()); err != nil {
		errs = append(errs, fmt.Errorf("delete prefix %q: %w", prefix, err))
	} else {
		keys = len(resp.Kvs)
	}
	return keys, leases, errors.Join(errs...)
}

// RawKubeOptions configures RawKube.
type RawKubeOptions struct {
	// Namespace holds the Leases; NamePrefix starts their names
	// (<NamePrefix>w00000...).
	Namespace  string
	NamePrefix string
	Writers    int
	Duration   time.Duration
}

// RawKube measures the raw Kubernetes ceiling of Talon's ordered upsert:
// each writer owns a Lease holding the typical record in an annotation and,
// back to back, updates it (renewTime) with optimistic concurrency on the
// resourceVersion it last read. It returns the Lease objects it created;
// they stay (CleanKube removes them).
func RawKube(ctx context.Context, cs kubernetes.Interface, o RawKubeOptions) (Result, int, error) {
	payload, err := cluster.Encode(Record("raw", "w", 1))
	if err != nil {
		return Result{}, 0, err
	}
	api := cs.CoordinationV1().Leases(o.Namespace)
	leases := make([]*coordinationv1.Lease, o.Writers)
	var mu sync.Mutex // guards created
	created := 0
	err = parallel(ctx, o.Writers, 16, func(ctx context.Context, w int) error {
		l, err := api.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
			Name:        fmt.Sprintf("%sw%05d", o.NamePrefix, w),
			Labels:      map[string]string{RawLabel: "true"},
			Annotations: map[string]string{"talon.io/status": string(payload)}}}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("raw kubernetes: create Lease: %w", err)
		}
		leases[w] = l
		mu.Lock()
		created++
		mu.Unlock()
		return nil
	})
	if err != nil {
		return Result{}, created, err
	}
	res := Run(ctx, o.Writers, o.Duration, func(ctx context.Context, w int) error {
		l := leases[w].DeepCopy()
		now := metav1.NewMicroTime(time.Now())
		l.Spec.RenewTime = &now
		nl, err := api.Update(ctx, l, metav1.UpdateOptions{})
		if err != nil {
			if apierrors.IsConflict(err) {
				return errConflict
			}
			return kubeError(err)
		}
		leases[w] = nl
		return nil
	})
	return res, created, nil
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
