package stats_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/worker/stats"
)

// record feeds one of every event.
func record(s *stats.Stats) {
	s.Request()
	s.Request()
	s.Error()
	s.Served(1000)
	s.Served(-5) // ignored
	s.Hit()
	s.Miss()
	s.Miss()
	s.BackendFetch(stats.BackendRead, 3*time.Millisecond, false)
	s.BackendFetch(stats.BackendRead, 2*time.Second, true)
	s.BackendFetch(stats.BackendSize, time.Millisecond, false)
	s.LoadStarted()
	s.LoadStarted()
	s.LoadDone()
	s.BlockAdded(4096)
	s.BlockAdded(100)
	s.BlockRemoved(100, true)
	s.SetCapacity(1 << 30)
}

func TestStatus(t *testing.T) {
	s := stats.New()
	record(s)
	capy, c := s.Status()
	wantCap := cluster.Capacity{CapacityBytes: 1 << 30, ResidentBytes: 4096, Blocks: 1, InflightLoads: 1}
	wantCounters := cluster.Counters{
		RequestsTotal: 2, ErrorsTotal: 1, HitsTotal: 1, MissesTotal: 2, BytesServedTotal: 1000,
		BackendFetchesTotal: 3, BackendErrorsTotal: 1, EvictionsTotal: 1,
	}
	if capy != wantCap {
		t.Errorf("capacity = %+v, want %+v", capy, wantCap)
	}
	if c != wantCounters {
		t.Errorf("counters = %+v, want %+v", c, wantCounters)
	}
}

func gather(t *testing.T, s *stats.Stats) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := s.Register(reg); err != nil {
		t.Fatal(err)
	}
	return reg
}

func TestPrometheus(t *testing.T) {
	s := stats.New()
	record(s)
	reg := gather(t, s)
	want := `
# HELP talon_worker_cache_lookups_total Block reads from the cache, by outcome: hit (the block was resident) or miss (it had to be loaded from the blob store).
# TYPE talon_worker_cache_lookups_total counter
talon_worker_cache_lookups_total{outcome="hit"} 1
talon_worker_cache_lookups_total{outcome="miss"} 2
# HELP talon_worker_served_bytes_total Object bytes sent to clients by the data listener.
# TYPE talon_worker_served_bytes_total counter
talon_worker_served_bytes_total 1000
# HELP talon_worker_cache_evictions_total Blocks removed from the cache to make room for others.
# TYPE talon_worker_cache_evictions_total counter
talon_worker_cache_evictions_total 1
# HELP talon_worker_backend_fetches_total Blob store calls, by operation (read: a block's range, size: an object's size).
# TYPE talon_worker_backend_fetches_total counter
talon_worker_backend_fetches_total{operation="read"} 2
talon_worker_backend_fetches_total{operation="size"} 1
# HELP talon_worker_backend_fetch_errors_total Blob store calls that failed (not counting objects that do not exist), by operation.
# TYPE talon_worker_backend_fetch_errors_total counter
talon_worker_backend_fetch_errors_total{operation="read"} 1
talon_worker_backend_fetch_errors_total{operation="size"} 0
# HELP talon_worker_inflight_loads Blocks being loaded from the blob store now.
# TYPE talon_worker_inflight_loads gauge
talon_worker_inflight_loads 1
# HELP talon_worker_cache_blocks Blocks resident in the cache.
# TYPE talon_worker_cache_blocks gauge
talon_worker_cache_blocks 1
# HELP talon_worker_cache_resident_bytes Bytes of the block files resident in the cache, headers included.
# TYPE talon_worker_cache_resident_bytes gauge
talon_worker_cache_resident_bytes 4096
# HELP talon_worker_cache_capacity_bytes Configured capacity of the cache.
# TYPE talon_worker_cache_capacity_bytes gauge
talon_worker_cache_capacity_bytes 1.073741824e+09
`
	names := []string{
		"talon_worker_cache_lookups_total", "talon_worker_served_bytes_total", "talon_worker_cache_evictions_total",
		"talon_worker_backend_fetches_total", "talon_worker_backend_fetch_errors_total", "talon_worker_inflight_loads",
		"talon_worker_cache_blocks", "talon_worker_cache_resident_bytes", "talon_worker_cache_capacity_bytes",
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(s, "talon_worker_backend_fetch_duration_seconds"); n != 2 {
		t.Fatalf("duration histogram has %d series, want 2 (read, size)", n)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	var count uint64
	for _, mf := range mfs {
		if mf.GetName() != "talon_worker_backend_fetch_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == "read" {
				sum, count = m.GetHistogram().GetSampleSum(), m.GetHistogram().GetSampleCount()
			}
		}
	}
	if count != 2 || sum < 2.003-1e-9 || sum > 2.003+1e-9 {
		t.Fatalf("read duration histogram count %d sum %v, want 2 and 2.003", count, sum)
	}
}

func TestMetricsLint(t *testing.T) {
	s := stats.New()
	record(s)
	reg := gather(t, s)
	testsupport.LintMetrics(t, reg, "talon_worker_", 16)
}

func TestConcurrentRecording(t *testing.T) {
	s := stats.New()
	var wg sync.WaitGroup
	const goroutines, each = 8, 1000
	for range goroutines {
		wg.Go(func() {
			for range each {
				s.Hit()
				s.Served(2)
				s.LoadStarted()
				s.BlockAdded(10)
				s.LoadDone()
				s.BlockRemoved(10, true)
				s.BackendFetch(stats.BackendRead, time.Microsecond, false)
			}
		})
	}
	wg.Wait()
	capy, c := s.Status()
	if c.HitsTotal != goroutines*each || c.BytesServedTotal != 2*goroutines*each || c.EvictionsTotal != goroutines*each || c.BackendFetchesTotal != goroutines*each {
		t.Fatalf("counters after concurrent recording = %+v", c)
	}
	if capy.Blocks != 0 || capy.ResidentBytes != 0 || capy.InflightLoads != 0 {
		t.Fatalf("gauges after balanced events = %+v, want zero", capy)
	}
}
