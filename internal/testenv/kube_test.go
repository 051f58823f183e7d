package testenv

import (
	"context"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

func clientset(t *testing.T, cfg *rest.Config) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("kubernetes.NewForConfig: %v", err)
	}
	return cs
}

func newLease(name string) *coordinationv1.Lease {
	holder := "talon-node-1"
	secs := int32(15)
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs},
	}
}

func TestKubeAPIServer(t *testing.T) {
	SkipIfShort(t)
	const ns = "talon-system"
	start := time.Now()
	k := StartKubeAPIServer(t, KubeOptions{
		Users: []KubeUser{{Name: "talon-extra", Token: "extra-token", Groups: []string{"talon-group"}}},
	})
	t.Logf("etcd + kube-apiserver ready in %v", time.Since(start).Round(time.Millisecond))
	if !strings.HasPrefix(k.Host(), "https://127.0.0.1:") {
		t.Errorf("Host() = %q, want https://127.0.0.1:<port>", k.Host())
	}
	if b, err := os.ReadFile(k.CAFile()); err != nil || string(b) != string(k.CAData()) {
		t.Errorf("CAFile() content differs from CAData() (err %v)", err)
	}

	admin := clientset(t, k.RestConfig(k.AdminToken()))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("admin create namespace: %v", err)
	}
	created, err := admin.CoordinationV1().Leases(ns).Create(ctx, newLease("talon-coordinator"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("admin create lease: %v", err)
	}
	if created.ResourceVersion == "" {
		t.Error("created lease has no resourceVersion")
	}
	got, err := admin.CoordinationV1().Leases(ns).Get(ctx, "talon-coordinator", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("admin get lease: %v", err)
	}
	if got.Spec.HolderIdentity == nil || *got.Spec.HolderIdentity != "talon-node-1" {
		t.Errorf("lease holder = %v, want talon-node-1", got.Spec.HolderIdentity)
	}

	t.Run("restricted token is forbidden", func(t *testing.T) {
		restricted := clientset(t, k.RestConfig(k.RestrictedToken()))
		_, err := restricted.CoordinationV1().Leases(ns).Get(ctx, "talon-coordinator", metav1.GetOptions{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("restricted get lease: err = %v, want 403 Forbidden", err)
		}
		_, err = restricted.CoordinationV1().Leases(ns).Create(ctx, newLease("other"), metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("restricted create lease: err = %v, want 403 Forbidden", err)
		}
		if err != nil && !strings.Contains(err.Error(), KubeRestrictedUser) {
			t.Errorf("forbidden error %q does not name user %q", err, KubeRestrictedUser)
		}
	})

	t.Run("unknown token is unauthorized", func(t *testing.T) {
		for _, token := range []string{"not-a-token", "extra-token-x", ""} {
			cs := clientset(t, k.RestConfig(token))
			_, err := cs.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
			if token == "" {
				// No token at all is the anonymous user: authenticated as
				// system:anonymous, which RBAC forbids.
				if !apierrors.IsForbidden(err) {
					t.Errorf("no token: err = %v, want 403 Forbidden", err)
				}
				continue
			}
			if !apierrors.IsUnauthorized(err) {
				t.Errorf("token %q: err = %v, want 401 Unauthorized", token, err)
			}
		}
	})

	t.Run("extra user authenticates", func(t *testing.T) {
		cs := clientset(t, k.RestConfig("extra-token"))
		_, err := cs.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "talon-extra") {
			t.Errorf("extra user list leases: err = %v, want 403 naming talon-extra", err)
		}
	})

	t.Run("kubeconfig", func(t *testing.T) {
		path := k.WriteKubeconfig(t, k.AdminToken())
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			t.Fatalf("load kubeconfig: %v", err)
		}
		cs := clientset(t, cfg)
		if _, err := cs.CoordinationV1().Leases(ns).Get(ctx, "talon-coordinator", metav1.GetOptions{}); err != nil {
			t.Fatalf("get lease via kubeconfig: %v", err)
		}
	})

	t.Run("restart keeps data", func(t *testing.T) {
		host := k.Host()
		k.Stop()
		if _, err := admin.CoordinationV1().Leases(ns).Get(ctx, "talon-coordinator", metav1.GetOptions{}); err == nil {
			t.Fatal("get lease while the server is stopped succeeded")
		}
		k.Start()
		if k.Host() != host {
			t.Errorf("Host() after restart = %q, want %q", k.Host(), host)
		}
		got, err := admin.CoordinationV1().Leases(ns).Get(ctx, "talon-coordinator", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get lease after restart: %v", err)
		}
		if got.ResourceVersion != created.ResourceVersion {
			t.Errorf("lease resourceVersion after restart = %s, want %s", got.ResourceVersion, created.ResourceVersion)
		}
	})
}

func TestKubeAPIServerSharedTLSEtcd(t *testing.T) {
	SkipIfShort(t)
	e := StartEtcd(t, EtcdOptions{ClientCertAuth: true})
	var pids []int
	t.Run("servers", func(t *testing.T) {
		k1 := StartKubeAPIServer(t, KubeOptions{Etcd: e})
		k2 := StartKubeAPIServer(t, KubeOptions{Etcd: e})
		if k1.EtcdPrefix() == k2.EtcdPrefix() || k1.Etcd() != e {
			t.Fatalf("prefixes %q and %q, want distinct on the shared etcd", k1.EtcdPrefix(), k2.EtcdPrefix())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "only-in-k1"}}
		if _, err := clientset(t, k1.RestConfig(k1.AdminToken())).CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create namespace on k1: %v", err)
		}
		_, err := clientset(t, k2.RestConfig(k2.AdminToken())).CoreV1().Namespaces().Get(ctx, "only-in-k1", metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("k2 get namespace created on k1: err = %v, want not found", err)
		}
		// The data lands under k1's prefix in the shared etcd.
		resp, err := e.Client(t).Get(ctx, k1.EtcdPrefix()+"/namespaces/only-in-k1")
		if err != nil || len(resp.Kvs) != 1 {
			t.Errorf("etcd key under %s: %d keys, err %v; want one", k1.EtcdPrefix(), len(resp.Kvs), err)
		}
		pids = []int{k1.p.pid(), k2.p.pid()}
	})
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("kube-apiserver pid %d after cleanup: kill(pid, 0) err = %v, want ESRCH", pid, err)
		}
	}
	if e.p.pid() == 0 {
		t.Error("shared etcd was stopped by the kube-apiserver cleanups; it belongs to the outer test")
	}
}
