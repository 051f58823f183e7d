package kube

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/testenv"
)

// rbacFile is the deployment's RBAC manifest, relative to this package.
const rbacFile = "../../../deploy/kubernetes/rbac.yaml"

// kubeEnv is one real kube-apiserver (and its etcd) shared by a test's
// cases, with an admin client for setting up namespaces and causing
// faults.
type kubeEnv struct {
	srv   *testenv.KubeAPIServer
	admin *kubernetes.Clientset
}

// startKube starts a kube-apiserver for t with its watch cache on (the
// default, as in a real cluster) and extraArgs.
func startKube(t testing.TB, extraArgs ...string) *kubeEnv {
	t.Helper()
	return startKubeWith(t, testenv.KubeOptions{ExtraArgs: extraArgs})
}

// startKubeWith starts a kube-apiserver for t with opts.
func startKubeWith(t testing.TB, opts testenv.KubeOptions) *kubeEnv {
	t.Helper()
	testenv.SkipIfShort(t)
	srv := testenv.StartKubeAPIServer(t, opts)
	admin, err := kubernetes.NewForConfig(srv.RestConfig(srv.AdminToken()))
	if err != nil {
		t.Fatalf("admin client: %v", err)
	}
	return &kubeEnv{srv: srv, admin: admin}
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func randomSuffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// namespace creates a fresh namespace. Namespaces are not deleted: a bare
// kube-apiserver has no namespace controller to finalize them, and the
// server dies with the test.
func (k *kubeEnv) namespace(t testing.TB, prefix string) string {
	t.Helper()
	ns := prefix + "-" + randomSuffix()
	_, err := k.admin.CoreV1().Namespaces().Create(testCtx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace %s: %v", ns, err)
	}
	return ns
}

// rbacObjects parses deploy/kubernetes/rbac.yaml: exactly one
// ServiceAccount, Role and RoleBinding.
func rbacObjects(t testing.TB) (*corev1.ServiceAccount, *rbacv1.Role, *rbacv1.RoleBinding) {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(here), rbacFile))
	if err != nil {
		t.Fatalf("read RBAC manifest: %v", err)
	}
	var (
		sa *corev1.ServiceAccount
		ro *rbacv1.Role
		rb *rbacv1.RoleBinding
	)
	for i, doc := range bytes.Split(raw, []byte("\n---\n")) {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatalf("RBAC manifest document %d: %v", i, err)
		}
		var target any
		switch meta.Kind {
		case "ServiceAccount":
			sa = &corev1.ServiceAccount{}
			target = sa
		case "Role":
			ro = &rbacv1.Role{}
			target = ro
		case "RoleBinding":
			rb = &rbacv1.RoleBinding{}
			target = rb
		case "ClusterRole", "ClusterRoleBinding":
			continue // tokenreviews create, for worker attestation: not the store's
		default:
			t.Fatalf("RBAC manifest document %d: unexpected kind %q", i, meta.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, target); err != nil {
			t.Fatalf("RBAC manifest document %d (%s): %v", i, meta.Kind, err)
		}
	}
	if sa == nil || ro == nil || rb == nil {
		t.Fatalf("RBAC manifest lacks a ServiceAccount, Role or RoleBinding")
	}
	return sa, ro, rb
}

// coordinator is the identity of the deployment's ServiceAccount in one
// namespace, holding exactly the Role and RoleBinding of
// deploy/kubernetes/rbac.yaml.
type coordinator struct {
	namespace string
	token     string
	binding   *rbacv1.RoleBinding // as applied, for restoring after a fault
}

// applyRBAC applies the manifest in ns (its objects' namespace and the
// binding subject's namespace replaced by ns, nothing else changed) and
// returns a token of its ServiceAccount from the TokenRequest API.
func (k *kubeEnv) applyRBAC(t testing.TB, ns string) *coordinator {
	t.Helper()
	ctx := testCtx(t)
	sa, ro, rb := rbacObjects(t)
	sa.Namespace, ro.Namespace, rb.Namespace = ns, ns, ns
	for i := range rb.Subjects {
		if rb.Subjects[i].Kind == rbacv1.ServiceAccountKind {
			rb.Subjects[i].Namespace = ns
		}
	}
	if _, err := k.admin.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ServiceAccount: %v", err)
	}
	if _, err := k.admin.RbacV1().Roles(ns).Create(ctx, ro, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Role: %v", err)
	}
	if _, err := k.admin.RbacV1().RoleBindings(ns).Create(ctx, rb.DeepCopy(), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create RoleBinding: %v", err)
	}
	exp := int64(3600)
	tr, err := k.admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name, &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("request a ServiceAccount token: %v", err)
	}
	c := &coordinator{namespace: ns, token: tr.Status.Token, binding: rb}
	// The RBAC authorizer learns of the binding through a watch: wait for it.
	k.waitAccess(t, c, true)
	return c
}

// waitAccess waits until c may (allowed) or may not list Leases in its
// namespace, as the API server's authorizer sees it.
func (k *kubeEnv) waitAccess(t testing.TB, c *coordinator, allowed bool) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(k.srv.RestConfig(c.token))
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := cs.CoordinationV1().Leases(c.namespace).List(ctx, metav1.ListOptions{Limit: 1})
		cancel()
		if (err == nil) == allowed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("access of %s to leases still allowed=%t after 30s: %v", c.namespace, !allowed, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// newStore builds a store for token in ns and closes it in a cleanup.
func (k *kubeEnv) newStore(t testing.TB, token, ns string, edit func(*Options)) *Store {
	t.Helper()
	o := Options{RESTConfig: k.srv.RestConfig(token), Namespace: ns}
	if edit != nil {
		edit(&o)
	}
	s, err := New(context.Background(), o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// record returns a valid record.
func record(clusterID string, role cluster.Role, node, inc string, seq uint64) *cluster.Record {
	return &cluster.Record{
		ClusterID:       clusterID,
		NodeID:          node,
		Role:            role,
		IncarnationID:   inc,
		Address:         "10.0.0.1:7000",
		Version:         "test",
		StartTimeUnixMs: 1,
		HeartbeatSeq:    seq,
		Health:          cluster.HealthHealthy,
		Ready:           true,
		Labels:          map[string]string{"zone": "z1"},
	}
}

// uniqueCluster returns a cluster ID no other test uses.
func uniqueCluster(t testing.TB) string {
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, strings.ToLower(t.Name()))
	if len(name) > 40 {
		name = name[len(name)-40:]
	}
	return fmt.Sprintf("c%s-%s", name, randomSuffix())
}
