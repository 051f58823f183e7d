package coordinator

import (
	"time"

	"github.com/talonhq/talon/internal/netlimit"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/talonhq/talon/internal/cluster"
)

// coordMetrics are the coordinator's own metrics (ADR 0001 section 10).
type coordMetrics struct {
	writes         *prometheus.CounterVec // operation=register|heartbeat|deregister, outcome
	snapshotAge    prometheus.Gauge
	nodes          *prometheus.GaugeVec // role, health
	eligible       prometheus.Gauge
	underRepl      prometheus.Gauge
	heartbeatAge   prometheus.Histogram
	renewals       prometheus.Counter
	placementDur   prometheus.Histogram
	placementErrs  *prometheus.CounterVec // outcome
	versionChanges prometheus.Counter
	selfRefusals   *prometheus.CounterVec
	limitRefusals  *prometheus.CounterVec
	authRefusals   *prometheus.CounterVec
	transitions    *prometheus.CounterVec // transition, outcome
	recovering     prometheus.Gauge
}

func newCoordMetrics(reg prometheus.Registerer, backend string) (*coordMetrics, error) {
	constLabels := prometheus.Labels{"backend": backend}
	m := &coordMetrics{
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "talon_coordinator_node_updates_total",
			Help: "Registration, heartbeat and deregistration requests by outcome (accepted, duplicate, stale, not_found or an error code).",
		}, []string{"operation", "outcome"}),
		snapshotAge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "talon_coordinator_snapshot_age_seconds",
			Help: "Age of the last good cluster snapshot; grows while the store is unreachable.",
		}),
		nodes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "talon_coordinator_nodes",
			Help: "Live (non-expired) nodes in the last good snapshot by role and effective health.",
		}, []string{"role", "health"}),
		eligible: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "talon_placement_eligible_workers",
			Help: "Workers in this coordinator's current placement (live, healthy or degraded, and ready): the owners lookups choose from. 0 before the first store snapshot.",
		}),
		underRepl: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "talon_placement_under_replicated",
			Help: "1 when this coordinator's placement has fewer eligible workers than placement-replicas (the replica count clients read with), else 0.",
		}),
		heartbeatAge: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "talon_coordinator_heartbeat_age_seconds",
			Help:    "At each accepted heartbeat, the age of the node's record in this coordinator's last view (store-observed times): near heartbeat-interval when healthy; the tail shows workers close to unhealthy-after. A histogram rather than a per-node timestamp, so cardinality stays bounded.",
			Buckets: []float64{.25, .5, 1, 2, 3, 5, 7.5, 10, 15, 20, 30, 60},
		}),
		renewals: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "talon_coordinator_heartbeat_renewals_total",
			Help: "Accepted heartbeats (workers' and this coordinator's own) that only renewed the record's lease: nothing placement or health depends on changed and the status interval had not passed, so the store wrote no record.",
		}),
		placementDur: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "talon_coordinator_placement_duration_seconds",
			Help:    "Time to answer a placement lookup, snapshot included.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}),
		placementErrs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "talon_coordinator_placement_errors_total",
			Help: "Placement lookups that failed, by error code.",
		}, []string{"outcome"}),
		versionChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "talon_coordinator_placement_version_changes_total",
			Help: "Times this coordinator observed a new PlacementVersion.",
		}),
		limitRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "talon_coordinator_limit_refusals_total",
			Help: "Connections closed and requests refused by a control-listener limit: connections (max-connections), connections_per_address (half of it from one source address), connections_per_identity (a quarter of it held by one client certificate), pending (a quarter of it not yet through the TLS handshake), pending_per_address (32 such from one address), handshake_timeout, idle_timeout, frame_timeout, request_id (0 is reserved for pushes), records (max-records), inflight_writes (max-inflight-writes), write_rate (more than 10 writes of one node per heartbeat interval past a burst of 60), attests (more than 4 Attest requests on one connection), attests_per_peer (more than 8 attestations of one credential back to back, then 1 per 10 s).",
		}, []string{"limit"}),
		authRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "talon_coordinator_auth_refusals_total",
			Help: "Control connections and requests refused for their credential: handshake (no valid certificate), permission_denied (a write for a node or role the credential does not name), revoked (a request on a connection whose certificate was deny-listed since), attestation (an Attest the verifier refused), not_attested (a write on a connection without a valid attestation for its node, when worker-attestation is on).",
		}, []string{"reason"}),
		selfRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "talon_coordinator_own_record_refusals_total",
			Help: "Writes of this coordinator's own record that the store refused, by outcome (stale: another process holds the node ID; not_found: the record is gone).",
		}, []string{"outcome"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "talon_coordinator_liveness_transitions_total",
			Help:        "Time-based transitions this coordinator proposed to the store after watching a record go unchanged (operation: late after unhealthy-after, expire after lease-ttl), by outcome (accepted: this proposal applied it; stale: the record moved on first, a heartbeat won; not_found; or an error code).",
			ConstLabels: constLabels,
		}, []string{"operation", "outcome"}),
		recovering: prometheus.NewGauge(prometheus.GaugeOpts{
			Name:        "talon_coordinator_recovering",
			Help:        "1 while the coordinator holds itself unready after a store outage or its own stall: during it, and after one long enough for a record to lapse until it has observed the cluster for the recovery hold (and, if its own record could have expired, the store accepted it again).",
			ConstLabels: constLabels,
		}),
	}
	for _, c := range []prometheus.Collector{m.writes, m.snapshotAge, m.nodes, m.eligible, m.underRepl, m.heartbeatAge, m.renewals, m.placementDur, m.placementErrs, m.versionChanges, m.selfRefusals, m.limitRefusals, m.authRefusals, m.transitions, m.recovering} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, tr := range []string{"late", "expire"} {
		for _, o := range []string{"accepted", "stale", "not_found"} {
			m.transitions.WithLabelValues(tr, o)
		}
	}
	for _, r := range []string{"handshake", "permission_denied", "revoked", "attestation", "not_attested"} {
		m.authRefusals.WithLabelValues(r)
	}
	for _, l := range []string{netlimit.ReasonMax, netlimit.ReasonMaxPerAddress, netlimit.ReasonMaxPending, netlimit.ReasonMaxPendingPerAddress, netlimit.ReasonMaxPerIdentity,
		"handshake_timeout", "idle_timeout", "frame_timeout", "request_id", "records", "inflight_writes", "write_rate", "attests", "attests_per_peer"} {
		m.limitRefusals.WithLabelValues(l)
	}
	// Every role/health series exists from the start, so dashboards see zeros.
	for _, r := range cluster.Roles() {
		for _, h := range cluster.HealthStates() {
			m.nodes.WithLabelValues(string(r), string(h))
		}
	}
	return m, nil
}

// skewEstimator is a store that estimates the clock offset of the
// coordinators whose writes it sees (etcd and Kubernetes do).
type skewEstimator interface {
	ClockSkew() (time.Duration, bool)
}

// registerSkew exports the store's estimate as talon_clock_skew_seconds.
// Clock skew changes neither ordering nor liveness (each coordinator ages
// records on its own clock), but it misdates logs, the web UI's times and
// certificate validity, so operators alert on it.
func registerSkew(reg prometheus.Registerer, sk skewEstimator) error {
	return reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "talon_clock_skew_seconds",
		Help: "Estimated offset of the other coordinators' clocks from this one's (positive: theirs are ahead), the median over recent record changes seen live; 0 before any.",
	}, func() float64 {
		d, _ := sk.ClockSkew()
		return d.Seconds()
	}))
}

// countNodes sets the live-node gauges and the eligible-worker gauge from
// v, whose clients read with replicas.
func (m *coordMetrics) countNodes(v *View, replicas int) {
	m.eligible.Set(float64(v.Table.Len()))
	under := 0.0
	if v.Table.Len() < replicas {
		under = 1
	}
	m.underRepl.Set(under)
	counts := map[[2]string]int{}
	for _, r := range v.Snapshot.Records {
		counts[[2]string{string(r.Role), string(r.EffectiveHealth())}]++
	}
	for _, r := range cluster.Roles() {
		for _, h := range cluster.HealthStates() {
			m.nodes.WithLabelValues(string(r), string(h)).Set(float64(counts[[2]string{string(r), string(h)}]))
		}
	}
}
