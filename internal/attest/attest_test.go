package attest_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/talonhq/talon/internal/attest"
	"github.com/talonhq/talon/internal/testenv"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/kubetest"
)

// TestReviewOnARealAPIServer checks every verdict against a real
// kube-apiserver: only a pod-bound token of a worker service account,
// issued for the audience, attests, and it attests its own pod's name.
func TestReviewOnARealAPIServer(t *testing.T) {
	testenv.SkipIfShort(t)
	srv := testenv.StartKubeAPIServer(t, testenv.KubeOptions{})
	admin, err := kubernetes.NewForConfig(srv.RestConfig(srv.AdminToken()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ns = "talon"
	env := kubetest.New(t, ctx, admin, ns)
	podA := env.Pod(t, ctx, "worker-a", "talon-worker")
	env.Pod(t, ctx, "worker-b", "talon-worker")
	rogue := env.Pod(t, ctx, "rogue", "other")

	newKube := func(t *testing.T, cs *kubernetes.Clientset, refusedTTL time.Duration) *attest.Kube {
		k, err := attest.New(attest.Options{Reviews: cs.AuthenticationV1().TokenReviews(), ServiceAccounts: []string{ns + "/talon-worker"},
			RefusedTTL: refusedTTL, CacheTTL: 50 * time.Millisecond, Clock: time.Now, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	k := newKube(t, admin, 50*time.Millisecond)

	tokA := env.Token(t, ctx, "talon-worker", podA, "talon", 600)
	a, err := k.Review(ctx, []byte(tokA))
	if err != nil {
		t.Fatalf("worker-a's token: %v", err)
	}
	if a.NodeID != "worker-a" || a.Subject != ns+"/talon-worker" || a.PodUID != string(podA.UID) {
		t.Fatalf("worker-a's token attests %+v", a)
	}
	if d := time.Until(a.Expires); d <= 0 || d > attest.DefaultMaxAge+time.Second {
		t.Fatalf("attestation lasts %s, want at most MaxAge %s", d, attest.DefaultMaxAge)
	}

	refusals := []struct {
		name, token, want string
	}{
		{"other audience", env.Token(t, ctx, "talon-worker", podA, "not-talon", 600), `audience "talon"`},
		{"not bound to a pod", env.Token(t, ctx, "talon-worker", nil, "talon", 600), "not bound to a pod"},
		{"another service account", env.Token(t, ctx, "other", rogue, "talon", 600), "other is not a worker service account"},
		{"not a JWT", "garbage", "not a JWT"},
		{"forged signature", tokA[:strings.LastIndexByte(tokA, '.')+1] + "AAAA", "did not accept"},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			_, err := k.Review(ctx, []byte(tt.token))
			if !errors.Is(err, attest.ErrRefused) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Review = %v, want ErrRefused mentioning %q", err, tt.want)
			}
			if strings.Contains(err.Error(), tt.token) && len(tt.token) > 16 {
				t.Fatalf("the error echoes the token: %v", err)
			}
		})
	}

	t.Run("deleted pod", func(t *testing.T) {
		podC := env.Pod(t, ctx, "worker-c", "talon-worker")
		tokC := env.Token(t, ctx, "talon-worker", podC, "talon", 600)
		if _, err := k.Review(ctx, []byte(tokC)); err != nil {
			t.Fatalf("before the delete: %v", err)
		}
		if err := admin.CoreV1().Pods(ns).Delete(ctx, "worker-c", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			t.Fatal(err)
		}
		testsupport.WaitFor(t, 30*time.Second, "the deleted pod's token refused", func() bool {
			_, err := k.Review(ctx, []byte(tokC))
			return errors.Is(err, attest.ErrRefused)
		})
	})

	t.Run("verifier without tokenreviews create", func(t *testing.T) {
		restricted, err := kubernetes.NewForConfig(srv.RestConfig(srv.RestrictedToken()))
		if err != nil {
			t.Fatal(err)
		}
		_, err = newKube(t, restricted, time.Second).Review(ctx, []byte(tokA))
		if !errors.Is(err, attest.ErrUnavailable) || !strings.Contains(err.Error(), "tokenreviews create") {
			t.Fatalf("Review with a restricted verifier = %v, want ErrUnavailable naming tokenreviews create", err)
		}
	})
}
