package kube

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"

	"github.com/talonhq/talon/internal/backoff"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

// typicalRecord is a worker record as a deployment sends it: realistic
// addresses, a version string, six deployment labels and counters in the
// billions.
func typicalRecord(clusterID, node string) *cluster.Record {
	return &cluster.Record{
		ClusterID:       clusterID,
		NodeID:          node,
		Role:            cluster.RoleWorker,
		IncarnationID:   "0f8e5c1a-6b7d-4c1e-9a53-2d41be7a9c60",
		Address:         "10.42.17.203:7070",
		AdminAddress:    "10.42.17.203:9090",
		Version:         "v1.4.2 (go1.26.8, 3f2c9ab)",
		StartTimeUnixMs: 1_784_800_000_000,
		HeartbeatSeq:    123_456,
		UpdatedAtUnixMs: 1_784_800_617_000,
		Health:          cluster.HealthHealthy,
		Ready:           true,
		Capacity: cluster.Capacity{
			CapacityBytes: 2 << 40, ResidentBytes: 1_873_412_300_800, Blocks: 447_000, Pages: 114_000_000, InflightLoads: 12,
		},
		Counters: cluster.Counters{
			RequestsTotal: 9_812_345_678, ErrorsTotal: 1_234, HitsTotal: 8_700_000_000, MissesTotal: 1_112_345_678,
			BytesServedTotal: 431_000_000_000_000, BackendFetchesTotal: 1_112_345_678, BackendErrorsTotal: 17,
			EvictionsTotal: 98_000_000, PlacementLookupsTotal: 12_000_000, PlacementErrorsTotal: 3, StoreErrorsTotal: 2,
		},
		Labels: map[string]string{
			"region": "eu-west-1", "zone": "eu-west-1b", "pod": "talon-worker-7d9f8b6c5-x2x9q",
			"host": "ip-10-42-17-203.eu-west-1.compute.internal", "rack": "r17", "pool": "nvme-large",
		},
	}
}

// maximalRecord has every bounded field at its limit: 256-byte IDs,
// incarnation, version and addresses, 16 labels with 63-byte keys and
// 256-byte values, and every number at its maximum. Its characters need no
// JSON escaping, so it is the largest valid record that fields at their
// limits can make.
func maximalRecord(clusterID string) *cluster.Record {
	// A DNS name of 250 bytes: labels of 63, dot-separated.
	label := strings.Repeat("h", 63)
	host := label + "." + label + "." + label + "." + strings.Repeat("h", cluster.MaxAddressBytes-len(":65535")-3*64)
	r := &cluster.Record{
		ClusterID:       clusterID,
		NodeID:          strings.Repeat("n", cluster.MaxIDBytes),
		Role:            cluster.RoleCoordinator,
		IncarnationID:   strings.Repeat("i", cluster.MaxIDBytes),
		Address:         host + ":65535",
		AdminAddress:    host + ":65534",
		Version:         strings.Repeat("v", cluster.MaxVersionBytes),
		StartTimeUnixMs: math.MaxInt64,
		HeartbeatSeq:    math.MaxUint64,
		UpdatedAtUnixMs: math.MaxInt64,
		Health:          cluster.HealthDegraded,
		Ready:           true,
		Capacity: cluster.Capacity{
			CapacityBytes: math.MaxUint64, ResidentBytes: math.MaxUint64, Blocks: math.MaxUint64,
			Pages: math.MaxUint64, InflightLoads: math.MaxUint64, StoreHealthy: true,
		},
		Counters: cluster.Counters{
			RequestsTotal: math.MaxUint64, ErrorsTotal: math.MaxUint64, HitsTotal: math.MaxUint64,
			MissesTotal: math.MaxUint64, BytesServedTotal: math.MaxUint64, BackendFetchesTotal: math.MaxUint64,
			BackendErrorsTotal: math.MaxUint64, EvictionsTotal: math.MaxUint64, PlacementLookupsTotal: math.MaxUint64,
			PlacementErrorsTotal: math.MaxUint64, StoreErrorsTotal: math.MaxUint64,
		},
		Labels: make(map[string]string, cluster.MaxLabels),
	}
	for i := range cluster.MaxLabels {
		key := fmt.Sprintf("k%02d", i) + strings.Repeat("k", cluster.MaxLabelKeyBytes-3)
		r.Labels[key] = strings.Repeat("v", cluster.MaxLabelValueBytes)
	}
	return r
}

// annotationBytes returns the bytes of Talon's annotations on the Lease of
// rec (keys and values, as Kubernetes counts them against its 256 KiB
// limit) and the protobuf size of the whole Lease as etcd stores it.
func annotationBytes(t testing.TB, rec *cluster.Record) (annotations, object int) {
	t.Helper()
	enc, err := cluster.Encode(rec)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	l, _ := buildLease(nil, LeaseName(rec.Key()), "talon", state.Change{Decision: cluster.DecisionInsert, Record: rec, Encoded: enc, TTL: 30 * time.Second}, time.Now())
	for k, v := range l.Annotations {
		annotations += len(k) + len(v)
	}
	return annotations, l.Size()
}

// TestAnnotationSize measures the annotations of a typical and a maximal
// record and checks them against the record and Kubernetes limits.
func TestAnnotationSize(t *testing.T) {
	for _, tc := range []struct {
		name string
		rec  *cluster.Record
	}{
		{"typical", typicalRecord("prod-eu-1", "worker-17")},
		{"maximal", maximalRecord(strings.Repeat("c", cluster.MaxIDBytes))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			enc, err := cluster.Encode(tc.rec)
			if err != nil {
				t.Fatal(err)
			}
			ann, obj := annotationBytes(t, tc.rec)
			t.Logf("%s record: status annotation %d bytes, all Talon annotations %d bytes, Lease object %d bytes (protobuf)", tc.name, len(enc), ann, obj)
			if len(enc) > cluster.MaxRecordBytes {
				t.Errorf("encoded record %d bytes exceeds %d", len(enc), cluster.MaxRecordBytes)
			}
			if ann > apivalidation.TotalAnnotationSizeLimitB {
				t.Errorf("annotations %d bytes exceed the Kubernetes limit %d", ann, apivalidation.TotalAnnotationSizeLimitB)
			}
		})
	}
}

// measureEnv enables TestMeasureLeaseUpdates. The measurement saturates
// the machine for a minute or more, so it does not run with the other tests.
const measureEnv = "TALON_KUBE_MEASURE"

// measureWorkers is the number of simulated workers, each with its own Lease.
const measureWorkers = 1000

// TestMeasureLeaseUpdates measures heartbeats (UpsertNode: one Lease GET
// and one UPDATE each, every one accepted) from 1,000 simulated workers
// against a local kube-apiserver with API Priority and Fairness on and the
// watch cache on, as in a real cluster, and its etcd, all on this machine's
// cores. Each worker has its own typical record (typicalRecord) and Lease.
// Phases:
//
//   - closed loop: every worker sends its next heartbeat as soon as the
//     last one returns (1,000 in flight), through one store with its rate
//     limiter off: what the server sustains at saturation;
//   - open loop: every worker heartbeats every interval (20 s, 10 s and
//     the ADR default of 5 s) at a random phase, through one store with the
//     default options: latency at a given offered load, all of it through
//     one coordinator.
//
// It reports throughput, p50/p99/max latency of successful heartbeats and
// failures by class, and asserts nothing about speed. Run:
//
//	TALON_KUBE_MEASURE=1 go test -run TestMeasureLeaseUpdates -v -timeout 30m ./internal/state/kube/
func TestMeasureLeaseUpdates(t *testing.T) {
	if os.Getenv(measureEnv) == "" {
		t.Skipf("measurement: set %s=1 to run it", measureEnv)
	}
	k := startKube(t, "--enable-priority-and-fairness=true")
	ns := k.namespace(t, "measure")
	c := k.applyRBAC(t, ns)
	clusterID := "measure-" + randomSuffix()
	seqs := make([]atomic.Uint64, measureWorkers)
	upsert := func(ctx context.Context, s *Store, w int) error {
		rec := typicalRecord(clusterID, fmt.Sprintf("worker-%04d", w))
		rec.HeartbeatSeq = seqs[w].Add(1)
		res, err := s.UpsertNode(ctx, rec, time.Hour)
		if err == nil && res.Outcome != state.OutcomeAccepted {
			err = fmt.Errorf("heartbeat %d of worker %d was %s", rec.HeartbeatSeq, w, res.Outcome)
		}
		return err
	}

	// Register every worker, 50 at a time.
	reg := k.newStore(t, c.token, ns, func(o *Options) { o.QPS, o.MaxInflightWrites = -1, -1 })
	var wg sync.WaitGroup
	sem := make(chan struct{}, 50)
	var regErr atomic.Pointer[error]
	for w := range measureWorkers {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := upsert(context.Background(), reg, w); err != nil {
				regErr.CompareAndSwap(nil, &err)
			}
		})
	}
	wg.Wait()
	if p := regErr.Load(); p != nil {
		t.Fatalf("register workers: %v", *p)
	}
	ann, obj := annotationBytes(t, typicalRecord(clusterID, "worker-0000"))
	t.Logf("%d workers registered; typical record: annotations %d bytes, Lease %d bytes", measureWorkers, ann, obj)

	closed := measurePhase(t, func(ctx context.Context, w int, s *Store, run func(func() error)) {
		for ctx.Err() == nil {
			run(func() error { return upsert(context.Background(), s, w) })
		}
	}, k.newStore(t, c.token, ns, func(o *Options) { o.QPS = -1; o.RequestTimeout = 30 * time.Second }), 20*time.Second)
	t.Logf("closed loop, %d in flight, client limiter off: %s", measureWorkers, closed)

	for _, interval := range []time.Duration{20 * time.Second, 10 * time.Second, 5 * time.Second} {
		// Let the server finish what the previous phase left in flight.
		time.Sleep(10 * time.Second)
		s := k.newStore(t, c.token, ns, nil)
		open := measurePhase(t, func(ctx context.Context, w int, s *Store, run func(func() error)) {
			phase := time.Duration(rand.Int64N(int64(interval)))
			if backoff.Sleep(ctx, phase) != nil {
				return
			}
			tick := time.NewTicker(interval)
			defer tick.Stop()
			for {
				run(func() error { return upsert(context.Background(), s, w) })
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
			}
		}, s, 40*time.Second)
		t.Logf("open loop, every worker every %s (%d heartbeats/s offered), default options (QPS %d, burst %d): %s",
			interval, int(float64(measureWorkers)/interval.Seconds()), DefaultQPS, DefaultBurst, open)
	}
}

// phaseResult is what one measurement phase saw.
type phaseResult struct {
	elapsed       time.Duration
	ok            int
	failures      map[string]int
	p50, p99, max time.Duration
	load          string // one-minute load average at the start and the end
}

func (r phaseResult) String() string {
	return fmt.Sprintf("%d heartbeats in %s = %.0f/s; latency p50 %s p99 %s max %s; failures %v; load average %s",
		r.ok, r.elapsed.Round(time.Millisecond), float64(r.ok)/r.elapsed.Seconds(),
		r.p50.Round(100*time.Microsecond), r.p99.Round(100*time.Microsecond), r.max.Round(100*time.Microsecond), r.failures, r.load)
}

// measurePhase runs worker for every simulated worker until d has passed
// and collects the latency of each heartbeat it makes through run. The
// context a worker gets ends at d: it starts no heartbeat after that, and
// those in flight finish under their own request timeout and count.
func measurePhase(t *testing.T, worker func(ctx context.Context, w int, s *Store, run func(func() error)), s *Store, d time.Duration) phaseResult {
	t.Helper()
	stop, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var (
		mu       sync.Mutex // guards lat and failures
		lat      []time.Duration
		failures = map[string]int{}
	)
	load := loadAverage()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range measureWorkers {
		wg.Go(func() {
			var mine []time.Duration
			worker(stop, w, s, func(call func() error) {
				t0 := time.Now()
				if err := call(); err != nil {
					mu.Lock()
					if failures[state.Code(err)] == 0 {
						t.Logf("first %s failure: %v", state.Code(err), err)
					}
					failures[state.Code(err)]++
					mu.Unlock()
					return
				}
				mine = append(mine, time.Since(t0))
			})
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	r := phaseResult{elapsed: time.Since(start), ok: len(lat), failures: failures, load: load + " -> " + loadAverage()}
	if len(lat) > 0 {
		slices.Sort(lat)
		r.p50 = lat[len(lat)/2]
		r.p99 = lat[min(len(lat)-1, len(lat)*99/100)]
		r.max = lat[len(lat)-1]
	}
	return r
}

// loadAverage returns the one-minute load average, for context: the
// server, etcd and the workers share the machine with whatever else runs.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}
