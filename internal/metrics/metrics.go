// Package metrics defines the Prometheus metrics every Talon process
// exposes (ADR 0001 section 10): build info, requests by outcome, request
// duration, active connections and readiness, plus the Go runtime and
// process collectors. Role-specific metrics live with their role
// (coordinator, worker/stats).
//
// One quantity has one metric name: uptime is time() minus
// process_start_time_seconds, and failed requests are talon_requests_total
// with outcome other than "ok".
//
// Labels come only from bounded sets: operation, role, backend, outcome,
// form, health and listener, plus the fixed labels of talon_build_info:
// build, role, cluster_id and node_id (one series per process, so the node
// ID costs no cardinality; alert rules join it onto up to name a target
// that cannot be scraped). Object names, block IDs, request IDs, error text, peer
// addresses and node labels never become labels.
package metrics

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/talonhq/talon/internal/buildinfo"
	"github.com/talonhq/talon/internal/cluster"
)

// AllowedLabel reports whether Talon metrics may use the label name: the
// bounded dimensions operation, role, backend, outcome, form, health,
// listener, limit (a configured bound), reason (a refusal's cause) and
// alarm (the state store's alarm types), and talon_build_info's version, revision and goversion
// (one series per process). Tests of every metrics producer fail on any other.
func AllowedLabel(name string) bool {
	switch name {
	case "operation", "role", "backend", "outcome", "form", "health", "listener", "limit", "reason", "alarm",
		"version", "revision", "goversion":
		return true
	}
	return false
}

// AllowedLabelOf reports whether metric may carry the label name:
// AllowedLabel's, and on talon_build_info alone (one series per process)
// cluster_id and node_id.
func AllowedLabelOf(metric, name string) bool {
	return AllowedLabel(name) || (metric == "talon_build_info" && (name == "cluster_id" || name == "node_id"))
}

// Process holds the metrics common to every process.
type Process struct {
	requests    *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	connections *prometheus.GaugeVec
	ready       atomic.Pointer[func() bool] // ReadyFrom's function
}

// Identity names a process in talon_build_info.
type Identity struct {
	Role, ClusterID, NodeID string
}

// NewProcess registers the common metrics of a process of role with reg,
// with no cluster or node ID in talon_build_info (tests, tools).
func NewProcess(reg prometheus.Registerer, role string) (*Process, error) {
	return NewNodeProcess(reg, Identity{Role: role})
}

// NewNodeProcess registers the common metrics of the process id names
// with reg.
func NewNodeProcess(reg prometheus.Registerer, id Identity) (*Process, error) {
	p := &Process{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "talon_requests_total",
			Help: "Requests accepted, by operation and outcome (ok or an error code): the failed ones are those whose outcome is not ok.",
		}, []string{"operation", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "talon_request_duration_seconds",
			Help:    "Time to serve a request, by operation.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"operation"}),
		connections: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "talon_active_connections",
			Help: "Open connections, by listener (control, data, admin).",
		}, []string{"listener"}),
	}
	info := buildinfo.Get()
	labels := prometheus.Labels{"version": info.Version, "revision": info.Commit, "goversion": info.GoVersion, "role": id.Role}
	for k, v := range map[string]string{"cluster_id": id.ClusterID, "node_id": id.NodeID} {
		if v != "" {
			labels[k] = v
		}
	}
	buildInfo := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "talon_build_info",
		Help:        "Build information; the value is always 1.",
		ConstLabels: labels,
	})
	buildInfo.Set(1)
	level := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "talon_build_feature_level",
		Help: "The protocol feature level this process's build speaks (ADR 0001 amendment: upgrades); the cluster's is the lowest among live processes (talon_cluster_feature_level).",
	})
	level.Set(float64(cluster.BuildLevel))
	ready := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "talon_ready",
		Help: "1 when the process reports ready, 0 otherwise.",
	}, func() float64 {
		if f := p.ready.Load(); f != nil && (*f)() {
			return 1
		}
		return 0
	})
	for _, c := range []prometheus.Collector{
		p.requests, p.duration, p.connections, buildInfo, level, ready,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Observe records one finished request. outcome is "ok" or an error code.
func (p *Process) Observe(operation, outcome string, d time.Duration) {
	p.requests.WithLabelValues(operation, outcome).Inc()
	p.duration.WithLabelValues(operation).Observe(d.Seconds())
}

// ConnOpened and ConnClosed track open connections of a listener.
func (p *Process) ConnOpened(listener string) { p.connections.WithLabelValues(listener).Inc() }

// ConnClosed records a closed connection of listener.
func (p *Process) ConnClosed(listener string) { p.connections.WithLabelValues(listener).Dec() }

// ReadyFrom makes talon_ready read ready at every scrape: the runtime's
// readiness tracker, so the gauge is derived from the one place that
// decides readiness rather than set from each callback that may change
// it. Until it is called the gauge is 0.
func (p *Process) ReadyFrom(ready func() bool) { p.ready.Store(&ready) }

// Bool renders a bool for a metric label or value.
func Bool(b bool) string { return strconv.FormatBool(b) }
