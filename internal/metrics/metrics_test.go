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
	start := time.Unix(1000, 0)
	p, err := NewProcess(reg, "worker", start, func() time.Time { return start.Add(90 * time.Second) })
	if err != nil {
		t.Fatal(err)
	}
	p.Observe("get", "ok", time.Millisecond)
	p.Observe("get", "not_found", time.Millisecond)
	p.ConnOpened("data")
	p.SetReady(true)
	if v := testutil.ToFloat64(p.requests.WithLabelValues("get", "not_found")); v != 1 {
		t.Fatalf("requests{get,not_found} = %v", v)
	}
	if v := testutil.ToFloat64(p.errors.WithLabelValues("get", "ok")); v != 0 {
		t.Fatalf("an ok request counted as an error: %v", v)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP talon_ready 1 when the process reports ready, 0 otherwise.
# TYPE talon_ready gauge
talon_ready 1
# HELP talon_uptime_seconds Seconds since the process started.
# TYPE talon_uptime_seconds gauge
talon_uptime_seconds 90
`), "talon_ready", "talon_uptime_seconds"); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
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
				if !AllowedLabel(l.GetName()) {
					t.Errorf("%s has label %q outside the allowed set", mf.GetName(), l.GetName())
				}
			}
		}
	}
}
