package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/talonhq/talon/internal/app"
	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/datav1"
	"github.com/talonhq/talon/internal/testenv"
	"github.com/talonhq/talon/internal/testsupport"
)

const (
	alertsFile     = "prometheus/talon-alerts.yaml"
	alertTestsFile = "prometheus/talon-alerts.test.yaml"
	dashboardFile  = "grafana/talon.json"
	runbookURLBase = "https://github.com/talonhq/talon/blob/main/docs/runbooks/"
)

// promtool returns the promtool command (TALON_PROMTOOL, set by make test
// from .ci/ensure-tool.sh, or PATH). Under -short a missing promtool
// skips the test; otherwise it fails it.
func promtool(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("TALON_PROMTOOL"); p != "" {
		return p
	}
	p, err := exec.LookPath("promtool")
	if err != nil {
		if testing.Short() {
			t.Skip("promtool not found; make test installs it")
		}
		t.Fatal("promtool not found: run make test (it installs Debian's prometheus package with .ci/ensure-tool.sh) or set TALON_PROMTOOL")
	}
	return p
}

// runPromtool runs promtool with args in dir, stdin as its input, and fails
// t with its output when it exits non-zero.
func runPromtool(t *testing.T, dir string, stdin []byte, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, promtool(t), args...)
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestAlertRulesPromtool: the rules load (promtool check rules) and every
// unit test of talon-alerts.test.yaml passes: a dead worker pages, a
// single fail-closed coordinator fires while the others are fine, a
// flapping worker does not page, and so on.
func TestAlertRulesPromtool(t *testing.T) {
	out := runPromtool(t, "prometheus", nil, "check", "rules", filepath.Base(alertsFile))
	if !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool check rules: %s", out)
	}
	out = runPromtool(t, "prometheus", nil, "test", "rules", filepath.Base(alertTestsFile))
	if !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool test rules: %s", out)
	}
}

type alertRule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// alertRules reads every alerting rule of talon-alerts.yaml.
func alertRules(t *testing.T) []alertRule {
	t.Helper()
	b, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Name  string      `json:"name"`
			Rules []alertRule `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(b, &rules); err != nil {
		t.Fatal(err)
	}
	var out []alertRule
	for _, g := range rules.Groups {
		out = append(out, g.Rules...)
	}
	if len(out) == 0 {
		t.Fatal("no rules")
	}
	return out
}

// TestAlertRulesParse: every alert has a severity, a summary, a
// description and a runbook_url to its own page in docs/runbooks, which
// exists; and the rule tests make every alert fire at least once.
func TestAlertRulesParse(t *testing.T) {
	b, err := os.ReadFile(alertTestsFile)
	if err != nil {
		t.Fatal(err)
	}
	var tests struct {
		Tests []struct {
			InputSeries []struct {
				Series string `json:"series"`
			} `json:"input_series"`
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []struct {
					ExpLabels map[string]string `json:"exp_labels"`
				} `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(b, &tests); err != nil {
		t.Fatal(err)
	}
	// multi: the alert fires, labelled with its cluster, in a case whose
	// input holds series of at least two clusters.
	fires, silent, multi := map[string]bool{}, map[string]bool{}, map[string]bool{}
	clusterLabel := regexp.MustCompile(`talon_cluster="([^"]*)"`)
	for _, tc := range tests.Tests {
		clusters := map[string]bool{}
		for _, s := range tc.InputSeries {
			if m := clusterLabel.FindStringSubmatch(s.Series); m != nil {
				clusters[m[1]] = true
			}
		}
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				silent[a.Alertname] = true
			}
			for _, e := range a.ExpAlerts {
				if len(clusters) >= 2 && e.ExpLabels["talon_cluster"] != "" {
					multi[a.Alertname] = true
				}
			}
		}
	}
	seen := map[string]bool{}
	for _, r := range alertRules(t) {
		if r.Alert == "" || r.Expr == "" {
			t.Errorf("rule %+v: not an alert", r)
			continue
		}
		if seen[r.Alert] {
			t.Errorf("%s: defined twice", r.Alert)
		}
		seen[r.Alert] = true
		if s := r.Labels["severity"]; s != "page" && s != "ticket" {
			t.Errorf("%s: severity %q, want page or ticket", r.Alert, s)
		}
		for _, a := range []string{"summary", "description"} {
			if strings.TrimSpace(r.Annotations[a]) == "" {
				t.Errorf("%s: no %s annotation", r.Alert, a)
			}
		}
		if want := runbookURLBase + r.Alert + ".md"; r.Annotations["runbook_url"] != want {
			t.Errorf("%s: runbook_url %q, want %q", r.Alert, r.Annotations["runbook_url"], want)
		}
		page, err := os.ReadFile(filepath.Join("..", "docs", "runbooks", r.Alert+".md"))
		if err != nil {
			t.Errorf("%s: no runbook: %v", r.Alert, err)
		} else {
			for _, part := range []string{"# " + r.Alert, "talonctl"} {
				if !strings.Contains(string(page), part) {
					t.Errorf("docs/runbooks/%s.md does not contain %q", r.Alert, part)
				}
			}
		}
		if !fires[r.Alert] || !silent[r.Alert] {
			t.Errorf("%s: %s needs a case where it fires (%v) and one where it does not (%v)", r.Alert, alertTestsFile, fires[r.Alert], silent[r.Alert])
		}
		if !multi[r.Alert] {
			t.Errorf("%s: %s needs a case with several clusters (talon_cluster) where it fires for one, labelled with it", r.Alert, alertTestsFile)
		}
	}
	runbooks, _ := filepath.Glob(filepath.Join("..", "docs", "runbooks", "*.md"))
	for _, f := range runbooks {
		if name := strings.TrimSuffix(filepath.Base(f), ".md"); !seen[name] && name != "README" {
			t.Errorf("docs/runbooks/%s.md: no alert of that name", name)
		}
	}
}

// clusterLabels are the labels every aggregation and vector match of an
// alert rule keeps, so that rules stay per cluster when one Prometheus
// scrapes several (the target label talon_cluster, and namespace on
// Kubernetes).
var clusterLabels = []string{"talon_cluster", "namespace"}

var (
	aggregation = regexp.MustCompile(`\b(sum|min|max|avg|count|topk|bottomk|quantile|stddev|stdvar|group|count_values)\s*(\bby\s*\(([^)]*)\))?\s*\(`)
	matching    = regexp.MustCompile(`\b(on|by|ignoring|without)\s*\(([^)]*)\)`)
)

// TestAlertRulesAggregateByCluster: no rule aggregates or matches vectors
// across clusters. Every aggregation is "by (...)" with the cluster labels,
// and every on (...) names them, except the empty on () of the
// nothing-scraped-at-all fallback. (Bare min() and absent() made one
// cluster's outage invisible behind another's healthy coordinators.)
func TestAlertRulesAggregateByCluster(t *testing.T) {
	for _, r := range alertRules(t) {
		expr := regexp.MustCompile(`"[^"]*"`).ReplaceAllString(r.Expr, `""`)
		for _, m := range aggregation.FindAllStringSubmatch(expr, -1) {
			if m[2] == "" {
				t.Errorf("%s: %s(...) without by (...) aggregates every cluster into one: %q", r.Alert, m[1], m[0])
			}
		}
		for _, m := range matching.FindAllStringSubmatch(expr, -1) {
			if m[1] == "ignoring" || m[1] == "without" {
				t.Errorf("%s: %s (...) is not allowed: name the labels kept with on/by", r.Alert, m[1])
				continue
			}
			if m[1] == "on" && strings.TrimSpace(m[2]) == "" {
				continue
			}
			labels := strings.Split(strings.ReplaceAll(m[2], " ", ""), ",")
			for _, l := range clusterLabels {
				if !slices.Contains(labels, l) {
					t.Errorf("%s: %s (%s) drops the cluster label %s", r.Alert, m[1], m[2], l)
				}
			}
		}
	}
}

// metricName matches the metric names a PromQL expression of ours can
// use: every Talon series, the Go runtime and process collectors' and
// Prometheus's own up. Label names and values (talon_cluster) are removed
// before matching.
var metricName = regexp.MustCompile(`\b(?:talon|process|go)_[a-zA-Z0-9_]+\b|\bup\b`)

// referencedNames returns the metric names expr uses.
func referencedNames(expr string) []string {
	// Drop quoted label values and label-list syntax before matching.
	expr = regexp.MustCompile(`"[^"]*"`).ReplaceAllString(expr, `""`)
	expr = regexp.MustCompile(`\{[^}]*\}`).ReplaceAllString(expr, `{}`)
	expr = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`).ReplaceAllString(expr, "")
	return metricName.FindAllString(expr, -1)
}

// dashboardQueries returns every PromQL expression of the Grafana
// dashboard: each panel target's, each annotation's and each template
// variable's query.
func dashboardQueries(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title  string `json:"title"`
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
		Annotations struct {
			List []struct {
				Name string `json:"name"`
				Expr string `json:"expr"`
			} `json:"list"`
		} `json:"annotations"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if d.Title == "" || d.UID == "" {
		t.Fatalf("%s: no title or uid", dashboardFile)
	}
	out := map[string]string{}
	for _, p := range d.Panels {
		for i, tg := range p.Targets {
			if tg.Expr != "" {
				out[p.Title+" #"+string(rune('A'+i))] = tg.Expr
			}
		}
	}
	for _, a := range d.Annotations.List {
		if a.Expr != "" {
			out["annotation "+a.Name] = a.Expr
		}
	}
	for _, v := range d.Templating.List {
		q, ok := v.Query.(string)
		if !ok || !strings.Contains(q, "(") {
			continue
		}
		// label_values(SELECTOR, LABEL) is Grafana's, not PromQL: check
		// its selector.
		if inner, ok := strings.CutPrefix(q, "label_values("); ok {
			if i := strings.LastIndex(inner, ","); i > 0 {
				q = inner[:i]
			}
		}
		out["variable "+v.Name] = q
	}
	return out
}

// TestExportedMetrics starts a real coordinator (over etcd, as in
// production) and a real worker from their configuration, as the talon
// binary does, reads a block through them, scrapes both /metrics, and
// checks that promtool check metrics finds nothing to say and that every
// metric the alert rules and the Grafana dashboard use is exported.
func TestExportedMetrics(t *testing.T) {
	testenv.SkipIfShort(t)
	coordBody, workerBody := scrapeCluster(t)
	exported := map[string]bool{"up": true}
	for _, body := range [][]byte{coordBody, workerBody} {
		for _, line := range strings.Split(string(body), "\n") {
			if f := strings.Fields(line); len(f) >= 3 && f[0] == "#" && f[1] == "TYPE" {
				exported[f[2]] = true
				switch f[3] {
				case "histogram":
					exported[f[2]+"_bucket"], exported[f[2]+"_sum"], exported[f[2]+"_count"] = true, true, true
				case "summary":
					exported[f[2]+"_sum"], exported[f[2]+"_count"] = true, true
				}
			}
		}
	}
	for _, gone := range []string{"talon_uptime_seconds", "talon_request_errors_total"} {
		if exported[gone] {
			t.Errorf("%s is exported: it duplicates another series", gone)
		}
	}
	for _, want := range []string{"talon_placement_eligible_workers", "talon_clock_skew_seconds", "process_start_time_seconds", "talon_worker_cache_lookups_total"} {
		if !exported[want] {
			t.Errorf("%s is not exported", want)
		}
	}

	t.Run("promtool check metrics", func(t *testing.T) {
		for role, body := range map[string][]byte{"coordinator": coordBody, "worker": workerBody} {
			out := runPromtool(t, ".", body, "check", "metrics")
			if strings.TrimSpace(out) != "" {
				t.Errorf("%s: promtool check metrics:\n%s", role, out)
			}
		}
	})
	check := func(t *testing.T, where, expr string) {
		t.Helper()
		names := referencedNames(expr)
		if len(names) == 0 {
			t.Errorf("%s: %q uses no metric", where, expr)
		}
		for _, n := range names {
			if !exported[n] {
				t.Errorf("%s uses %s, which neither the coordinator nor the worker exports", where, n)
			}
		}
	}
	t.Run("alert rules", func(t *testing.T) {
		for _, r := range alertRules(t) {
			check(t, r.Alert, r.Expr)
		}
	})
	t.Run("dashboard", func(t *testing.T) {
		queries := dashboardQueries(t)
		if len(queries) < 10 {
			t.Fatalf("%s has %d queries", dashboardFile, len(queries))
		}
		// Every query of a Talon job is filtered by the cluster variable,
		// so one dashboard serves a Prometheus with several clusters.
		for k, q := range queries {
			for _, job := range []string{`job="$coordinator_job"`, `job="$worker_job"`} {
				if n := strings.Count(q, job); n != strings.Count(q, job+`,talon_cluster=~"$cluster"`) {
					t.Errorf("%s: %s: a %s selector without talon_cluster=~\"$cluster\"", dashboardFile, k, job)
				}
			}
		}
		keys := make([]string, 0, len(queries))
		for k := range queries {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		// Every query must also parse: promtool check rules reads them as
		// recording rules, with Grafana's variables filled in.
		vars := strings.NewReplacer("$__rate_interval", "5m", "$__range", "1h",
			"$coordinator_job", "talon-coordinator", "$worker_job", "talon-worker", "$cluster", ".*")
		var rules strings.Builder
		rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
		for i, k := range keys {
			check(t, dashboardFile+": "+k, queries[k])
			expr, err := json.Marshal(vars.Replace(queries[k])) // a JSON string is a YAML string
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&rules, "      - record: dashboard:query_%d\n        expr: %s\n", i, expr)
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "dashboard.rules.yaml"), []byte(rules.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		runPromtool(t, dir, nil, "check", "rules", "dashboard.rules.yaml")
	})
}

// TestReferencedNames: the name extraction the checks above rely on finds
// metric names and skips label names, values and functions.
func TestReferencedNames(t *testing.T) {
	got := referencedNames(`sum by (instance, talon_x) (rate(talon_requests_total{job="talon-worker",talon_cluster=~"$cluster",outcome="talon_y"}[5m])) / on (instance) up`)
	if want := []string{"talon_requests_total", "up"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// scrapeCluster runs a coordinator and a worker, makes each serve a
// request so the per-request series exist, and returns their /metrics.
func scrapeCluster(t *testing.T) (coordinator, worker []byte) {
	t.Helper()
	etcd := testenv.StartEtcd(t, testenv.EtcdOptions{})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	load := func(role cluster.Role, id string) *config.Config {
		l, err := config.Load(role, config.Options{Environ: []string{"TALON_INSECURE_CONTROL_PLANE=true"}})
		if err != nil {
			t.Fatal(err)
		}
		c := l.Config
		c.ClusterID, c.NodeID = "obs", id
		c.Listen, c.AdminListen = "127.0.0.1:0", "127.0.0.1:0"
		c.HeartbeatInterval, c.UnhealthyAfter, c.LeaseTTL = time.Second, 3*time.Second, 6*time.Second
		c.RequestTimeout, c.DrainDelay, c.ShutdownTimeout = time.Second, 0, 5*time.Second
		return c
	}
	run := func(name string, r func(context.Context) error) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r(ctx) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("%s: Run: %v", name, err)
			}
		})
	}

	cc := load(cluster.RoleCoordinator, "c1")
	cc.StateBackend, cc.Etcd.Endpoints = config.BackendEtcd, etcd.Endpoints()
	if err := cc.Validate(); err != nil {
		t.Fatal(err)
	}
	coord, err := app.NewCoordinator(context.Background(), cc, nil, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	run("coordinator", coord.Run)

	blobs := t.TempDir()
	if err := os.WriteFile(filepath.Join(blobs, "obj.bin"), bytes.Repeat([]byte("talon"), 1<<12), 0o644); err != nil {
		t.Fatal(err)
	}
	wc := load(cluster.RoleWorker, "w1")
	wc.Coordinators = []string{coord.Coordinator().Addr().String()}
	wc.BlobStore, wc.CacheDir, wc.CacheCapacity, wc.BlockSize = "file://"+blobs, t.TempDir(), 64<<20, 1<<20
	if err := wc.Validate(); err != nil {
		t.Fatal(err)
	}
	w, err := app.NewWorker(wc, log)
	if err != nil {
		t.Fatal(err)
	}
	run("worker", w.Run)
	testsupport.WaitFor(t, 20*time.Second, "worker serving", func() bool { return w.Worker().Serving() })

	pc, err := client.New(client.Options{Coordinators: []string{coord.Coordinator().Addr().String()}})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	testsupport.WaitFor(t, 20*time.Second, "the worker in the placement", func() bool {
		p, err := pc.Lookup(context.Background(), "obj.bin#0", 1)
		return err == nil && len(p.Owners) == 1
	})
	hc := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	defer hc.CloseIdleConnections() // goleak: no keep-alive goroutines left
	var buf bytes.Buffer
	if _, err := datav1.FetchTo(context.Background(), hc, datav1.Request{Addr: w.Worker().DataAddress(), Object: "obj.bin", Offset: 0, Length: 1 << 10, Replicas: 1}, &buf); err != nil {
		t.Fatal(err)
	}
	scrape := func(addr string) []byte {
		res, err := hc.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s/metrics: %d %v", addr, res.StatusCode, err)
		}
		return b
	}
	return scrape(coord.AdminAddr().String()), scrape(w.AdminAddr().String())
}

// TestDashboardInChart: the chart ships the repository's dashboard, byte
// for byte, as a ConfigMap labelled for Grafana's sidecar when
// grafanaDashboard.enabled is set, and not otherwise.
func TestDashboardInChart(t *testing.T) {
	repo := mustRead(t, dashboardFile)
	if !bytes.Equal(repo, mustRead(t, filepath.Join(chartDir, "files/talon-dashboard.json"))) {
		t.Fatal("helm/talon/files/talon-dashboard.json differs from grafana/talon.json: copy the dashboard into the chart")
	}
	testenv.SkipIfShort(t)
	dashboards := func(objs []object) []object {
		var out []object
		for _, cm := range find(objs, "ConfigMap", "") {
			if dig(cm, "data", "talon.json") != nil {
				out = append(out, cm)
			}
		}
		return out
	}
	if got := dashboards(render(t, namespace)); len(got) != 0 {
		t.Fatalf("the dashboard ConfigMap is rendered by default: %v", got)
	}
	got := dashboards(render(t, namespace, "--set", "grafanaDashboard.enabled=true"))
	if len(got) != 1 {
		t.Fatalf("want one dashboard ConfigMap, got %d", len(got))
	}
	if dig(got[0], "metadata", "labels", "grafana_dashboard") != "1" {
		t.Errorf("dashboard ConfigMap labels %v, want grafana_dashboard: \"1\"", dig(got[0], "metadata", "labels"))
	}
	if data := dig(got[0], "data", "talon.json"); data != strings.TrimRight(string(repo), "\n") {
		t.Errorf("the ConfigMap's talon.json differs from %s", dashboardFile)
	}
}
