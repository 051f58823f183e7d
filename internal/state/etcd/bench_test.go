package etcd

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/testenv"
)

// Benchmarks run against a real etcd from testenv (single member on
// loopback, --unsafe-no-fsync), sharing the machine with it. Run them with
//
//	go test ./internal/state/etcd -run '^$' -bench . -benchtime 5000x
//
// They report throughput and latency percentiles; they assert nothing
// about speed.

// reportLatencies adds p50 and p99 of ds, in milliseconds.
func reportLatencies(b *testing.B, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	at := func(q float64) float64 {
		i := int(q * float64(len(ds)-1))
		return float64(ds[i]) / float64(time.Millisecond)
	}
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
}

// seedWorkers inserts n worker records through s, 64 at a time.
func seedWorkers(b *testing.B, s *Store, cid string, n int, ttl time.Duration) {
	b.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	var failed atomic.Value
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if _, err := s.UpsertNode(ctx, record(cid, cluster.RoleWorker, fmt.Sprintf("w%05d", i), "inc", 1), ttl); err != nil {
				failed.Store(err)
			}
		})
	}
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		b.Fatalf("seed: %v", err)
	}
}

// BenchmarkHeartbeats measures accepted heartbeats per second from 1,000
// simulated workers, each a goroutine sending its own increasing sequence
// back to back (no heartbeat interval: the store is saturated), through two
// coordinators (two stores). With route=sticky each worker always reaches
// the same coordinator; with route=alternate its heartbeats alternate
// between them, as through a load balancer, and back to back a coordinator
// has often not yet seen the other's last write (a compare fails, costing
// one more transaction). With interval=1s each worker waits a second
// (jittered) between heartbeats: 1,000 heartbeats/s offered, the steady
// state with heartbeats alternating between coordinators, where each
// coordinator's cache has seen the other's write. b.N is the total number
// of heartbeats.
func BenchmarkHeartbeats(b *testing.B) {
	testenv.SkipIfShort(b)
	e := testenv.StartEtcd(b, testenv.EtcdOptions{})
	const workers = 1000
	for _, c := range []struct {
		route    string
		cache    bool
		interval time.Duration
	}{
		{"sticky", true, 0}, {"sticky", false, 0}, {"alternate", true, 0}, {"alternate", false, 0},
		{"alternate", true, time.Second}, {"alternate", false, time.Second},
	} {
		cache, interval := c.cache, c.interval
		alternate := 0
		if c.route == "alternate" {
			alternate = 1
		}
		name := fmt.Sprintf("workers=%d/route=%s/cache=%t", workers, c.route, cache)
		if interval > 0 {
			name += fmt.Sprintf("/interval=%s", interval)
		}
		b.Run(name, func(b *testing.B) {
			// Saturated on purpose: queueing, not etcd, sets the latency, so
			// give requests more than the default 5s.
			o := optionsFor(e, cache)
			o.RequestTimeout = time.Minute
			stores := []*Store{newStore(b, o), newStore(b, o)}
			cid := uniqueCluster(b)
			seedWorkers(b, stores[0], cid, workers, time.Minute)
			if cache {
				for _, s := range stores {
					waitCacheReady(b, s)
				}
			}
			before := [2]Stats{stores[0].Stats(), stores[1].Stats()}

			var remaining atomic.Int64
			remaining.Store(int64(b.N))
			lat := make([][]time.Duration, workers)
			var errs atomic.Int64
			var firstErr atomic.Value
			var accepted atomic.Int64
			ctx := context.Background()
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for w := range workers {
				wg.Go(func() {
					node := fmt.Sprintf("w%05d", w)
					seq := uint64(1)
					for i := 0; remaining.Add(-1) >= 0; i++ {
						if interval > 0 {
							time.Sleep(interval/2 + rand.N(interval))
						}
						seq++
						t0 := time.Now()
						res, err := stores[(w+alternate*i)%2].UpsertNode(ctx, record(cid, cluster.RoleWorker, node, "inc", seq), time.Minute)
						lat[w] = append(lat[w], time.Since(t0))
						switch {
						case err != nil:
							errs.Add(1)
							firstErr.CompareAndSwap(nil, err)
						case res.Decision.Accepted():
							accepted.Add(1)
						}
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			// Saturating etcd on a small machine can make it shed requests
			// ("request timed out, waiting for the applied index"): count
			// them rather than throw the run away.
			if n := errs.Load(); n > 0 {
				b.Logf("%d of %d heartbeats failed, the first with: %v", n, b.N, firstErr.Load())
				if n == int64(b.N) {
					b.Fatal("every heartbeat failed")
				}
			}
			b.ReportMetric(float64(errs.Load()), "failed")
			b.ReportMetric(float64(accepted.Load())/elapsed.Seconds(), "accepted/s")
			reportLatencies(b, slices.Concat(lat...))
			var grants, conflicts, keepAlives uint64
			for i, s := range stores {
				st := s.Stats()
				grants += st.LeaseGrants - before[i].LeaseGrants
				conflicts += st.WriteConflicts - before[i].WriteConflicts
				keepAlives += st.LeaseKeepAlives - before[i].LeaseKeepAlives
			}
			b.ReportMetric(float64(grants), "grants")
			b.ReportMetric(float64(conflicts)/float64(b.N), "conflicts/op")
			b.ReportMetric(float64(keepAlives)/float64(b.N), "keepalives/op")
		})
	}
}

// BenchmarkSnapshot measures Snapshot latency (p50, p99) of a cluster of
// 1,000 and 5,000 records, from the watch-fed cache and by a prefix range
// read, on a quiet store and while 1,000 workers heartbeat every 5s (200
// accepted writes/s through another store).
func BenchmarkSnapshot(b *testing.B) {
	testenv.SkipIfShort(b)
	e := testenv.StartEtcd(b, testenv.EtcdOptions{})
	seeder := newStore(b, optionsFor(e, false))
	clusters := map[int]string{}
	for _, n := range []int{1000, 5000} {
		clusters[n] = uniqueCluster(b) + fmt.Sprint(n)
		seedWorkers(b, seeder, clusters[n], n, 10*time.Minute)
	}
	for _, load := range []bool{false, true} {
		for _, n := range []int{1000, 5000} {
			for _, cache := range []bool{true, false} {
				name := fmt.Sprintf("records=%d/cache=%t/load=%t", n, cache, load)
				b.Run(name, func(b *testing.B) {
					s := newStore(b, optionsFor(e, cache))
					if cache {
						waitCacheReady(b, s)
					}
					cid := clusters[n]
					ctx := context.Background()
					stop := func() {}
					if load {
						stop = heartbeatLoad(b, seeder, cid, 1000, 200)
					}
					defer stop()
					if _, err := s.Snapshot(ctx, cid); err != nil { // warm
						b.Fatal(err)
					}
					lat := make([]time.Duration, 0, b.N)
					b.ResetTimer()
					for range b.N {
						t0 := time.Now()
						snap, err := s.Snapshot(ctx, cid)
						lat = append(lat, time.Since(t0))
						if err != nil {
							b.Fatal(err)
						}
						if len(snap.Records) != n {
							b.Fatalf("snapshot holds %d records, want %d", len(snap.Records), n)
						}
					}
					b.StopTimer()
					reportLatencies(b, lat)
					st := s.Stats()
					if cache && st.RangeSnapshots != 0 || !cache && st.CacheSnapshots != 0 {
						b.Fatalf("snapshots took the other path: %+v", st)
					}
				})
			}
		}
	}
}

// heartbeatLoad heartbeats the first workers of cid through s at rate per
// second until the returned function is called.
func heartbeatLoad(b *testing.B, s *Store, cid string, workers, rate int) func() {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			w, seq := i%workers, uint64(2+i/workers)
			wg.Go(func() {
				_, _ = s.UpsertNode(ctx, record(cid, cluster.RoleWorker, fmt.Sprintf("w%05d", w), "inc", seq), 10*time.Minute)
			})
		}
	})
	return func() {
		cancel()
		wg.Wait()
	}
}
