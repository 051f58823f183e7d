package admin

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// adminMetrics are the admin listener's request metrics. Labels: operation
// (a route name from the fixed route table) and outcome ("ok" or an API
// error code), both bounded.
type adminMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newAdminMetrics(reg prometheus.Registerer) (*adminMetrics, error) {
	m := &adminMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "talon_admin_requests_total",
			Help: "Requests to the administration listener, by route (operation) and outcome (ok or an API error code).",
		}, []string{"operation", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "talon_admin_request_duration_seconds",
			Help:    "Time to answer a request to the administration listener, by route (operation).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"operation"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *adminMetrics) observe(operation, outcome string, d time.Duration) {
	m.requests.WithLabelValues(operation, outcome).Inc()
	m.duration.WithLabelValues(operation).Observe(d.Seconds())
}
