package security

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/testenv"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/kubetest"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// TestAttestedWorkersOnKubernetes runs a coordinator with
// worker-attestation kubernetes under the chart's RBAC (the coordinator's
// service account from deploy/kubernetes/rbac.yaml: Leases and
// tokenreviews create, nothing else) on a real kube-apiserver, and real
// worker processes holding pod-bound projected tokens: worker-a with its
// own token registers; a process calling itself worker-b with worker-a's
// token, and one with no token, are refused at every write and never
// reach the store.
func TestAttestedWorkersOnKubernetes(t *testing.T) {
	talontest.SkipShort(t)
	kube := testenv.StartKubeAPIServer(t, testenv.KubeOptions{})
	admin, err := kubernetes.NewForConfig(kube.RestConfig(kube.AdminToken()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const ns = "talon"
	env := kubetest.New(t, ctx, admin, ns)
	applyChartRBAC(t, ctx, admin, ns)
	exp := int64(3600)
	tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "talon-coordinator", &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := kube.WriteKubeconfig(t, tr.Status.Token)

	podA := env.Pod(t, ctx, "worker-a", "talon-worker")
	env.Pod(t, ctx, "worker-b", "talon-worker")
	dir := t.TempDir()
	tokA := filepath.Join(dir, "token-a")
	if err := os.WriteFile(tokA, []byte(env.Token(t, ctx, "talon-worker", podA, "talon", 600)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	ctl := talontest.FreeAddr(t)
	coord := talontest.Start(t, "coordinator", talontest.CoordinatorArgs("coord-a", ctl, talontest.FreeAddr(t), "--state-backend", "kubernetes", "--kubeconfig", kubeconfig,
		"--kube-namespace", ns, "--worker-attestation", "kubernetes")...)
	testsupport.WaitFor(t, 60*time.Second, "coordinator ready", func() bool { return talontest.Ready(t, coord) })
	blobs := t.TempDir()
	worker := func(id string, extra ...string) *talontest.Proc {
		return talontest.Start(t, id, talontest.WorkerArgs(id, talontest.FreeAddr(t), talontest.FreeAddr(t), []string{ctl}, blobs, t.TempDir(), extra...)...)
	}
	a := worker("worker-a", "--attestation-token-file", tokA)
	impostor := worker("worker-b", "--attestation-token-file", tokA)
	untokened := worker("worker-c")

	nodes := func() map[string]bool {
		l, err := coord.API(t).AllNodes(ctx, apiv1.NodeFilter{})
		if err != nil {
			return nil
		}
		m := map[string]bool{}
		for _, n := range l.Items {
			m[n.NodeID] = true
		}
		return m
	}
	testsupport.WaitFor(t, 60*time.Second, "worker-a registered", func() bool { return nodes()["worker-a"] })
	testsupport.WaitFor(t, 30*time.Second, "both impostors refused, each at least twice", func() bool {
		log := coord.Out.String()
		return strings.Count(log, `register of worker/worker-b: the connection is attested as pod \"worker-a\"`) >= 2 &&
			strings.Count(log, "register of worker/worker-c: the connection is not attested") >= 2
	})
	for _, c := range []struct {
		p    *talontest.Proc
		want string
	}{{impostor, `attested as pod \"worker-a\"`}, {untokened, "the connection is not attested"}} {
		if !strings.Contains(c.p.Out.String(), "permission_denied") || !strings.Contains(c.p.Out.String(), c.want) {
			t.Errorf("%s's log does not show the refusal %q", c.p.Name, c.want)
		}
	}
	// Many heartbeat intervals later, still nothing of theirs is stored.
	time.Sleep(2 * time.Second)
	got := nodes()
	if !got["worker-a"] || got["worker-b"] || got["worker-c"] {
		t.Fatalf("nodes in the store: %v, want worker-a and neither impostor", got)
	}
	leases, err := admin.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{LabelSelector: "talon.io/role=worker"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range leases.Items {
		names = append(names, l.Labels["talon.io/node"])
	}
	if len(names) != 1 || names[0] != "worker-a" {
		t.Fatalf("worker Leases %v, want only worker-a's", names)
	}
	metrics := talontest.ScrapeText(t, coord)
	refused := talontest.GrepLines(metrics, `talon_coordinator_auth_refusals_total{reason="not_attested"}`)
	t.Logf("after the impostors ran: %s; worker-a live: %t", refused, talontest.Live(t, a))
	if refused == "" || strings.HasSuffix(refused, " 0") {
		t.Fatalf("no not_attested refusals counted:\n%s", talontest.GrepLines(metrics, "talon_coordinator_auth_refusals_total"))
	}
	if strings.Contains(coord.Out.String(), strings.TrimSpace(mustReadFile(t, tokA))) || strings.Contains(impostor.Out.String(), strings.TrimSpace(mustReadFile(t, tokA))) {
		t.Fatal("a log shows the token")
	}
}

func mustReadFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// applyChartRBAC creates the objects of deploy/kubernetes/rbac.yaml (the
// chart's default render) in namespace ns, and waits until the
// coordinator's service account may create TokenReviews.
func applyChartRBAC(t *testing.T, ctx context.Context, admin kubernetes.Interface, ns string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "deploy", "kubernetes", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, doc := range bytes.Split(raw, []byte("\n---\n")) {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, meta.Kind)
		switch meta.Kind {
		case "ServiceAccount":
			var o corev1.ServiceAccount
			mustUnmarshal(t, doc, &o)
			_, err = admin.CoreV1().ServiceAccounts(ns).Create(ctx, &o, metav1.CreateOptions{})
		case "Role":
			var o rbacv1.Role
			mustUnmarshal(t, doc, &o)
			_, err = admin.RbacV1().Roles(ns).Create(ctx, &o, metav1.CreateOptions{})
		case "RoleBinding":
			var o rbacv1.RoleBinding
			mustUnmarshal(t, doc, &o)
			_, err = admin.RbacV1().RoleBindings(ns).Create(ctx, &o, metav1.CreateOptions{})
		case "ClusterRole":
			var o rbacv1.ClusterRole
			mustUnmarshal(t, doc, &o)
			_, err = admin.RbacV1().ClusterRoles().Create(ctx, &o, metav1.CreateOptions{})
		case "ClusterRoleBinding":
			var o rbacv1.ClusterRoleBinding
			mustUnmarshal(t, doc, &o)
			_, err = admin.RbacV1().ClusterRoleBindings().Create(ctx, &o, metav1.CreateOptions{})
		default:
			t.Fatalf("rbac.yaml: unexpected kind %q", meta.Kind)
		}
		if err != nil {
			t.Fatalf("create %s: %v", meta.Kind, err)
		}
	}
	if !strings.Contains(strings.Join(kinds, ","), "ClusterRoleBinding") {
		t.Fatalf("rbac.yaml has %v: no ClusterRoleBinding for tokenreviews", kinds)
	}
}

func mustUnmarshal(t *testing.T, doc []byte, o any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(doc, o); err != nil {
		t.Fatal(err)
	}
}
