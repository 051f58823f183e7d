package worker

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// workerMetrics are the worker runtime's own series, registered by New
// with Options.Registerer: registration and heartbeat attempts, and the
// data listener's refused connections and timeouts. The cache's and the
// data path's series belong to package stats, the process-wide ones to
// package metrics.
type workerMetrics struct {
	heartbeats *prometheus.CounterVec
	refused    *prometheus.CounterVec
	timeouts   *prometheus.CounterVec
	// jobBlocks counts the blocks cache jobs loaded or freed, by op.
	jobBlocks *prometheus.CounterVec
}

// newWorkerMetrics registers the worker's series with reg; on an error it
// leaves none of them registered.
func newWorkerMetrics(reg prometheus.Registerer) (*workerMetrics, error) {
	m := &workerMetrics{
		heartbeats: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "talon_worker_heartbeats_total",
			Help: "Registration and heartbeat attempts by operation and outcome (accepted, duplicate, stale or an error code).",
		}, []string{"operation", "outcome"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "talon_worker_data_connections_refused_total",
			Help: "Data connections refused by reason: closed at accept past a cap (connections, connections_per_address, pending, pending_per_address), or at the first request (connections_per_identity: the credential holds its share; worker_credential: workers read no other worker's data).",
		}, []string{"reason"}),
		timeouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "talon_worker_data_timeouts_total",
			Help: "Data connections ended by a timeout: read (idle-timeout, frame-timeout for a request header or TLS handshake) or write (write-timeout).",
		}, []string{"reason"}),
		jobBlocks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "talon_worker_job_blocks_total",
			Help: "Blocks the operator's cache jobs loaded from the store (operation warm: resident ones are not counted) or evicted (operation free).",
		}, []string{"operation"}),
	}
	var done []prometheus.Collector
	for _, c := range []prometheus.Collector{m.heartbeats, m.refused, m.timeouts, m.jobBlocks} {
		if err := reg.Register(c); err != nil {
			for _, d := range done {
				reg.Unregister(d)
			}
			return nil, fmt.Errorf("worker metrics: %w", err)
		}
		done = append(done, c)
	}
	for _, r := range []string{"read", "write"} {
		m.timeouts.WithLabelValues(r)
	}
	for _, op := range []string{"warm", "free"} {
		m.jobBlocks.WithLabelValues(op)
	}
	for _, r := range refusalReasons {
		m.refused.WithLabelValues(r)
	}
	return m, nil
}

// heartbeat counts one Register or Heartbeat attempt by its outcome.
func (m *workerMetrics) heartbeat(op, outcome string) {
	m.heartbeats.WithLabelValues(op, outcome).Inc()
}

// refusedConn counts a data connection refused for reason (one of
// refusalReasons).
func (m *workerMetrics) refusedConn(reason string) { m.refused.WithLabelValues(reason).Inc() }

// timeout counts a data connection ended by a read or write timeout.
func (m *workerMetrics) timeout(reason string) { m.timeouts.WithLabelValues(reason).Inc() }
