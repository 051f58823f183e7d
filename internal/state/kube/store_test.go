package kube

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/state/statetest"
	"github.com/talonhq/talon/internal/testenv"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// contractLeaseTTL is the suite's lease: Kubernetes counts whole seconds,
// and expiry is exact (the reader compares renewTime with its clock), so
// two seconds leave the suite's half-lease margin far above any lag.
const contractLeaseTTL = 2 * time.Second

// contractRequestTimeout is the request timeout of the suite's stores.
const contractRequestTimeout = 8 * time.Second

// faultRequestTimeout is the request timeout of the store a timeout fault
// hands the suite: below the suite's three-second deadline, so the store's
// own bound is what fires.
const faultRequestTimeout = 1500 * time.Millisecond

// TestContract runs the whole statetest suite against a real kube-apiserver,
// every case as the deployment's ServiceAccount holding exactly the Role
// and RoleBinding of deploy/kubernetes/rbac.yaml, each in a namespace of
// its own: with the store's snapshot cache (as the coordinator runs it),
// once with the API server's watch cache on (production's setting:
// consistent lists and watches are served from the cache) and once with it
// off (lists and watches read etcd); and with snapshots as LISTs, the
// watch cache off.
func TestContract(t *testing.T) {
	for _, tc := range []struct {
		name         string
		noWatchCache bool
		cache        bool
	}{
		{"watchcache=on/snapshots=cache", false, true},
		{"watchcache=off/snapshots=cache", true, true},
		{"watchcache=off/snapshots=list", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := startKubeWith(t, testenv.KubeOptions{NoWatchCache: tc.noWatchCache})
			statetest.Run(t, func(t *testing.T) *statetest.Harness { return k.harness(t, !tc.noWatchCache, tc.cache) })
		})
	}
}

// harness is one contract case's harness on the shared server; cache turns
// the stores' snapshot cache on.
func (k *kubeEnv) harness(t *testing.T, watchCache, cache bool) *statetest.Harness {
	ns := k.namespace(t, "contract")
	c := k.applyRBAC(t, ns)
	withCache := func(o *Options) {
		o.CacheSnapshots = cache
		// Generous on a loaded machine (a Lease update once took over the
		// 5 s default at load 11), yet below the suite's 10 s per operation.
		o.RequestTimeout = contractRequestTimeout
	}
	s := k.newStore(t, c.token, ns, withCache)
	h := &statetest.Harness{
		Store:    s,
		Advance:  time.Sleep,
		LeaseTTL: contractLeaseTTL,
		Fault:    func(t testing.TB, f statetest.Fault) (state.Store, func()) { return k.fault(t, c, s, f) },
		Compact: func(t testing.TB) {
			k.srv.Etcd().Compact(t, 0)
			if watchCache {
				// The watch cache keeps serving history etcd has compacted
				// until it rolls past it; a restarted server's cache starts
				// at the current revision, so every older one is gone.
				k.srv.Stop()
				k.srv.Start()
				k.waitAccess(t, c, true)
			}
		},
		Peer: func(t testing.TB, offset time.Duration) state.Store {
			return k.newStore(t, c.token, ns, func(o *Options) {
				withCache(o)
				o.Clock = func() time.Time { return time.Now().Add(offset) }
			})
		},
	}
	if cache {
		h.SmallWatchBuffer = func(t testing.TB) (state.Store, int) {
			const n = 32
			return k.newStore(t, c.token, ns, func(o *Options) { withCache(o); o.ringSize = n }), n
		}
	}
	return h
}

// fault causes f for real against the shared server.
func (k *kubeEnv) fault(t testing.TB, c *coordinator, s *Store, f statetest.Fault) (state.Store, func()) {
	t.Helper()
	switch f {
	case statetest.FaultUnavailable:
		k.srv.Stop()
		return s, k.srv.Start
	case statetest.FaultTimeout:
		// The API server keeps answering connections but the etcd under it
		// answers nothing, so every request hangs: a store with a short
		// request timeout must report ErrTimeout on its own.
		faulty := k.newStore(t, c.token, c.namespace, func(o *Options) {
			o.RequestTimeout = faultRequestTimeout
			o.CacheSnapshots = s.opts.CacheSnapshots
		})
		k.srv.Etcd().Pause()
		return faulty, func() {
			k.srv.Etcd().Resume()
			_ = faulty.Close()
		}
	case statetest.FaultUnauthenticated:
		faulty := k.newStore(t, "not-a-valid-token", c.namespace, nil)
		return faulty, func() { _ = faulty.Close() }
	case statetest.FaultPermissionDenied:
		// Revoke the Role: delete the RoleBinding, wait until the
		// authorizer has seen it, and restore it afterwards.
		ctx := testCtx(t)
		if err := k.admin.RbacV1().RoleBindings(c.namespace).Delete(ctx, c.binding.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete RoleBinding: %v", err)
		}
		k.waitAccess(t, c, false)
		return s, func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := k.admin.RbacV1().RoleBindings(c.namespace).Create(ctx, c.binding.DeepCopy(), metav1.CreateOptions{}); err != nil {
				t.Errorf("restore RoleBinding: %v", err)
			}
		}
	}
	t.Fatalf("fault %s: not supported", f)
	return nil, nil
}

// TestOtherNamespaceRefused checks that the deployment's identity gets
// nothing beyond its own namespace, and an identity without the Role gets
// nothing at all: both fail with ErrPermissionDenied.
func TestOtherNamespaceRefused(t *testing.T) {
	k := startKube(t)
	own := k.namespace(t, "own")
	other := k.namespace(t, "other")
	c := k.applyRBAC(t, own)
	clusterID := uniqueCluster(t)
	rec := record(clusterID, "worker", "w1", "inc-a", 1)

	if _, err := k.newStore(t, c.token, own, nil).UpsertNode(testCtx(t), rec, time.Minute); err != nil {
		t.Fatalf("UpsertNode in its own namespace: %v", err)
	}
	for _, tc := range []struct {
		name, token, ns string
	}{
		{"service account in another namespace", c.token, other},
		{"user without the role in the namespace", k.srv.RestrictedToken(), own},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := k.newStore(t, tc.token, tc.ns, nil)
			ctx := testCtx(t)
			checks := map[string]error{
				"CheckReady": s.CheckReady(ctx),
			}
			_, checks["UpsertNode"] = s.UpsertNode(ctx, rec, time.Minute)
			_, checks["Snapshot"] = s.Snapshot(ctx, clusterID)
			_, checks["RemoveNode"] = s.RemoveNode(ctx, rec.Key(), "inc-a")
			for op, err := range checks {
				if !errors.Is(err, state.ErrPermissionDenied) || state.Code(err) != "permission_denied" {
					t.Errorf("%s: error %v, want ErrPermissionDenied", op, err)
				}
			}
			var watchErr error
			for b := range s.Watch(ctx, clusterID, state.NewRevision("1")) {
				if len(b.Events) > 0 {
					t.Fatalf("Watch delivered %d events", len(b.Events))
				}
				watchErr = b.Err
			}
			if !errors.Is(watchErr, state.ErrPermissionDenied) {
				t.Errorf("Watch: ended with %v, want ErrPermissionDenied", watchErr)
			}
		})
	}
}
