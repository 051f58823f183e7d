package deploy

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"flag"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite deploy/kubernetes from the chart's default render")

const (
	chartDir  = "helm/talon"
	haValues  = "helm/talon/ci/ha-values.yaml"
	release   = "talon"
	namespace = "talon"
)

// object is one rendered Kubernetes object.
type object map[string]any

func (o object) kind() string { s, _ := o["kind"].(string); return s }
func (o object) name() string { s, _ := dig(o, "metadata", "name").(string); return s }
func (o object) component() string {
	s, _ := dig(o, "metadata", "labels", "app.kubernetes.io/component").(string)
	return s
}

// helm runs the helm binary built from its Go module and returns stdout.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(testenv.HelmBinary(t), args...)
	// A private HOME-less helm: no repositories, no plugins, no cache.
	tmp := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+tmp, "HELM_CONFIG_HOME="+tmp, "HELM_DATA_HOME="+tmp)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), &helmError{err: err, stderr: stderr.String()}
	}
	return stdout.String(), nil
}

type helmError struct {
	err    error
	stderr string
}

func (e *helmError) Error() string { return e.err.Error() + ": " + e.stderr }

// render runs helm template for namespace ns with extra helm arguments
// (-f FILE, --set K=V) and returns the objects in order.
func render(t *testing.T, ns string, args ...string) []object {
	t.Helper()
	out, err := helm(t, append([]string{"template", release, chartDir, "--namespace", ns}, args...)...)
	if err != nil {
		t.Fatalf("helm template %v: %v", args, err)
	}
	return parseDocs(t, out)
}

func parseDocs(t *testing.T, s string) []object {
	t.Helper()
	var objs []object
	for _, doc := range strings.Split(s, "\n---") {
		var o object
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("rendered document: %v\n%s", err, doc)
		}
		if o != nil {
			objs = append(objs, o)
		}
	}
	if len(objs) == 0 {
		t.Fatal("helm template rendered no object")
	}
	return objs
}

func find(objs []object, kind, component string) []object {
	var out []object
	for _, o := range objs {
		if o.kind() == kind && (component == "" || o.component() == component) {
			out = append(out, o)
		}
	}
	return out
}

func TestChartLint(t *testing.T) {
	testenv.SkipIfShort(t)
	for _, args := range [][]string{nil, {"--values", haValues}} {
		if out, err := helm(t, append([]string{"lint", "--strict", chartDir}, args...)...); err != nil {
			t.Fatalf("helm lint %v: %v\n%s", args, err, out)
		}
	}
}

// TestChartRejectsBadValues checks that values.schema.json and the
// templates' own checks refuse bad values with a message naming them, and
// that the same command with a good value passes (so the failure is the
// value's, not the command's).
func TestChartRejectsBadValues(t *testing.T) {
	testenv.SkipIfShort(t)
	cases := []struct {
		name, bad, good, want string
	}{
		{"latest tag", "image.tag=latest", "image.tag=1.2.3", `image.tag "latest" is refused`},
		{"zero workers", "worker.replicas=0", "worker.replicas=1", "/worker/replicas"},
		{"unknown setting", "config.no-such-setting=1", "config.log-level=debug", "no-such-setting"},
		{"chart-managed setting", "config.listen=:9000", "config.log-level=warn", "listen"},
		{"bad enum", "config.log-level=verbose", "config.log-level=error", "log-level"},
		{"duration without unit", "config.heartbeat-interval=5", "config.heartbeat-interval=5s", "heartbeat-interval"},
		{"issuer kind", "tls.issuer.issuerRef.kind=Vault", "tls.issuer.issuerRef.kind=ClusterIssuer", "/tls/issuer/issuerRef/kind"},
		{"anti-affinity", "coordinator.podAntiAffinity=always", "coordinator.podAntiAffinity=hard", "podAntiAffinity"},
		{"grace period below drain plus shutdown", "coordinator.terminationGracePeriodSeconds=25", "coordinator.terminationGracePeriodSeconds=26", "terminationGracePeriodSeconds"},
		{"own issuer without a name", "tls.issuer.create=false", "tls.issuer.create=false,tls.issuer.issuerRef.name=ca", "issuerRef.name"},
		{"inflight writes", "config.max-inflight-writes=0", "config.max-inflight-writes=64", "/config/max-inflight-writes"},
		// Issue 38: a cache larger than its volume rendered without complaint.
		{"cache larger than its PVC", "worker.persistence.size=50Gi", "worker.persistence.size=100Gi", "config.cache-capacity 90GiB does not fit the cache volume: worker.persistence.size is 50Gi"},
		{"cache larger than its emptyDir", "worker.persistence.enabled=false", "worker.persistence.enabled=false,config.cache-capacity=16GiB", "worker.persistence.emptyDirSizeLimit is 20Gi"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			base := []string{"template", release, chartDir, "--namespace", namespace}
			_, err := helm(t, append(base, "--set", c.bad)...)
			if err == nil {
				t.Fatalf("--set %s rendered; want it refused", c.bad)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("--set %s: error does not name %q: %v", c.bad, c.want, err)
			}
			if _, err := helm(t, append(base, "--set", c.good)...); err != nil {
				t.Fatalf("--set %s (the good value): %v", c.good, err)
			}
		})
	}
}

// TestChartDefaults checks the defaults an operator relies on without
// reading the templates.
func TestChartDefaults(t *testing.T) {
	testenv.SkipIfShort(t)
	objs := render(t, namespace)
	chart := readYAML(t, filepath.Join(chartDir, "Chart.yaml"))
	appVersion, _ := chart["appVersion"].(string)
	for _, w := range append(find(objs, "Deployment", ""), find(objs, "StatefulSet", "")...) {
		for _, c := range dig(w, "spec", "template", "spec", "containers").([]any) {
			image, _ := dig(c, "image").(string)
			if image != "ghcr.io/talonhq/talon:"+appVersion {
				t.Errorf("%s: image %q, want the chart's appVersion %q as tag", w.name(), image, appVersion)
			}
		}
	}
	for _, want := range []struct{ kind, component string }{
		{"PodDisruptionBudget", "coordinator"}, {"PodDisruptionBudget", "worker"},
		{"NetworkPolicy", "coordinator"}, {"NetworkPolicy", "worker"},
		{"Service", "coordinator"}, {"Service", "worker"},
	} {
		if len(find(objs, want.kind, want.component)) != 1 {
			t.Errorf("want one %s for the %s", want.kind, want.component)
		}
	}
	if svc := find(objs, "Service", "worker"); len(svc) == 1 && dig(svc[0], "spec", "clusterIP") != "None" {
		t.Errorf("worker Service is not headless: clusterIP %v", dig(svc[0], "spec", "clusterIP"))
	}
	if sts := find(objs, "StatefulSet", "worker"); len(sts) == 1 {
		if got, want := dig(sts[0], "spec", "serviceName"), find(objs, "Service", "worker")[0].name(); got != want {
			t.Errorf("StatefulSet serviceName %v, want the shipped headless Service %q", got, want)
		}
	}
	checkAttestation(t, objs)
	checkAdminTokenMounts(t, objs)
	checkProbes(t, objs, map[string]float64{"coordinator": 60, "worker": 1800})
	checkTestHooks(t, objs, "http")
	if d := find(objs, "Deployment", "coordinator"); len(d) == 1 {
		if got := dig(d[0], "spec", "strategy", "rollingUpdate", "maxUnavailable"); got != float64(0) {
			t.Errorf("coordinator maxUnavailable %v, want 0", got)
		}
	}
	// Default render holds no secret material, so deploy/kubernetes can be
	// committed.
	if s := find(objs, "Secret", ""); len(s) != 0 {
		t.Errorf("default render has %d Secrets, want none", len(s))
	}
	// Mutual TLS on by default, each pod's certificate from the csi-driver
	// through the CA Issuer the chart creates.
	for role, cfg := range roleConfigs(t, objs) {
		if cfg["tls-cert-file"] != "/etc/talon/tls/tls.crt" || cfg["insecure-control-plane"] != nil {
			t.Errorf("%s config: TLS is not on by default: %v", role, cfg)
		}
	}
	issuers := map[string]bool{}
	for _, o := range find(objs, "Issuer", "") {
		issuers[o.name()] = true
	}
	if !issuers["talon-ca"] || len(find(objs, "Certificate", "")) != 2 {
		t.Errorf("default render lacks the CA Issuer talon-ca or the CA and client Certificates: issuers %v", issuers)
	}
	for _, w := range append(find(objs, "Deployment", ""), find(objs, "StatefulSet", "")...) {
		var attrs any
		for _, v := range dig(w, "spec", "template", "spec", "volumes").([]any) {
			if dig(v, "name") == "tls" {
				attrs = dig(v, "csi", "volumeAttributes")
			}
		}
		if dig(attrs, "csi.cert-manager.io/issuer-name") != "talon-ca" || dig(attrs, "csi.cert-manager.io/common-name") != "${POD_NAME}" {
			t.Errorf("%s: tls volume %v does not ask talon-ca for a per-pod certificate", w.name(), attrs)
		}
	}
}

// checkAdminTokenMounts: coordinators mount the admin Secret's "tokens",
// workers its "worker-tokens" and nothing else of it: no worker pod holds
// the operator token (every worker pod held it, and the metrics token
// cordoned workers).
func checkAdminTokenMounts(t *testing.T, objs []object) {
	t.Helper()
	want := map[string]string{"coordinator": "tokens", "worker": "worker-tokens"}
	for _, w := range append(find(objs, "Deployment", ""), find(objs, "StatefulSet", "")...) {
		var keys []string
		for _, v := range dig(w, "spec", "template", "spec", "volumes").([]any) {
			if name, _ := dig(v, "secret", "secretName").(string); name != "talon-admin-tokens" {
				continue
			}
			items, _ := dig(v, "secret", "items").([]any)
			if len(items) == 0 {
				keys = append(keys, "(the whole Secret)")
			}
			for _, it := range items {
				k, _ := dig(it, "key").(string)
				keys = append(keys, k)
			}
		}
		if !slices.Equal(keys, []string{want[w.component()]}) {
			t.Errorf("%s mounts keys %v of the admin Secret, want only %q", w.name(), keys, want[w.component()])
		}
	}
}

// checkGeneratedTokens: the generated token files give the operator token
// every scope on coordinators only, and the metrics token scope metrics
// alone; both parse as admin token files.
func checkGeneratedTokens(t *testing.T, secret object) {
	t.Helper()
	decode := func(k string) string {
		s, _ := dig(secret, "data", k).(string)
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			t.Fatalf("admin Secret key %s: %v", k, err)
		}
		return string(b)
	}
	operator, metrics := decode("operator"), decode("metrics")
	for key, want := range map[string]map[string]config.AdminScope{
		"tokens":        {operator: config.ScopeRead | config.ScopeOperate | config.ScopeMetrics, metrics: config.ScopeMetrics},
		"worker-tokens": {metrics: config.ScopeMetrics},
	} {
		toks, err := config.ParseAdminTokens(decode(key), key)
		if err != nil {
			t.Fatalf("generated %s: %v", key, err)
		}
		got := map[string]config.AdminScope{}
		for _, tok := range toks {
			got[tok.Token.Reveal()] = tok.Scopes
		}
		if len(got) != len(want) {
			t.Errorf("generated %s holds %d tokens, want %d", key, len(got), len(want))
		}
		for tok, scopes := range want {
			if got[tok] != scopes {
				t.Errorf("generated %s: the %s token has scopes %s, want %s", key, map[bool]string{true: "operator", false: "metrics"}[tok == operator], got[tok], scopes)
			}
		}
	}
}

// TestChartHAValues checks what the HA values file turns on.
func TestChartHAValues(t *testing.T) {
	testenv.SkipIfShort(t)
	objs := render(t, namespace, "-f", haValues)
	sm := find(objs, "ServiceMonitor", "")
	if len(sm) != 1 {
		t.Fatalf("want one ServiceMonitor, got %d", len(sm))
	}
	ep := dig(sm[0], "spec", "endpoints").([]any)[0]
	if dig(ep, "authorization", "credentials", "key") != "metrics" || dig(ep, "scheme") != "https" {
		t.Errorf("ServiceMonitor endpoint does not present the metrics token over https: %v", ep)
	}
	// Admin TLS is verified against the admin Secret's CA, never skipped,
	// and every target is labelled with its cluster for the alert rules.
	if dig(ep, "tlsConfig", "insecureSkipVerify") != nil || dig(ep, "tlsConfig", "ca", "secret", "name") != "talon-admin-tls" || dig(ep, "tlsConfig", "ca", "secret", "key") != "ca.crt" {
		t.Errorf("ServiceMonitor tlsConfig %v, want the CA of Secret talon-admin-tls key ca.crt and no insecureSkipVerify", dig(ep, "tlsConfig"))
	}
	if rl, _ := dig(ep, "relabelings").([]any); len(rl) != 1 || dig(rl[0], "targetLabel") != "talon_cluster" || dig(rl[0], "replacement") != "prod-eu1" {
		t.Errorf("ServiceMonitor relabelings %v, want talon_cluster set to the cluster-id prod-eu1", dig(ep, "relabelings"))
	}
	own := find(render(t, namespace, "-f", haValues, "--set", "serviceMonitor.caSecret.name=my-ca,serviceMonitor.caSecret.key=bundle.pem,serviceMonitor.serverName=admin.talon.example"), "ServiceMonitor", "")
	if ep := dig(own[0], "spec", "endpoints").([]any)[0]; dig(ep, "tlsConfig", "ca", "secret", "name") != "my-ca" || dig(ep, "tlsConfig", "ca", "secret", "key") != "bundle.pem" || dig(ep, "tlsConfig", "serverName") != "admin.talon.example" {
		t.Errorf("serviceMonitor.caSecret and serverName not rendered: %v", dig(ep, "tlsConfig"))
	}
	checkTestHooks(t, objs, "https")
	rules := find(objs, "PrometheusRule", "")
	if len(rules) != 1 {
		t.Fatalf("want one PrometheusRule, got %d", len(rules))
	}
	var repo struct {
		Groups []any `json:"groups"`
	}
	if err := yaml.Unmarshal(mustRead(t, "prometheus/talon-alerts.yaml"), &repo); err != nil {
		t.Fatal(err)
	}
	if got := dig(rules[0], "spec", "groups").([]any); len(got) != len(repo.Groups) || len(got) == 0 {
		t.Errorf("PrometheusRule has %d groups, the repository's rules %d", len(got), len(repo.Groups))
	}
	secrets := find(objs, "Secret", "")
	if len(secrets) != 1 {
		t.Fatalf("want the generated admin token Secret, got %d Secrets", len(secrets))
	}
	for _, k := range []string{"tokens", "worker-tokens", "operator", "metrics"} {
		if dig(secrets[0], "data", k) == nil {
			t.Errorf("generated admin Secret lacks key %q", k)
		}
	}
	checkGeneratedTokens(t, secrets[0])
	checkAdminTokenMounts(t, objs)
	for _, w := range append(find(objs, "Deployment", ""), find(objs, "StatefulSet", "")...) {
		spec := dig(w, "spec", "template", "spec")
		if dig(spec, "affinity", "podAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution") == nil {
			t.Errorf("%s: hard anti-affinity not rendered", w.name())
		}
		zones := 0
		for _, c := range dig(spec, "topologySpreadConstraints").([]any) {
			if dig(c, "topologyKey") == "topology.kubernetes.io/zone" && dig(c, "whenUnsatisfiable") == "DoNotSchedule" {
				zones++
			}
		}
		if zones != 1 {
			t.Errorf("%s: no DoNotSchedule zone spread", w.name())
		}
		var csi any
		for _, v := range dig(spec, "volumes").([]any) {
			if dig(v, "name") == "tls" {
				csi = dig(v, "csi", "volumeAttributes")
			}
		}
		if dig(csi, "csi.cert-manager.io/common-name") != "${POD_NAME}" || dig(csi, "csi.cert-manager.io/organizationalunits") != w.component() {
			t.Errorf("%s: per-pod certificate attributes %v, want CN ${POD_NAME} and OU %s", w.name(), csi, w.component())
		}
	}
}

// checkProbes: both workloads have a startupProbe on /healthz that allows
// at least the role's startupSeconds before liveness applies, and
// readiness that one slow answer does not fail.
func checkProbes(t *testing.T, objs []object, startup map[string]float64) {
	t.Helper()
	for _, w := range append(find(objs, "Deployment", ""), find(objs, "StatefulSet", "")...) {
		c := dig(w, "spec", "template", "spec", "containers").([]any)[0]
		sp := dig(c, "startupProbe")
		period, _ := dig(sp, "periodSeconds").(float64)
		failures, _ := dig(sp, "failureThreshold").(float64)
		if dig(sp, "httpGet", "path") != "/healthz" || period*failures < startup[w.component()] {
			t.Errorf("%s: startupProbe %v allows %gs, want /healthz for at least %gs", w.name(), sp, period*failures, startup[w.component()])
		}
		if f, _ := dig(c, "readinessProbe", "failureThreshold").(float64); f < 2 {
			t.Errorf("%s: readinessProbe failureThreshold %v: one slow answer takes the pod out of its Service", w.name(), f)
		}
	}
}

// checkTestHooks: the chart's helm test hooks probe /readyz of the
// coordinator Service and of every worker, and run talonctl cluster status
// through the Service, with the release's scheme.
func checkTestHooks(t *testing.T, objs []object, scheme string) {
	t.Helper()
	args := map[string][]string{}
	for _, p := range find(objs, "Pod", "test") {
		if dig(p, "metadata", "annotations", "helm.sh/hook") != "test" {
			t.Errorf("Pod %s is not a helm test hook", p.name())
		}
		c := dig(p, "spec", "containers").([]any)[0]
		var a []string
		for _, v := range dig(c, "args").([]any) {
			a = append(a, v.(string))
		}
		args[a[0]] = a
	}
	workers := int(dig(find(objs, "StatefulSet", "worker")[0], "spec", "replicas").(float64))
	readyz := 0
	for _, a := range args["probe"] {
		if strings.HasPrefix(a, scheme+"://") && strings.HasSuffix(a, "/readyz") {
			readyz++
		}
	}
	if readyz != 1+workers {
		t.Errorf("helm test probe %v: want the coordinator Service and %d workers' /readyz over %s", args["probe"], workers, scheme)
	}
	if c := strings.Join(args["ctl"], " "); !strings.Contains(c, "--server="+scheme+"://talon-coordinator.") || !strings.HasSuffix(c, "cluster status") {
		t.Errorf("helm test ctl %q: want talonctl cluster status through the coordinator Service", c)
	}
}

func TestAlertRulesInChartMatchRepository(t *testing.T) {
	if !bytes.Equal(mustRead(t, "prometheus/talon-alerts.yaml"), mustRead(t, filepath.Join(chartDir, "files/talon-alerts.yaml"))) {
		t.Fatal("helm/talon/files/talon-alerts.yaml differs from prometheus/talon-alerts.yaml: copy the rules into the chart")
	}
}

// chartManaged are the settings the chart derives (from ports, replicas,
// the pod, the namespace and its Secrets) and refuses in values' config.
var chartManaged = []string{
	"node-id", "listen", "advertise", "admin-listen", "admin-advertise", "coordinators",
	"ha", "coordinator-replicas", "kubeconfig", "kube-namespace", "cache-dir",
	"admin-token-file", "admin-tls-cert-file", "admin-tls-key-file",
	"tls-ca-file", "tls-cert-file", "tls-key-file", "insecure-control-plane",
	"worker-attestation", "worker-attestation-service-accounts", "worker-attestation-audience", "attestation-token-file", // attestation.*
	"dev-dir", // talon dev only: the chart's pods get certificates from cert-manager
}

// secretSettings come only from the environment; the chart reads secrets
// from files (admin-token-file, etcd-password-file) instead.
var secretSettings = []string{"admin-token", "etcd-password"}

// settingNames returns every non-secret setting name of talon.
func settingNames() map[string]bool {
	fs := pflag.NewFlagSet("talon", pflag.ContinueOnError)
	config.RegisterAllFlags(fs)
	names := map[string]bool{}
	fs.VisitAll(func(f *pflag.Flag) {
		switch f.Name {
		case "config":
		case "label":
			names["labels"] = true
		default:
			names[f.Name] = true
		}
	})
	return names
}

// TestChartCoversEverySetting fails when talon gains a setting that the
// chart neither exposes in values' config (the schema) nor derives itself.
func TestChartCoversEverySetting(t *testing.T) {
	var schema struct {
		Defs struct {
			Config struct {
				Properties map[string]any `json:"properties"`
			} `json:"config"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(mustRead(t, filepath.Join(chartDir, "values.schema.json")), &schema); err != nil {
		t.Fatal(err)
	}
	exposed := schema.Defs.Config.Properties
	talon := settingNames()
	for name := range talon {
		_, inSchema := exposed[name]
		managed := slices.Contains(chartManaged, name)
		switch {
		case inSchema && managed:
			t.Errorf("setting %s is both in the schema and derived by the chart", name)
		case !inSchema && !managed:
			t.Errorf("talon setting %s is neither in values.schema.json's config nor derived by the chart", name)
		}
	}
	for name := range exposed {
		if !talon[name] {
			t.Errorf("values.schema.json exposes %s, which is not a talon setting", name)
		}
	}
	for _, name := range chartManaged {
		if !talon[name] {
			t.Errorf("chart derives %s, which is not a talon setting", name)
		}
	}
	for _, name := range secretSettings {
		if talon[name] || exposed[name] != nil {
			t.Errorf("secret setting %s must come from a file, not values or flags", name)
		}
	}
}

// roleConfigs returns the parsed config files of the rendered ConfigMap.
func roleConfigs(t *testing.T, objs []object) map[cluster.Role]map[string]any {
	t.Helper()
	cms := find(objs, "ConfigMap", "")
	if len(cms) != 1 {
		t.Fatalf("want one ConfigMap, got %d", len(cms))
	}
	out := map[cluster.Role]map[string]any{}
	for _, role := range []cluster.Role{cluster.RoleCoordinator, cluster.RoleWorker} {
		s, _ := dig(cms[0], "data", string(role)+".yaml").(string)
		var m map[string]any
		if err := yaml.Unmarshal([]byte(s), &m); err != nil || m == nil {
			t.Fatalf("ConfigMap %s.yaml: %v\n%s", role, err, s)
		}
		out[role] = m
	}
	return out
}

// loadRoleConfigs loads each role's rendered config file as the daemon
// would: files under /etc/talon/ are moved into a temporary directory
// holding a token file and a certificate whose identity is the pod's, and
// the pod's environment is given. It returns the loaded configurations.
func loadRoleConfigs(t *testing.T, objs []object) map[cluster.Role]*config.Config {
	t.Helper()
	out := map[cluster.Role]*config.Config{}
	for role, cfg := range roleConfigs(t, objs) {
		tmp := t.TempDir()
		writeIdentity(t, tmp, "pod-0", string(role))
		b, err := yaml.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(tmp, string(role)+".yaml")
		if err := os.WriteFile(p, bytes.ReplaceAll(b, []byte("/etc/talon/"), []byte(tmp+"/")), 0o600); err != nil {
			t.Fatal(err)
		}
		env := []string{"TALON_NODE_ID=pod-0", "TALON_ADVERTISE=10.1.2.3:7400", "TALON_ADMIN_ADVERTISE=10.1.2.3:7401"}
		l, err := config.Load(role, config.Options{ConfigFile: p, Environ: env})
		if err != nil {
			t.Fatalf("%s config rendered by the chart does not load: %v\n%s", role, err, b)
		}
		out[role] = l.Config
	}
	return out
}

// writeIdentity writes what the chart mounts under /etc/talon into dir: the
// admin token file and admin TLS pair, and a CA with a certificate of
// Subject CN=nodeID, OU=role, as cert-manager or an operator would issue.
func writeIdentity(t *testing.T, dir, nodeID, role string) {
	t.Helper()
	for _, d := range []string{"admin", "admin-tls", "tls"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "admin", "tokens"), []byte("operator-token\nmetrics-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "talon-ca"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: nodeID, OrganizationalUnit: []string{role}}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caTmpl, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		"tls/ca.crt":        pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		"tls/tls.crt":       pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		"tls/tls.key":       pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		"admin-tls/tls.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		"admin-tls/tls.key": pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestChartConfigLoads loads the rendered config of both roles, for the
// default and the HA values, with talon's own loader and validation, and
// checks the grace periods against the loaded drain-delay and
// shutdown-timeout.
func TestChartConfigLoads(t *testing.T) {
	testenv.SkipIfShort(t)
	for _, args := range [][]string{nil, {"-f", haValues}} {
		objs := render(t, namespace, args...)
		cfgs := loadRoleConfigs(t, objs)
		if c := cfgs[cluster.RoleCoordinator]; c.Kube.Namespace != namespace || c.CoordinatorReplicas != int(dig(find(objs, "Deployment", "coordinator")[0], "spec", "replicas").(float64)) {
			t.Errorf("%v: coordinator kube-namespace %q, coordinator-replicas %d do not match the release", args, c.Kube.Namespace, c.CoordinatorReplicas)
		}
		if w := cfgs[cluster.RoleWorker]; len(w.Coordinators) != 1 || !strings.HasPrefix(w.Coordinators[0], find(objs, "Service", "coordinator")[0].name()+".") {
			t.Errorf("%v: worker coordinators %v do not name the coordinator Service", args, w.Coordinators)
		}
		checkGrace(t, objs, cfgs)
	}
}

func checkGrace(t *testing.T, objs []object, cfgs map[cluster.Role]*config.Config) {
	t.Helper()
	checked := 0
	for _, w := range append(find(objs, "Deployment", ""), find(objs, "StatefulSet", "")...) {
		c := cfgs[cluster.Role(w.component())]
		if c == nil {
			t.Fatalf("%s: no config for component %q", w.name(), w.component())
		}
		grace, _ := dig(w, "spec", "template", "spec", "terminationGracePeriodSeconds").(float64)
		if need := c.DrainDelay + c.ShutdownTimeout; time.Duration(grace)*time.Second <= need {
			t.Errorf("%s: terminationGracePeriodSeconds %v must exceed drain-delay %s + shutdown-timeout %s", w.name(), grace, c.DrainDelay, c.ShutdownTimeout)
		}
		checked++
	}
	if checked != 2 {
		t.Errorf("checked %d workloads, want the coordinator Deployment and the worker StatefulSet", checked)
	}
}

// plainFile says which file of deploy/kubernetes an object of the default
// render goes to. rbac.yaml holds exactly the coordinator's ServiceAccount,
// Role and RoleBinding (internal/state/kube's contract suite applies them)
// and the ClusterRole and ClusterRoleBinding of tokenreviews create (worker
// attestation; the attestation integration test applies them).
func plainFile(o object) string {
	switch {
	case o.component() == "coordinator" && (o.kind() == "ServiceAccount" || o.kind() == "Role" || o.kind() == "RoleBinding" || o.kind() == "ClusterRole" || o.kind() == "ClusterRoleBinding"):
		return "rbac.yaml"
	case o.component() == "coordinator":
		return "coordinator.yaml"
	case o.component() == "worker":
		return "worker.yaml"
	case o.component() == "tls":
		return "tls.yaml"
	}
	return "talon.yaml"
}

var plainHeaders = map[string]string{
	"rbac.yaml":        "ServiceAccount, Role (coordination.k8s.io leases, core events) and RoleBinding of the coordinators, and their ClusterRole of tokenreviews create (worker attestation).",
	"coordinator.yaml": "Coordinators: Service, Deployment, PodDisruptionBudget, NetworkPolicy.",
	"worker.yaml":      "Workers: ServiceAccount, headless Service, StatefulSet, PodDisruptionBudget, NetworkPolicy.",
	"talon.yaml":       "The config files of both roles (ConfigMap).",
	"tls.yaml":         "The CA Issuer of the mutual TLS and a client certificate: needs cert-manager and its csi-driver.",
}

// plainManifests renders the chart with default values into the files of
// deploy/kubernetes.
func plainManifests(t *testing.T) map[string][]byte {
	t.Helper()
	// The helm test hooks are not part of an install: kubectl apply -f
	// deploy/kubernetes/ would run them once, at the wrong time.
	out, err := helm(t, "template", release, chartDir, "--namespace", namespace, "--skip-tests")
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string][]string{}
	for _, doc := range strings.Split(out, "\n---") {
		var o object
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatal(err)
		}
		if o == nil {
			continue
		}
		var lines []string
		for _, l := range strings.Split(strings.Trim(doc, "\n"), "\n") {
			if !strings.HasPrefix(l, "# Source: ") {
				lines = append(lines, l)
			}
		}
		f := plainFile(o)
		docs[f] = append(docs[f], strings.Join(lines, "\n")+"\n")
	}
	files := map[string][]byte{}
	for f, ds := range docs {
		header := "# GENERATED from deploy/helm/talon with default values (release \"talon\",\n" +
			"# namespace \"talon\") by `make manifests`; do not edit: change the chart, and\n" +
			"# a test in deploy/ fails until this file is regenerated.\n#\n" +
			"# " + plainHeaders[f] + "\n#\n" +
			"#   kubectl create namespace talon\n" +
			"#   kubectl apply -f deploy/kubernetes/tls.yaml   # cert-manager and csi-driver first\n" +
			"#   kubectl apply -f deploy/kubernetes/\n\n"
		files[f] = []byte(header + strings.Join(ds, "---\n"))
	}
	return files
}

// TestPlainManifestsUpToDate fails when deploy/kubernetes differs from the
// chart's default render; `go test ./deploy -run PlainManifests -update`
// (or `make manifests`) rewrites it.
func TestPlainManifestsUpToDate(t *testing.T) {
	testenv.SkipIfShort(t)
	want := plainManifests(t)
	if *update {
		old, _ := filepath.Glob("kubernetes/*.yaml")
		for _, f := range old {
			if err := os.Remove(f); err != nil {
				t.Fatal(err)
			}
		}
		for f, b := range want {
			if err := os.WriteFile(filepath.Join("kubernetes", f), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	have, _ := filepath.Glob("kubernetes/*.yaml")
	var names []string
	for f := range want {
		names = append(names, filepath.Join("kubernetes", f))
	}
	sort.Strings(names)
	if !slices.Equal(have, names) {
		t.Fatalf("deploy/kubernetes holds %v, the chart renders %v: run make manifests", have, names)
	}
	for f, b := range want {
		if got := mustRead(t, filepath.Join("kubernetes", f)); !bytes.Equal(got, b) {
			t.Errorf("deploy/kubernetes/%s is not the chart's default render: run make manifests", f)
		}
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readYAML(t *testing.T, p string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal(mustRead(t, p), &m); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return m
}

// TestChartNotes checks that NOTES.txt tells the operator how to reach the
// release with talonctl, with the release's own names and scheme.
func TestChartNotes(t *testing.T) {
	testenv.SkipIfShort(t)
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none")) // a client-side dry run needs no cluster
	for _, c := range []struct {
		args []string
		want []string
	}{
		{nil, []string{"port-forward svc/talon-coordinator 7401:7401", "talonctl --server http://127.0.0.1:7401 nodes list", "secret talon-admin-tokens", "config.blob-store is the example URL", "helm test talon -n talon"}},
		{[]string{"-f", haValues}, []string{"talonctl --server https://127.0.0.1:7401", "5 coordinators", "6 workers"}},
	} {
		out, err := helm(t, append([]string{"install", release, chartDir, "--namespace", namespace, "--dry-run=client"}, c.args...)...)
		if err != nil {
			t.Fatalf("helm install --dry-run=client %v: %v", c.args, err)
		}
		_, notes, ok := strings.Cut(out, "\nNOTES:\n")
		if !ok {
			t.Fatalf("%v: no NOTES in\n%s", c.args, out)
		}
		for _, w := range c.want {
			if !strings.Contains(notes, w) {
				t.Errorf("%v: NOTES lack %q:\n%s", c.args, w, notes)
			}
		}
	}
}

// kubectlSelector finds the label selector of a kubectl command in a
// runbook: -l SEL, -l=SEL, --selector SEL or --selector=SEL.
var kubectlSelector = regexp.MustCompile("kubectl[^`\\n]*?(?:-l|--selector)[ =]([^ `\\n]+)")

// TestRunbookSelectorsMatchChart: every kubectl label selector in
// docs/runbooks selects the pods of a workload the chart renders (RELEASE
// standing for the release name), so a runbook never lists nothing on
// Kubernetes (they once said app=talon-worker; the chart labels pods
// app.kubernetes.io/component=worker).
func TestRunbookSelectorsMatchChart(t *testing.T) {
	testenv.SkipIfShort(t)
	var pods []map[string]any
	objs := render(t, namespace)
	for _, w := range append(find(objs, "Deployment", ""), find(objs, "StatefulSet", "")...) {
		pods = append(pods, dig(w, "spec", "template", "metadata", "labels").(map[string]any))
	}
	files, _ := filepath.Glob(filepath.Join("..", "docs", "runbooks", "*.md"))
	checked := 0
	for _, f := range files {
		for _, m := range kubectlSelector.FindAllStringSubmatch(string(mustRead(t, f)), -1) {
			sel := strings.ReplaceAll(m[1], "RELEASE", release)
			checked++
			if !slices.ContainsFunc(pods, func(labels map[string]any) bool { return selects(sel, labels) }) {
				t.Errorf("%s: selector %q matches no pod the chart renders (pod labels: %v)", filepath.Base(f), m[1], pods)
			}
		}
	}
	if checked < 3 {
		t.Fatalf("found %d kubectl selectors in docs/runbooks; the pattern no longer finds them", checked)
	}
}

// selects reports whether the equality-based selector sel (k=v, k==v,
// k!=v, k, !k, comma-separated) matches labels.
func selects(sel string, labels map[string]any) bool {
	for _, req := range strings.Split(sel, ",") {
		switch {
		case strings.Contains(req, "!="):
			k, v, _ := strings.Cut(req, "!=")
			if labels[k] == v {
				return false
			}
		case strings.Contains(req, "="):
			k, v, _ := strings.Cut(strings.Replace(req, "==", "=", 1), "=")
			if labels[k] != v {
				return false
			}
		case strings.HasPrefix(req, "!"):
			if _, ok := labels[req[1:]]; ok {
				return false
			}
		default:
			if _, ok := labels[req]; !ok {
				return false
			}
		}
	}
	return true
}

// TestSelects: the selector matching the runbook check relies on.
func TestSelects(t *testing.T) {
	labels := map[string]any{"app.kubernetes.io/component": "worker", "app.kubernetes.io/instance": "talon"}
	for sel, want := range map[string]bool{
		"app.kubernetes.io/component=worker":                                  true,
		"app.kubernetes.io/component=worker,app.kubernetes.io/instance=talon": true,
		"app=talon-worker":                    false,
		"app.kubernetes.io/component!=worker": false,
		"app.kubernetes.io/instance":          true,
		"!app.kubernetes.io/instance":         false,
	} {
		if got := selects(sel, labels); got != want {
			t.Errorf("selects(%q) = %v, want %v", sel, got, want)
		}
	}
}

// checkAttestation: by default workers attest with a pod-bound projected
// token of audience talon, which the coordinators require and verify.
func checkAttestation(t *testing.T, objs []object) {
	t.Helper()
	sts := find(objs, "StatefulSet", "worker")
	if len(sts) != 1 {
		t.Fatalf("want one worker StatefulSet")
	}
	var found bool
	for _, v := range dig(sts[0], "spec", "template", "spec", "volumes").([]any) {
		if dig(v, "name") != "attestation" {
			continue
		}
		src := dig(v, "projected", "sources").([]any)
		tok := dig(src[0], "serviceAccountToken")
		found = tok != nil && dig(tok, "audience") == "talon" && dig(tok, "path") == "token"
	}
	if !found {
		t.Errorf("worker pods have no projected serviceAccountToken volume of audience talon")
	}
	cm := find(objs, "ConfigMap", "")
	if len(cm) != 1 {
		t.Fatalf("want one ConfigMap, got %d", len(cm))
	}
	coord, _ := dig(cm[0], "data", "coordinator.yaml").(string)
	worker, _ := dig(cm[0], "data", "worker.yaml").(string)
	for _, want := range []string{"worker-attestation: kubernetes", "worker-attestation-audience: talon", "- " + namespace + "/talon-worker"} {
		if !strings.Contains(coord, want) {
			t.Errorf("coordinator.yaml lacks %q:\n%s", want, coord)
		}
	}
	if !strings.Contains(worker, "attestation-token-file: /var/run/secrets/talon/attestation/token") {
		t.Errorf("worker.yaml does not point attestation-token-file at the projected token:\n%s", worker)
	}
}

// TestChartSecurityContextOverrides: the security contexts merge values
// over the safe defaults (issue 38: they could not be overridden); a key
// set to null goes, the others stay.
func TestChartSecurityContextOverrides(t *testing.T) {
	testenv.SkipIfShort(t)
	objs := render(t, namespace, "--set", "securityContext.readOnlyRootFilesystem=false", "--set", "podSecurityContext.runAsUser=null",
		"--set", "podSecurityContext.runAsGroup=null", "--set", "podSecurityContext.fsGroup=null", "--set", "podSecurityContext.supplementalGroups[0]=1000")
	for _, kind := range []string{"Deployment", "StatefulSet"} {
		for _, o := range objs {
			if o["kind"] != kind {
				continue
			}
			spec := dig(o, "spec", "template", "spec").(map[string]any)
			pod := spec["securityContext"].(map[string]any)
			if _, ok := pod["runAsUser"]; ok || pod["runAsNonRoot"] != true || pod["supplementalGroups"] == nil || dig(pod, "seccompProfile", "type") != "RuntimeDefault" {
				t.Errorf("%s pod securityContext %v: want runAsUser removed, supplementalGroups added, the other defaults kept", kind, pod)
			}
			for _, c := range spec["containers"].([]any) {
				sc := c.(map[string]any)["securityContext"].(map[string]any)
				if sc["readOnlyRootFilesystem"] != false || sc["allowPrivilegeEscalation"] != false || dig(sc, "capabilities", "drop") == nil {
					t.Errorf("%s container securityContext %v: want readOnlyRootFilesystem false and the other defaults kept", kind, sc)
				}
			}
		}
	}
}
