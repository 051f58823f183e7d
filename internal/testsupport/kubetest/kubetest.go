// Package kubetest sets up the Kubernetes objects that attestation tests
// need on a real API server: a namespace, service accounts, pods (which
// stay Pending: there is no scheduler) and pod-bound tokens from the
// TokenRequest API.
package kubetest

import (
	"context"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Env creates objects in one namespace with an admin client.
type Env struct {
	Admin     kubernetes.Interface
	Namespace string
}

// New creates namespace ns if it does not exist.
func New(t testing.TB, ctx context.Context, admin kubernetes.Interface, ns string) *Env {
	t.Helper()
	_, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", ns, err)
	}
	return &Env{Admin: admin, Namespace: ns}
}

// ServiceAccount creates service account name if it does not exist.
func (e *Env) ServiceAccount(t testing.TB, ctx context.Context, name string) {
	t.Helper()
	_, err := e.Admin.CoreV1().ServiceAccounts(e.Namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create service account %s: %v", name, err)
	}
}

// Pod creates pod name running as service account sa (created too).
func (e *Env) Pod(t testing.TB, ctx context.Context, name, sa string) *corev1.Pod {
	t.Helper()
	e.ServiceAccount(t, ctx, sa)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{ServiceAccountName: sa, AutomountServiceAccountToken: new(bool),
			Containers: []corev1.Container{{Name: "talon", Image: "talon:test"}}},
	}
	got, err := e.Admin.CoreV1().Pods(e.Namespace).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s: %v", name, err)
	}
	return got
}

// Token returns a token of service account sa from the TokenRequest API
// for audience (empty: the API server's own), bound to pod when pod is
// not nil, valid for seconds.
func (e *Env) Token(t testing.TB, ctx context.Context, sa string, pod *corev1.Pod, audience string, seconds int64) string {
	t.Helper()
	spec := authnv1.TokenRequestSpec{ExpirationSeconds: &seconds}
	if audience != "" {
		spec.Audiences = []string{audience}
	}
	if pod != nil {
		spec.BoundObjectRef = &authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
	}
	tr, err := e.Admin.CoreV1().ServiceAccounts(e.Namespace).CreateToken(ctx, sa, &authnv1.TokenRequest{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of %s: %v", sa, err)
	}
	return tr.Status.Token
}
