// Package stats holds the worker's counters and gauges: the one place the
// cache and the data server record events, read both by the heartbeat (the
// bounded status record, cluster.Counters and cluster.Capacity) and by
// Prometheus (talon_worker_* metrics; ADR 0001 section 10).
//
// Counters and gauges are atomics: recording an event never takes a lock
// and a Stats is safe for concurrent use. Histograms (backend fetch
// duration) are Prometheus-only, as the ADR requires.
//
// Requests and request errors are counted here for the status record but
// not exported as talon_worker_* series: the process-wide
// talon_requests_total of package metrics (operation "get", errors being
// the outcomes other than "ok") already carries them, and one quantity gets
// one metric name. Likewise no metric has a worker-ID label: the scrape target
// identifies the process.
package stats

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/talonhq/talon/internal/cluster"
)

// BackendOp is the kind of blob store call a backend fetch was: the
// value of the operation label.
type BackendOp int

// Backend operations.
const (
	// BackendRead reads a block's range of an object.
	BackendRead BackendOp = iota
	// BackendSize asks for an object's size.
	BackendSize
	numBackendOps
)

// String returns the label value: read or size.
func (op BackendOp) String() string {
	switch op {
	case BackendRead:
		return "read"
	case BackendSize:
		return "size"
	}
	return "unknown"
}

// Stats is the worker's counters and gauges. The zero value is not
// usable; call New.
type Stats struct {
	requests    atomic.Uint64
	errors      atomic.Uint64
	hits        atomic.Uint64
	misses      atomic.Uint64
	bytesServed atomic.Uint64
	evictions   atomic.Uint64
	fetches     [numBackendOps]atomic.Uint64
	fetchErrors [numBackendOps]atomic.Uint64
	diskErrors  atomic.Uint64
	checksums   atomic.Uint64 // block files that failed verification
	blobBytes   atomic.Uint64 // bytes read from the blob store
	prefetches  atomic.Uint64 // read-ahead loads started
	warmAdmit   atomic.Uint64 // loads admitted during warm-up
	warmDefer   atomic.Uint64 // loads refused during warm-up (next owner)
	warmUntil   atomic.Int64  // unix nanos warm-up ends; 0: no warm-up
	warmClock   atomic.Pointer[func() time.Time]

	inflight atomic.Int64
	blocks   atomic.Int64
	resident atomic.Int64
	capacity atomic.Int64

	fetchDuration *prometheus.HistogramVec

	descs descs
}

type descs struct {
	lookups, served, evictions, fetches, fetchErrors, diskErrors, checksums, blobBytes, prefetches, warmLoads, warming *prometheus.Desc
	inflight, blocks, resident, capacity                                                                               *prometheus.Desc
}

// fetchDurationBuckets are the upper bounds, in seconds, of the backend
// fetch duration histogram: a local disk read of a block takes about a
// millisecond, an object store round trip tens to hundreds.
func fetchDurationBuckets() []float64 {
	return []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
}

// New returns zeroed stats.
func New() *Stats {
	s := &Stats{
		fetchDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "talon_worker_backend_fetch_duration_seconds",
			Help:    "Time of blob store calls, by operation (read: a block's range, size: an object's size), failed ones included.",
			Buckets: fetchDurationBuckets(),
		}, []string{"operation"}),
		descs: descs{
			lookups: prometheus.NewDesc("talon_worker_cache_lookups_total",
				"Block reads from the cache, by outcome: hit (the block was resident) or miss (it had to be loaded from the blob store).", []string{"outcome"}, nil),
			served: prometheus.NewDesc("talon_worker_served_bytes_total",
				"Object bytes sent to clients by the data listener.", nil, nil),
			evictions: prometheus.NewDesc("talon_worker_cache_evictions_total",
				"Blocks removed from the cache to make room for others.", nil, nil),
			fetches: prometheus.NewDesc("talon_worker_backend_fetches_total",
				"Blob store calls, by operation (read: a block's range, size: an object's size).", []string{"operation"}, nil),
			fetchErrors: prometheus.NewDesc("talon_worker_backend_fetch_errors_total",
				"Blob store calls that failed (not counting objects that do not exist), by operation.", []string{"operation"}, nil),
			diskErrors: prometheus.NewDesc("talon_worker_cache_disk_errors_total",
				"Block loads that failed on the cache directory (create, write, fsync, rename: read-only, full or broken disk); such reads are served from the blob store.", nil, nil),
			checksums: prometheus.NewDesc("talon_worker_cache_checksum_failures_total",
				"Block files that failed their checksum when opened (deleted and reloaded from the blob store).", nil, nil),
			blobBytes: prometheus.NewDesc("talon_worker_backend_read_bytes_total",
				"Bytes read from the blob store (block loads and read-throughs): the egress the cache saves.", nil, nil),
			prefetches: prometheus.NewDesc("talon_worker_cache_prefetches_total",
				"Block loads started by read-ahead (the blocks after a sequential read that this worker owns, at most read-ahead of them per request and read-ahead-loads in flight); they count in talon_worker_inflight_loads and backend reads, not in lookups.", nil, nil),
			warmLoads: prometheus.NewDesc("talon_worker_warmup_loads_total",
				"Block loads from the store asked for during the worker's warm-up (warmup-period after start), by outcome: admitted (within warmup-rate) or deferred (refused 503 warming_up so the block's next owner serves it, or waited for the rate).", []string{"outcome"}, nil),
			warming: prometheus.NewDesc("talon_worker_warming_up",
				"1 while the worker's warm-up bound on store loads applies (warmup-period after start), else 0.", nil, nil),
			inflight: prometheus.NewDesc("talon_worker_inflight_loads",
				"Blocks being loaded from the blob store now.", nil, nil),
			blocks: prometheus.NewDesc("talon_worker_cache_blocks",
				"Blocks resident in the cache.", nil, nil),
			resident: prometheus.NewDesc("talon_worker_cache_resident_bytes",
				"Bytes of the block files resident in the cache, headers included.", nil, nil),
			capacity: prometheus.NewDesc("talon_worker_cache_capacity_bytes",
				"Configured capacity of the cache.", nil, nil),
		},
	}
	for op := range numBackendOps {
		s.fetchDuration.WithLabelValues(op.String())
	}
	return s
}

// DiskError counts a block load that failed on the cache directory.
func (s *Stats) DiskError() { s.diskErrors.Add(1) }

// ChecksumFailure counts a block file that failed verification.
func (s *Stats) ChecksumFailure() { s.checksums.Add(1) }

// BackendBytes counts bytes read from the blob store.
func (s *Stats) BackendBytes(n int64) {
	if n > 0 {
		s.blobBytes.Add(uint64(n))
	}
}

// ChecksumFailures returns the block files that failed verification.
func (s *Stats) ChecksumFailures() uint64 { return s.checksums.Load() }

// BackendBytesRead returns the bytes read from the blob store.
func (s *Stats) BackendBytesRead() uint64 { return s.blobBytes.Load() }

// DiskErrors returns the disk errors counted so far.
func (s *Stats) DiskErrors() uint64 { return s.diskErrors.Load() }

// Request counts one data request received.
func (s *Stats) Request() { s.requests.Add(1) }

// Error counts one data request that failed.
func (s *Stats) Error() { s.errors.Add(1) }

// Served counts n object bytes sent to a client.
func (s *Stats) Served(n int64) {
	if n > 0 {
		s.bytesServed.Add(uint64(n))
	}
}

// Hit counts a block read served from a resident block.
func (s *Stats) Hit() { s.hits.Add(1) }

// SetWarmup records when the warm-up bound ends, on clock.
func (s *Stats) SetWarmup(until time.Time, clock func() time.Time) {
	s.warmClock.Store(&clock)
	s.warmUntil.Store(until.UnixNano())
}

// WarmupLoads counts n block loads asked for during warm-up: admitted
// within the rate, or deferred.
func (s *Stats) WarmupLoads(admitted bool, n int) {
	if admitted {
		s.warmAdmit.Add(uint64(n))
	} else {
		s.warmDefer.Add(uint64(n))
	}
}

// WarmupAdmitted returns the loads admitted during warm-up.
func (s *Stats) WarmupAdmitted() uint64 { return s.warmAdmit.Load() }

// WarmupDeferred returns the loads deferred during warm-up.
func (s *Stats) WarmupDeferred() uint64 { return s.warmDefer.Load() }

// warmingUp is 1 while the warm-up bound applies.
func (s *Stats) warmingUp() int64 {
	clock := s.warmClock.Load()
	if clock == nil || (*clock)().UnixNano() >= s.warmUntil.Load() {
		return 0
	}
	return 1
}

// Prefetch counts a load started by read-ahead.
func (s *Stats) Prefetch() { s.prefetches.Add(1) }

// Prefetches returns the loads read-ahead started.
func (s *Stats) Prefetches() uint64 { return s.prefetches.Load() }

// Miss counts a block read that needed a load from the blob store.
func (s *Stats) Miss() { s.misses.Add(1) }

// BackendFetch counts one blob store call that took d; failed says whether
// it was a backend failure (an object that does not exist or a caller that
// gave up is not).
func (s *Stats) BackendFetch(op BackendOp, d time.Duration, failed bool) {
	if op < 0 || op >= numBackendOps {
		return
	}
	s.fetches[op].Add(1)
	if failed {
		s.fetchErrors[op].Add(1)
	}
	s.fetchDuration.WithLabelValues(op.String()).Observe(d.Seconds())
}

// LoadStarted and LoadDone bracket one block load (the in-flight gauge).
func (s *Stats) LoadStarted() { s.inflight.Add(1) }

// LoadDone ends a load LoadStarted began.
func (s *Stats) LoadDone() { s.inflight.Add(-1) }

// BlockAdded records a block of size bytes (file size) becoming resident.
func (s *Stats) BlockAdded(size int64) {
	s.blocks.Add(1)
	s.resident.Add(size)
}

// BlockRemoved records a resident block of size bytes leaving the cache;
// evicted says it was removed to make room (counted in evictions).
func (s *Stats) BlockRemoved(size int64, evicted bool) {
	s.blocks.Add(-1)
	s.resident.Add(-size)
	if evicted {
		s.evictions.Add(1)
	}
}

// SetCapacity records the cache's capacity in bytes.
func (s *Stats) SetCapacity(bytes int64) { s.capacity.Store(bytes) }

func nonNeg(v int64) uint64 { return uint64(max(v, 0)) }

// Status returns the gauges and cumulative counters for the status record.
// Pages is always 0: the cache does not split blocks into pages.
func (s *Stats) Status() (cluster.Capacity, cluster.Counters) {
	var fetches, fetchErrors uint64
	for op := range numBackendOps {
		fetches += s.fetches[op].Load()
		fetchErrors += s.fetchErrors[op].Load()
	}
	return cluster.Capacity{
			CapacityBytes: nonNeg(s.capacity.Load()),
			ResidentBytes: nonNeg(s.resident.Load()),
			Blocks:        nonNeg(s.blocks.Load()),
			InflightLoads: nonNeg(s.inflight.Load()),
		}, cluster.Counters{
			RequestsTotal:       s.requests.Load(),
			ErrorsTotal:         s.errors.Load(),
			HitsTotal:           s.hits.Load(),
			MissesTotal:         s.misses.Load(),
			BytesServedTotal:    s.bytesServed.Load(),
			BackendFetchesTotal: fetches,
			BackendErrorsTotal:  fetchErrors,
			EvictionsTotal:      s.evictions.Load(),
		}
}

// Describe implements prometheus.Collector.
func (s *Stats) Describe(ch chan<- *prometheus.Desc) {
	d := &s.descs
	for _, desc := range []*prometheus.Desc{d.lookups, d.served, d.evictions, d.fetches, d.fetchErrors, d.diskErrors, d.checksums, d.blobBytes, d.prefetches, d.warmLoads, d.warming, d.inflight, d.blocks, d.resident, d.capacity} {
		ch <- desc
	}
	s.fetchDuration.Describe(ch)
}

// Collect implements prometheus.Collector.
func (s *Stats) Collect(ch chan<- prometheus.Metric) {
	d := &s.descs
	counter := func(desc *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(desc *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, float64(max(v, 0)))
	}
	counter(d.lookups, s.hits.Load(), "hit")
	counter(d.lookups, s.misses.Load(), "miss")
	counter(d.served, s.bytesServed.Load())
	counter(d.evictions, s.evictions.Load())
	for op := range numBackendOps {
		counter(d.fetches, s.fetches[op].Load(), op.String())
		counter(d.fetchErrors, s.fetchErrors[op].Load(), op.String())
	}
	counter(d.diskErrors, s.diskErrors.Load())
	counter(d.checksums, s.checksums.Load())
	counter(d.blobBytes, s.blobBytes.Load())
	counter(d.prefetches, s.prefetches.Load())
	counter(d.warmLoads, s.warmAdmit.Load(), "admitted")
	counter(d.warmLoads, s.warmDefer.Load(), "deferred")
	gauge(d.warming, s.warmingUp())
	gauge(d.inflight, s.inflight.Load())
	gauge(d.blocks, s.blocks.Load())
	gauge(d.resident, s.resident.Load())
	gauge(d.capacity, s.capacity.Load())
	s.fetchDuration.Collect(ch)
}

// Register registers s with reg.
func (s *Stats) Register(reg prometheus.Registerer) error { return reg.Register(s) }
