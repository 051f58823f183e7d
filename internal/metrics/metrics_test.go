package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

func TestProcessMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	p, err := NewProcess(reg, "worker")
	if err != nil {
		t.Fatal(err)
	}
	p.Observe("get", "ok", time.Millisecond)
	p.Observe("get", "not_found", time.Millisecond)
	p.ConnOpened("data")
	p.ReadyFrom(func() bool { return true })
	if v := testutil.ToFloat64(p.requests.WithLabelValues("get", "not_found")); v != 1 {
		t.Fatalf("requests{get,not_found} = %v", v)
	}
	if v := testutil.ToFloat64(p.requests.WithLabelValues("get", "ok")); v != 1 {
		t.Fatalf("requests{get,ok} = %v", v)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP talon_ready 1 when the process reports ready, 0 otherwise.
# TYPE talon_ready gauge
talon_ready 1
`), "talon_ready"); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	// Uptime is time() - process_start_time_seconds and errors are
	// talon_requests_total{outcome!="ok"}: no second name for either.
	for _, gone := range []string{"talon_uptime_seconds", "talon_request_errors_total"} {
		if names[gone] {
			t.Errorf("%s is exported: it duplicates another series", gone)
		}
	}
	if !names["process_start_time_seconds"] {
		t.Error("process_start_time_seconds is not exported: uptime dashboards need it")
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, pr := range problems {
		if strings.HasPrefix(pr.Metric, "talon_") {
			t.Errorf("promlint: %s: %s", pr.Metric, pr.Text)
		}
	}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "talon_") {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if !AllowedLabelOf(mf.GetName(), l.GetName()) {
					t.Errorf("%s has label %q outside the allowed set", mf.GetName(), l.GetName())
				}
			}
		}
	}
}

// TestBuildInfoNamesTheNode: talon_build_info carries the cluster and node
// ID (the alert rules join node_id onto up), and it is the only series
// that does.
func TestBuildInfoNamesTheNode(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := NewNodeProcess(reg, Identity{Role: "worker", ClusterID: "prod-a", NodeID: "worker-7"}); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if mf.GetName() == "talon_build_info" {
				found = true
				if labels["node_id"] != "worker-7" || labels["cluster_id"] != "prod-a" || labels["role"] != "worker" {
					t.Errorf("talon_build_info labels %v, want node_id worker-7, cluster_id prod-a, role worker", labels)
				}
				continue
			}
			if _, ok := labels["node_id"]; ok {
				t.Errorf("%s has a node_id label: only talon_build_info may (one series per process)", mf.GetName())
			}
		}
	}
	if !found {
		t.Fatal("no talon_build_info")
	}
}

// TestAllowedLabelOf: the node and cluster ID are allowed on
// talon_build_info only.
func TestAllowedLabelOf(t *testing.T) {
	for _, c := range []struct {
		metric, label string
		want          bool
	}{
		{"talon_build_info", "node_id", true},
		{"talon_build_info", "cluster_id", true},
		{"talon_requests_total", "node_id", false},
		{"talon_requests_total", "operation", true},
		{"talon_build_info", "instance_id", false},
	} {
		if got := AllowedLabelOf(c.metric, c.label); got != c.want {
			t.Errorf("AllowedLabelOf(%s, %s) = %v, want %v", c.metric, c.label, got, c.want)
		}
	}
}
