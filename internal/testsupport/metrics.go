package testsupport

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"

	"github.com/talonhq/talon/internal/metrics"
)

// LintMetrics gathers g and fails tb unless it holds exactly want metric
// families, each named with prefix, passing promlint, and labelled only
// from the bounded set metrics.AllowedLabelOf accepts. It returns the
// families for further checks.
func LintMetrics(tb testing.TB, g prometheus.Gatherer, prefix string, want int) []*dto.MetricFamily {
	tb.Helper()
	mfs, err := g.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	if len(mfs) != want {
		tb.Fatalf("gathered %d metric families, want %d", len(mfs), want)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		tb.Fatal(err)
	}
	for _, p := range problems {
		tb.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), prefix) {
			tb.Errorf("metric %s lacks the %s prefix", mf.GetName(), prefix)
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if !metrics.AllowedLabelOf(mf.GetName(), l.GetName()) {
					tb.Errorf("metric %s has label %q outside the bounded set", mf.GetName(), l.GetName())
				}
			}
		}
	}
	return mfs
}
