package admin

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/talonhq/talon/internal/netlimit"
)

// adminMetrics are the admin listener's request metrics. Labels: operation
// (a route name from the fixed route table) and outcome ("ok" or an API
// error code), both bounded.
type adminMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// refused counts connections closed at accept by a netlimit reason.
	refused *prometheus.CounterVec
	// watches is the event watches open (MaxWatches at most).
	watches prometheus.Gauge
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
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "talon_admin_connections_refused_total",
			Help: "Admin connections closed at accept, by limit: connections (MaxConnections), connections_per_address (half of it from one address), pending (a quarter of it without a first request yet), pending_per_address (32 such from one address).",
		}, []string{"limit"}),
		watches: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "talon_admin_event_watches",
			Help: "Event watches (long polls of /api/v1/events?watch=true) open on the administration listener; at most 64, 8 per client address and 16 per token.",
		}),
	}
	var err error
	if m.requests, err = register(reg, m.requests); err != nil {
		return nil, err
	}
	if m.duration, err = register(reg, m.duration); err != nil {
		return nil, err
	}
	if m.refused, err = register(reg, m.refused); err != nil {
		return nil, err
	}
	if m.watches, err = register(reg, m.watches); err != nil {
		return nil, err
	}
	for _, r := range []string{netlimit.ReasonMax, netlimit.ReasonMaxPerAddress, netlimit.ReasonMaxPending, netlimit.ReasonMaxPendingPerAddress} {
		m.refused.WithLabelValues(r)
	}
	return m, nil
}

// register registers c, or returns the identical collector already
// registered (a second Server on the same registry, as after a restart of
// the listener within one process, shares the series).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, err
}

func (m *adminMetrics) observe(operation, outcome string, d time.Duration) {
	m.requests.WithLabelValues(operation, outcome).Inc()
	m.duration.WithLabelValues(operation).Observe(d.Seconds())
}
