package coordinator

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/talonhq/talon/internal/state"
)

// StoreCapacity returns the store's database size, quota and active
// alarms as the backend last reported them; ok is false for a backend
// that reports none (memory, Kubernetes).
func (c *Coordinator) StoreCapacity() (state.Capacity, bool) {
	r, ok := c.opts.Store.(state.CapacityReporter)
	if !ok {
		return state.Capacity{}, false
	}
	return r.Capacity(), true
}

// storeAlarmReasons are the readiness reasons of the store's active
// alarms. An alarmed etcd refuses every write (NOSPACE) or every request
// (CORRUPT): heartbeats, late marks and expiries cannot be stored, so
// dead workers would stay eligible. The coordinator fails closed and
// names the alarm in words.
func (c *Coordinator) storeAlarmReasons() []string {
	cp, ok := c.StoreCapacity()
	if !ok {
		return nil
	}
	return cp.Problems()
}

// capacityCollector exports a store's capacity as talon_store_* gauges,
// read at scrape time; nothing until the backend has answered once.
type capacityCollector struct {
	r                  state.CapacityReporter
	size, inUse, quota *prometheus.Desc
	alarm              *prometheus.Desc
}

func newCapacityCollector(r state.CapacityReporter) *capacityCollector {
	return &capacityCollector{
		r:     r,
		size:  prometheus.NewDesc("talon_store_db_size_bytes", "Size of the state store's database file, what its quota counts (etcd: the largest member's, relative to its quota); it shrinks only by defragmentation.", nil, nil),
		inUse: prometheus.NewDesc("talon_store_db_in_use_bytes", "Part of the state store's database holding live data and kept history; compaction lowers it, defragmentation then returns the rest to the file system.", nil, nil),
		quota: prometheus.NewDesc("talon_store_quota_bytes", "Database size at which the state store refuses writes (etcd --quota-backend-bytes; etcd's default 2 GiB when the server does not report it).", nil, nil),
		alarm: prometheus.NewDesc("talon_store_alarm", "1 while the state store has the alarm active (etcd: NOSPACE, CORRUPT), else 0.", []string{"alarm"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (cc *capacityCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- cc.size
	ch <- cc.inUse
	ch <- cc.quota
	ch <- cc.alarm
}

// Collect implements prometheus.Collector.
func (cc *capacityCollector) Collect(ch chan<- prometheus.Metric) {
	cp := cc.r.Capacity()
	if !cp.Known {
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(cc.size, float64(cp.DBSizeBytes))
	gauge(cc.inUse, float64(cp.DBInUseBytes))
	gauge(cc.quota, float64(cp.QuotaBytes))
	for _, a := range alarmSeries(cp.Alarms) {
		v := 0.0
		if cp.HasAlarm(a) {
			v = 1
		}
		gauge(cc.alarm, v, a)
	}
}

// alarmSeries are the alarm label values to export: the known alarms
// (so a dashboard sees 0 before any) and any other that is active.
func alarmSeries(active []string) []string {
	out := state.KnownAlarms()
	for _, a := range active {
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// registerCapacity exports the store's capacity when it reports one.
func registerCapacity(reg prometheus.Registerer, s state.Store) error {
	r, ok := s.(state.CapacityReporter)
	if !ok {
		return nil
	}
	return reg.Register(newCapacityCollector(r))
}
