package admin

import (
	"bytes"
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/metrics"
	"github.com/talonhq/talon/internal/worker/stats"
)

// structuralLabels are added by the exposition format itself.
var structuralLabels = map[string]bool{"le": true, "quantile": true}

// scrape fetches /metrics and parses it.
func scrape(t *testing.T, e *env) (map[string]*dto.MetricFamily, []byte) {
	t.Helper()
	r := e.get(t, apiv1.PathMetrics)
	if r.status != http.StatusOK {
		t.Fatalf("/metrics: %d %s", r.status, r.body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(r.body))
	if err != nil {
		t.Fatalf("parsing the exposition: %v", err)
	}
	return fams, r.body
}

// lintAndCheckLabels fails on any promlint problem and on any label
// outside metrics.AllowedLabelOf.
func lintAndCheckLabels(t *testing.T, fams map[string]*dto.MetricFamily, body []byte) {
	t.Helper()
	problems, err := promlint.New(bytes.NewReader(body)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	for _, bad := range forbiddenLabels(fams) {
		t.Errorf("label outside metrics.AllowedLabelOf: %s", bad)
	}
}

// forbiddenLabels lists metric{label} pairs whose label is not allowed.
func forbiddenLabels(fams map[string]*dto.MetricFamily) []string {
	var bad []string
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if !metrics.AllowedLabelOf(name, l.GetName()) && !structuralLabels[l.GetName()] {
					bad = append(bad, name+"{"+l.GetName()+"}")
				}
			}
		}
	}
	slices.Sort(bad)
	return slices.Compact(bad)
}

func labelValues(f *dto.MetricFamily, label string) []string {
	var out []string
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == label {
				out = append(out, l.GetValue())
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func TestMetricsCoordinator(t *testing.T) {
	e := startCoordinator(t, envOptions{admin: exposeAll()})
	putMixedWorkers(t, e)
	// Traffic of every kind, including values that must not become labels.
	for _, p := range []string{apiv1.PathCluster, apiv1.PathNodes + "?label=zone%3Da", apiv1.PathNodes + "/w1", apiv1.PathNodes + "/no-such-node",
		apiv1.PathPlacement + "?key=secret%2Fobject%2Fpath", apiv1.PathNodes + "?limit=0", "/random/path/123", apiv1.PathHealthz, apiv1.PathReadyz} {
		e.get(t, p)
	}
	e.do(t, http.MethodPost, apiv1.PathCluster, "")
	// One control-protocol request, so the process request series exist.
	pc, err := client.New(client.Options{Coordinators: []string{e.ctrl}})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	if _, err := pc.Lookup(context.Background(), "k", 1); err != nil {
		t.Fatal(err)
	}
	fams, body := scrape(t, e)
	lintAndCheckLabels(t, fams, body)

	for _, forbidden := range []string{"secret/object/path", "no-such-node", "random", "zone", "w1.data.test"} {
		if strings.Contains(string(body), forbidden) {
			t.Errorf("exposition mentions %q", forbidden)
		}
	}
	req := fams["talon_admin_requests_total"]
	if req == nil {
		t.Fatal("no talon_admin_requests_total")
	}
	ops := labelValues(req, "operation")
	for _, want := range []string{"cluster", "nodes", "node", "placement", "healthz", "readyz", "unmatched"} {
		if !slices.Contains(ops, want) {
			t.Errorf("operation %q missing from %v", want, ops)
		}
	}
	outcomes := labelValues(req, "outcome")
	for _, want := range []string{"ok", "not_found", "invalid_argument", "method_not_allowed"} {
		if !slices.Contains(outcomes, want) {
			t.Errorf("outcome %q missing from %v", want, outcomes)
		}
	}
	if fams["talon_admin_request_duration_seconds"].GetType() != dto.MetricType_HISTOGRAM {
		t.Error("talon_admin_request_duration_seconds is not a histogram")
	}
	// The ADR's minimum inventory for every process and for coordinators.
	for _, name := range []string{
		"talon_build_info", "process_start_time_seconds", "talon_requests_total", "talon_request_duration_seconds",
		"talon_active_connections", "talon_ready",
		"talon_coordinator_store_operation_duration_seconds", "talon_coordinator_snapshot_age_seconds",
		"talon_coordinator_nodes", "talon_coordinator_placement_duration_seconds", "talon_placement_eligible_workers",
	} {
		if fams[name] == nil {
			t.Errorf("no %s", name)
		}
	}
}

func TestMetricsWorker(t *testing.T) {
	st := stats.New()
	st.SetCapacity(1 << 30)
	st.Hit()
	e := startWorker(t, exposeAll(), st)
	if err := st.Register(e.reg); err != nil {
		t.Fatal(err)
	}
	e.get(t, apiv1.PathStatus)
	fams, body := scrape(t, e)
	lintAndCheckLabels(t, fams, body)
	for name := range fams {
		if strings.HasPrefix(name, "talon_worker_") && fams[name] != nil {
			for _, m := range fams[name].GetMetric() {
				for _, l := range m.GetLabel() {
					if strings.Contains(l.GetValue(), "w-real") {
						t.Errorf("%s carries the worker ID", name)
					}
				}
			}
		}
	}
	if fams["talon_admin_requests_total"] == nil || fams["talon_ready"] == nil {
		t.Fatal("worker exposition lacks admin or process metrics")
	}
}

// TestLabelCheckCatchesForbiddenLabels proves the label check can fail.
func TestLabelCheckCatchesForbiddenLabels(t *testing.T) {
	body := []byte("# HELP talon_x_total X.\n# TYPE talon_x_total counter\ntalon_x_total{node_id=\"w1\",operation=\"get\"} 1\n")
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if got := forbiddenLabels(fams); !slices.Equal(got, []string{"talon_x_total{node_id}"}) {
		t.Fatalf("forbiddenLabels = %v", got)
	}
}
