package deploy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"

	"github.com/talonhq/talon/internal/testenv"
)

// crdKinds are served only where cert-manager's CRDs are installed; a bare
// kube-apiserver does not serve them, so they are checked as rendered
// (TestChartDefaults, TestChartHAValues) and not applied. The Prometheus
// Operator's ServiceMonitor and PrometheusRule are applied: the test
// installs their CRDs (installPromOperatorCRDs).
var crdKinds = []string{"Issuer", "Certificate"}

// TestChartAppliesToAPIServer renders the chart with default values and with
// the HA values, applies every object to a real kube-apiserver (server-side
// apply with strict field validation: unknown or misplaced fields are
// errors), and checks what the server stored: the grace periods exceed
// drain-delay plus shutdown-timeout as talon loads them, the coordinators' RBAC grants
// leases in the release namespace and nothing else (asked of the server's
// own authorizer), both roles have PodDisruptionBudgets, both workloads keep
// their startupProbe, the helm test hook Pods are accepted, and every
// container, the hooks' included, runs non-root with a read-only root
// filesystem and no capabilities.
func TestChartAppliesToAPIServer(t *testing.T) {
	testenv.SkipIfShort(t)
	srv := testenv.StartKubeAPIServer(t, testenv.KubeOptions{})
	cfg := srv.RestConfig(srv.AdminToken())
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	crdCtx, cancelCRD := context.WithTimeout(context.Background(), 5*time.Minute)
	installPromOperatorCRDs(crdCtx, t, dyn)
	cancelCRD()
	groups, err := restmapper.GetAPIGroupResources(kc.Discovery())
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)

	for _, tc := range []struct {
		name string
		args []string
	}{
		{"default", nil},
		{"ha", []string{"-f", haValues}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := "talon-" + tc.name + "-" + suffix()
			// Render first: helm may still be building (make test
			// LAZY_TESTBINS=1 builds it beside the tests), and the
			// deadline is the API server's, not the build's.
			objs := render(t, ns, tc.args...)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			applied := 0
			for _, o := range objs {
				if slices.Contains(crdKinds, o.kind()) {
					continue
				}
				apply(ctx, t, dyn, mapper, ns, o)
				applied++
			}
			if applied < 12 {
				t.Fatalf("applied %d objects, want at least 12", applied)
			}
			checkGrace(t, objs, loadRoleConfigs(t, objs))
			checkRBAC(ctx, t, kc, ns)
			checkPDBs(ctx, t, kc, ns)
			checkPodSecurity(ctx, t, kc, ns)
			if tc.name == "ha" {
				checkServiceMonitor(ctx, t, dyn, ns)
			}
		})
	}
}

func suffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// apply server-side applies o in ns with strict field validation.
func apply(ctx context.Context, t *testing.T, dyn dynamic.Interface, mapper meta.RESTMapper, ns string, o object) {
	t.Helper()
	apiVersion, _ := o["apiVersion"].(string)
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		t.Fatalf("%s %s: apiVersion %q: %v", o.kind(), o.name(), apiVersion, err)
	}
	m, err := mapper.RESTMapping(gv.WithKind(o.kind()).GroupKind(), gv.Version)
	if err != nil {
		t.Fatalf("%s %s: the server does not serve %s: %v", o.kind(), o.name(), apiVersion, err)
	}
	body, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ri = dyn.Resource(m.Resource).Namespace(ns)
	}
	force := true
	if _, err := ri.Patch(ctx, o.name(), types.ApplyPatchType, body, metav1.PatchOptions{
		FieldManager: "talon-chart-test", Force: &force, FieldValidation: metav1.FieldValidationStrict,
	}); err != nil {
		t.Fatalf("apply %s %s: %v", o.kind(), o.name(), err)
	}
}

// checkRBAC reads the Role back and asks the server's authorizer what the
// coordinators' ServiceAccount may do.
func checkRBAC(ctx context.Context, t *testing.T, kc kubernetes.Interface, ns string) {
	t.Helper()
	roles, err := kc.RbacV1().Roles(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(roles.Items) != 1 {
		t.Fatalf("want one Role, got %d", len(roles.Items))
	}
	checkRoleRules(t, roles.Items[0].Rules)
	// The one cluster-scoped grant: tokenreviews create, for verifying
	// workers' attestation tokens.
	// Cluster-scoped objects of this release's namespace: their names
	// start with it (several releases share the API server).
	ours := func(name string) bool { return strings.HasPrefix(name, ns+"-") }
	crs, err := kc.RbacV1().ClusterRoles().List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + release})
	if err != nil {
		t.Fatal(err)
	}
	var roleName string
	for _, cr := range crs.Items {
		if !ours(cr.Name) {
			continue
		}
		if roleName != "" {
			t.Fatalf("chart created more than one ClusterRole in %s: %s and %s", ns, roleName, cr.Name)
		}
		roleName = cr.Name
		for _, r := range cr.Rules {
			if !slices.Equal(r.APIGroups, []string{"authentication.k8s.io"}) || !slices.Equal(r.Resources, []string{"tokenreviews"}) || !slices.Equal(r.Verbs, []string{"create"}) {
				t.Errorf("ClusterRole rule %+v grants more than tokenreviews create", r)
			}
		}
	}
	if roleName == "" {
		t.Fatalf("chart created no ClusterRole for tokenreviews in %s", ns)
	}
	crbs, err := kc.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + release})
	if err != nil {
		t.Fatal(err)
	}
	var bindings int
	for _, b := range crbs.Items {
		if ours(b.Name) {
			bindings++
			if b.RoleRef.Name != roleName {
				t.Errorf("ClusterRoleBinding %s binds %s, want %s", b.Name, b.RoleRef.Name, roleName)
			}
		}
	}
	if bindings != 1 {
		t.Errorf("chart created %d ClusterRoleBindings in %s, want 1", bindings, ns)
	}
	sas, err := kc.CoreV1().ServiceAccounts(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=coordinator"})
	if err != nil || len(sas.Items) != 1 {
		t.Fatalf("coordinator ServiceAccount: %v, %d found", err, len(sas.Items))
	}
	user := "system:serviceaccount:" + ns + ":" + sas.Items[0].Name
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
	for _, c := range []struct {
		attrs authorizationv1.ResourceAttributes
		want  bool
	}{
		{authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Group: "coordination.k8s.io", Resource: "leases"}, true},
		{authorizationv1.ResourceAttributes{Namespace: ns, Verb: "watch", Group: "coordination.k8s.io", Resource: "leases"}, true},
		{authorizationv1.ResourceAttributes{Namespace: ns, Verb: "delete", Group: "coordination.k8s.io", Resource: "leases", Name: "talon-x"}, true},
		{authorizationv1.ResourceAttributes{Namespace: "kube-system", Verb: "list", Group: "coordination.k8s.io", Resource: "leases"}, false},
		{authorizationv1.ResourceAttributes{Verb: "list", Group: "coordination.k8s.io", Resource: "leases"}, false},
		{authorizationv1.ResourceAttributes{Namespace: ns, Verb: "get", Resource: "secrets"}, false},
		{authorizationv1.ResourceAttributes{Namespace: ns, Verb: "list", Resource: "pods"}, false},
		{authorizationv1.ResourceAttributes{Namespace: ns, Verb: "update", Group: "rbac.authorization.k8s.io", Resource: "roles"}, false},
		{authorizationv1.ResourceAttributes{Verb: "create", Group: "authentication.k8s.io", Resource: "tokenreviews"}, true},
		{authorizationv1.ResourceAttributes{Verb: "create", Group: "authorization.k8s.io", Resource: "subjectaccessreviews"}, false},
	} {
		a := c.attrs
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: groups, ResourceAttributes: &a}}
		var res *authorizationv1.SubjectAccessReview
		// The authorizer sees new RBAC objects through an informer: the
		// grants (asked first) may take a moment to show; once they have,
		// the refusals that follow are the Role's, not the cache's.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			var err error
			if res, err = kc.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if res.Status.Allowed || !c.want || time.Now().After(deadline) {
				break
			}
		}
		if res.Status.Allowed != c.want {
			t.Errorf("%s may %s %s/%s in %q: %v, want %v", user, a.Verb, a.Group, a.Resource, a.Namespace, res.Status.Allowed, c.want)
		}
	}
}

func checkPDBs(ctx context.Context, t *testing.T, kc kubernetes.Interface, ns string) {
	t.Helper()
	pdbs, err := kc.PolicyV1().PodDisruptionBudgets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, role := range []string{"coordinator", "worker"} {
		n := 0
		for _, p := range pdbs.Items {
			if p.Spec.Selector != nil && p.Spec.Selector.MatchLabels["app.kubernetes.io/component"] == role && p.Spec.MaxUnavailable != nil {
				n++
			}
		}
		if n != 1 {
			t.Errorf("want one PodDisruptionBudget with maxUnavailable for the %ss, got %d", role, n)
		}
	}
}

// checkPodSecurity reads the stored workloads (after the server's
// defaulting) and checks every container's effective security context.
func checkPodSecurity(ctx context.Context, t *testing.T, kc kubernetes.Interface, ns string) {
	t.Helper()
	deps, err := kc.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sts, err := kc.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	specs := map[string]corev1.PodSpec{}
	for _, d := range deps.Items {
		specs["Deployment "+d.Name] = d.Spec.Template.Spec
	}
	for _, s := range sts.Items {
		specs["StatefulSet "+s.Name] = s.Spec.Template.Spec
	}
	if len(specs) != 2 {
		t.Fatalf("want the coordinator Deployment and the worker StatefulSet, got %d workloads", len(specs))
	}
	for name, spec := range specs {
		if sp := spec.Containers[0].StartupProbe; sp == nil || sp.HTTPGet == nil || sp.HTTPGet.Path != "/healthz" {
			t.Errorf("%s: stored without a startupProbe on /healthz: %+v", name, sp)
		}
	}
	pods, err := kc.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=test"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 2 {
		t.Errorf("want the two helm test hook Pods stored, got %d", len(pods.Items))
	}
	for _, p := range pods.Items {
		if p.Annotations["helm.sh/hook"] != "test" {
			t.Errorf("Pod %s: not a helm test hook", p.Name)
		}
		specs["Pod "+p.Name] = p.Spec
	}
	for name, spec := range specs {
		containers := append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...)
		for _, c := range containers {
			where := fmt.Sprintf("%s container %s", name, c.Name)
			if err := nonRoot(spec.SecurityContext, c.SecurityContext); err != nil {
				t.Errorf("%s: %v", where, err)
			}
			sc := c.SecurityContext
			if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
				t.Errorf("%s: root filesystem is not read-only", where)
			}
			if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				t.Errorf("%s: privilege escalation is not disabled", where)
			}
			if sc == nil || sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) != 0 {
				t.Errorf("%s: capabilities are not all dropped: %+v", where, sc)
			}
		}
	}
}

// nonRoot reports whether the effective runAsNonRoot is true and the
// effective runAsUser, if any, is not 0.
func nonRoot(pod *corev1.PodSecurityContext, c *corev1.SecurityContext) error {
	var nonRoot *bool
	var uid *int64
	if pod != nil {
		nonRoot, uid = pod.RunAsNonRoot, pod.RunAsUser
	}
	if c != nil && c.RunAsNonRoot != nil {
		nonRoot = c.RunAsNonRoot
	}
	if c != nil && c.RunAsUser != nil {
		uid = c.RunAsUser
	}
	if nonRoot == nil || !*nonRoot {
		return fmt.Errorf("runAsNonRoot is not true")
	}
	if uid != nil && *uid == 0 {
		return fmt.Errorf("runAsUser is 0")
	}
	return nil
}

// checkServiceMonitor reads back the ServiceMonitor the HA values apply
// (admin TLS on): Prometheus verifies the admin certificate against a CA
// (never insecureSkipVerify) and every target carries talon_cluster.
func checkServiceMonitor(ctx context.Context, t *testing.T, dyn dynamic.Interface, ns string) {
	t.Helper()
	sms, err := dyn.Resource(schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "servicemonitors"}).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(sms.Items) == 0 {
		t.Fatalf("ServiceMonitors stored: %v, %d", err, len(sms.Items))
	}
	for _, sm := range sms.Items {
		eps, _ := dig(sm.Object, "spec", "endpoints").([]any)
		if len(eps) == 0 {
			t.Fatalf("ServiceMonitor %s has no endpoints", sm.GetName())
		}
		for _, e := range eps {
			ep, _ := e.(map[string]any)
			if skip, _ := dig(ep, "tlsConfig", "insecureSkipVerify").(bool); skip {
				t.Errorf("ServiceMonitor %s skips TLS verification", sm.GetName())
			}
			if dig(ep, "tlsConfig", "ca", "secret", "name") == nil {
				t.Errorf("ServiceMonitor %s endpoint %v verifies no CA", sm.GetName(), ep["port"])
			}
			found := false
			rl, _ := ep["relabelings"].([]any)
			for _, r := range rl {
				if m, _ := r.(map[string]any); m["targetLabel"] == "talon_cluster" {
					found = true
				}
			}
			if !found {
				t.Errorf("ServiceMonitor %s endpoint %v sets no talon_cluster label", sm.GetName(), ep["port"])
			}
		}
	}
}

// checkRoleRules checks that the Role grants no more than leases (the
// records) and core Events (the shared log of node events: created,
// listed, the oldest deleted; never updated).
func checkRoleRules(t *testing.T, rules []rbacv1.PolicyRule) {
	t.Helper()
	allowed := map[string][]string{
		"coordination.k8s.io/leases": {"get", "list", "watch", "create", "update", "patch", "delete"},
		"/events":                    {"get", "list", "watch", "create", "delete"},
	}
	for _, r := range rules {
		if len(r.APIGroups) != 1 || len(r.Resources) != 1 || len(r.ResourceNames) != 0 || len(r.NonResourceURLs) != 0 {
			t.Errorf("Role rule %+v grants more than coordination.k8s.io leases and core events", r)
			continue
		}
		what := r.APIGroups[0] + "/" + r.Resources[0]
		verbs, ok := allowed[what]
		if !ok {
			t.Errorf("Role rule %+v grants more than coordination.k8s.io leases and core events", r)
		}
		for _, v := range r.Verbs {
			if ok && !slices.Contains(verbs, v) {
				t.Errorf("Role grants verb %q on %s", v, what)
			}
		}
	}
}
