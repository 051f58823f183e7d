package worker

import "github.com/prometheus/client_golang/prometheus"

// NewHeartbeatCounter registers talon_worker_heartbeats_total with reg and
// returns a function suitable for Options.HeartbeatOutcome.
func NewHeartbeatCounter(reg prometheus.Registerer) (func(op, outcome string), error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "talon_worker_heartbeats_total",
		Help: "Registration and heartbeat attempts by operation and outcome (accepted, duplicate, stale or an error code).",
	}, []string{"operation", "outcome"})
	if err := reg.Register(c); err != nil {
		return nil, err
	}
	return func(op, outcome string) { c.WithLabelValues(op, outcome).Inc() }, nil
}

// NewLimitCounter registers talon_worker_data_connections_refused_total
// with reg and returns a function suitable for Options.LimitRefused.
func NewLimitCounter(reg prometheus.Registerer) (func(), error) {
	c := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "talon_worker_data_connections_refused_total",
		Help: "Data connections closed at accept because max-connections were open.",
	})
	if err := reg.Register(c); err != nil {
		return nil, err
	}
	return c.Inc, nil
}

// NewTimeoutCounter registers talon_worker_data_timeouts_total with reg
// and returns a function suitable for Options.DataTimeout.
func NewTimeoutCounter(reg prometheus.Registerer) (func(reason string), error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "talon_worker_data_timeouts_total",
		Help: "Data connections ended by a timeout: read (idle-timeout, frame-timeout for a request header or TLS handshake) or write (write-timeout).",
	}, []string{"reason"})
	if err := reg.Register(c); err != nil {
		return nil, err
	}
	for _, r := range []string{"read", "write"} {
		c.WithLabelValues(r)
	}
	return func(reason string) { c.WithLabelValues(reason).Inc() }, nil
}
