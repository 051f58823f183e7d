package memory_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/state/memory"
)

var benchSizes = []int{1_000, 10_000}

// benchRecord is a worker record of realistic size (about 600 bytes encoded).
func benchRecord(i int, seq uint64) *cluster.Record {
	return &cluster.Record{
		ClusterID:       "bench",
		NodeID:          fmt.Sprintf("worker-%05d", i),
		Role:            cluster.RoleWorker,
		IncarnationID:   "5f0c7f2e-3c1a-4d2b-9a7e-0e6b1c2d3e4f",
		Address:         fmt.Sprintf("10.0.%d.%d:7070", i/250, i%250+1),
		AdminAddress:    fmt.Sprintf("10.0.%d.%d:9090", i/250, i%250+1),
		Version:         "v1.4.2",
		StartTimeUnixMs: 1_784_800_000_000,
		HeartbeatSeq:    seq,
		Health:          cluster.HealthHealthy,
		Ready:           true,
		Capacity:        cluster.Capacity{CapacityBytes: 1 << 40, ResidentBytes: seq << 20, Blocks: seq, Pages: seq * 16},
		Counters:        cluster.Counters{RequestsTotal: seq * 100, HitsTotal: seq * 90, MissesTotal: seq * 10},
		Labels:          map[string]string{"region": "eu-west-1", "zone": "eu-west-1a", "host": fmt.Sprintf("host-%d", i)},
	}
}

// benchStore returns a store holding n worker records.
func benchStore(b *testing.B, n int) *memory.Store {
	b.Helper()
	s := memory.New(memory.Options{})
	b.Cleanup(func() { _ = s.Close() })
	for i := range n {
		if _, err := s.UpsertNode(context.Background(), benchRecord(i, 1), time.Hour); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// BenchmarkUpsert measures accepted heartbeats (DecisionAdvance) against a
// store of n records, round robin over the records.
func BenchmarkUpsert(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			s := benchStore(b, n)
			recs := make([]*cluster.Record, n)
			for i := range recs {
				recs[i] = benchRecord(i, 1)
			}
			ctx := context.Background()
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				r := recs[i%n]
				r.HeartbeatSeq++
				res, err := s.UpsertNode(ctx, r, time.Hour)
				if err != nil || res.Outcome != state.OutcomeAccepted {
					b.Fatalf("upsert: %v %v", res.Outcome, err)
				}
				i++
			}
		})
	}
}

// BenchmarkUpsertParallel measures heartbeats from GOMAXPROCS goroutines.
// Sequences come from one counter, so some writes lose the race and are
// stale: that is the contended path a shared store sees.
func BenchmarkUpsertParallel(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			s := benchStore(b, n)
			var seq, next atomic.Uint64
			seq.Store(1)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer() // exclude filling the store
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := int(next.Add(1)) % n
					if _, err := s.UpsertNode(ctx, benchRecord(i, seq.Add(1)), time.Hour); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkSnapshot measures a full snapshot of n records with no write
// between snapshots, and with one accepted heartbeat before each snapshot.
func BenchmarkSnapshot(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			s := benchStore(b, n)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				snap, err := s.Snapshot(ctx, "bench")
				if err != nil || len(snap.Records) != n {
					b.Fatalf("snapshot: %v", err)
				}
			}
		})
		b.Run(fmt.Sprintf("records=%d/with-writes", n), func(b *testing.B) {
			s := benchStore(b, n)
			ctx := context.Background()
			r := benchRecord(n/2, 1)
			b.ReportAllocs()
			for b.Loop() {
				r.HeartbeatSeq++
				if _, err := s.UpsertNode(ctx, r, time.Hour); err != nil {
					b.Fatal(err)
				}
				snap, err := s.Snapshot(ctx, "bench")
				if err != nil || len(snap.Records) != n {
					b.Fatalf("snapshot: %v", err)
				}
			}
		})
	}
}

// BenchmarkSnapshotParallel measures concurrent readers of 10,000 records.
func BenchmarkSnapshotParallel(b *testing.B) {
	s := benchStore(b, 10_000)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer() // exclude filling the store
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Snapshot(ctx, "bench"); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
