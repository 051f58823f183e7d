package etcd

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/talonhq/talon/internal/state"
)

// statsCollector exports a store's Stats as Prometheus counters, read at
// scrape time. Every label comes from a fixed set.
type statsCollector struct {
	s *Store

	leaseRequests, conflicts, groupCommits, groupedPuts *prometheus.Desc
	decodes, resyncs, snapshots, skipped                *prometheus.Desc
	transitions, renewals, ttlChecks                    *prometheus.Desc
	compactions, compactedRev                           *prometheus.Desc // with Options.CompactionInterval only
}

func newStatsCollector(s *Store) *statsCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("talon_state_etcd_"+name, help, labels, nil)
	}
	return &statsCollector{
		s:             s,
		leaseRequests: d("lease_requests_total", "Lease requests sent to etcd, by operation (grant, keepalive, revoke).", "operation"),
		conflicts:     d("write_conflicts_total", "Compare-and-swap rounds lost to another writer or to a stale view."),
		groupCommits:  d("group_commits_total", "Transactions that carried the puts of several writes (group commit)."),
		groupedPuts:   d("grouped_puts_total", "Puts carried by group-commit transactions; divided by group_commits_total, the mean group size."),
		decodes:       d("record_decodes_total", "Stored values decoded; each version at most once per store, its own writes never."),
		resyncs:       d("cache_resyncs_total", "Full reads of the prefix by the snapshot cache (one at start, one after each lost watch)."),
		snapshots:     d("snapshots_total", "Snapshots answered, by form of read (cache: the watch-fed cache after a revision probe; range: a range read).", "form"),
		skipped:       d("skipped_records_total", "Values left out of snapshots and watches, by reason (unsupported schema version, malformed).", "reason"),
		renewals:      d("renewals_total", "Accepted heartbeats that only renewed their record's lease (no write, nothing in etcd's history): the status interval had not passed and nothing placement or health depends on changed."),
		ttlChecks:     d("lease_ttl_checks_total", "LeaseTimeToLive reads that check, before a late or expire transition applies, that the record's lease really went unrenewed."),
		transitions:   d("transitions_total", "ProposeTransition calls, by operation (the transition: late, expire) and outcome (accepted, stale, not_found, error).", "operation", "outcome"),
		compactions:   d("compactions_total", "Compaction rounds of this coordinator, by outcome (compacted; recorded: the first interval, nothing to compact yet; lost: another coordinator compacted this interval; already_compacted; permission_denied; error).", "outcome"),
		compactedRev:  d("compacted_revision", "The last etcd revision this coordinator compacted the store's history to; 0 before its first compaction."),
	}
}

// Describe implements prometheus.Collector.
func (c *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.leaseRequests, c.conflicts, c.groupCommits, c.groupedPuts, c.decodes, c.resyncs, c.snapshots, c.skipped, c.transitions, c.renewals, c.ttlChecks} {
		ch <- d
	}
	ch <- c.compactions
	ch <- c.compactedRev
}

// Collect implements prometheus.Collector.
func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.Stats()
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	counter(c.leaseRequests, st.LeaseGrants, "grant")
	counter(c.leaseRequests, st.LeaseKeepAlives, "keepalive")
	counter(c.leaseRequests, st.LeaseRevokes, "revoke")
	counter(c.conflicts, st.WriteConflicts)
	counter(c.groupCommits, st.GroupCommits)
	counter(c.groupedPuts, st.GroupedPuts)
	counter(c.decodes, st.RecordDecodes)
	counter(c.resyncs, st.CacheResyncs)
	counter(c.snapshots, st.CacheSnapshots, "cache")
	counter(c.snapshots, st.RangeSnapshots, "range")
	counter(c.skipped, st.UnsupportedSkipped, "unsupported")
	counter(c.skipped, st.MalformedSkipped, "malformed")
	counter(c.renewals, st.Renewals)
	counter(c.ttlChecks, st.TTLChecks)
	c.s.stats.transitions.Each(func(tr state.Transition, outcome string, n uint64) {
		counter(c.transitions, n, tr.String(), outcome)
	})
	if outcomes, rev := c.s.Compactions(); outcomes != nil {
		for o, n := range outcomes {
			counter(c.compactions, n, o)
		}
		ch <- prometheus.MustNewConstMetric(c.compactedRev, prometheus.GaugeValue, float64(rev))
	}
}
