package kube

import "github.com/prometheus/client_golang/prometheus"

// statsCollector exports a store's Stats as Prometheus counters, read at
// scrape time. Every label comes from a fixed set.
type statsCollector struct {
	s *Store

	decodes, snapshots, probes, fences, resyncs, renewals *prometheus.Desc
}

func newStatsCollector(s *Store) *statsCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("talon_state_kube_"+name, help, labels, nil)
	}
	return &statsCollector{
		s:         s,
		decodes:   d("record_decodes_total", "Records decoded from Lease annotations; the snapshot cache decodes each Lease version at most once, its own writes never."),
		snapshots: d("snapshots_total", "Snapshots answered, by form of read (cache: the watch-fed cache after a revision probe; list: a LIST of the cluster's Leases).", "form"),
		probes:    d("revision_probes_total", "Consistent reads of the current resourceVersion sent for cached snapshots (shared by concurrent snapshots)."),
		fences:    d("fence_writes_total", "Writes of the store's fence Lease, sent when the cache had not seen the probed resourceVersion (shared by concurrent snapshots)."),
		resyncs:   d("cache_resyncs_total", "LISTs of the namespace's Talon Leases by the snapshot cache (one at start, one after each lost watch)."),
		renewals:  d("renewals_total", "Accepted heartbeats that only renewed their Lease (a small merge patch of renewTime and talon.io/renew-seq): the status interval had not passed and nothing placement or health depends on changed."),
	}
}

// Describe implements prometheus.Collector.
func (c *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.decodes, c.snapshots, c.probes, c.fences, c.resyncs, c.renewals} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.Stats()
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	counter(c.decodes, st.RecordDecodes)
	counter(c.snapshots, st.CacheSnapshots, "cache")
	counter(c.snapshots, st.ListSnapshots, "list")
	counter(c.probes, st.RevisionProbes)
	counter(c.fences, st.FenceWrites)
	counter(c.resyncs, st.CacheResyncs)
	counter(c.renewals, st.Renewals)
}
