package state_test

import (
	"fmt"
	"testing"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

// heartbeatRecord is a worker record of about 1.5 KiB encoded: every
// field set and 16 labels, the size the performance figures assume.
func heartbeatRecord() *cluster.Record {
	r := &cluster.Record{
		ClusterID:       "prod",
		NodeID:          "worker-0042",
		Role:            cluster.RoleWorker,
		IncarnationID:   cluster.NewIncarnationID(),
		Address:         "10.12.34.56:7500",
		AdminAddress:    "10.12.34.56:7501",
		Version:         "v1.4.2",
		StartTimeUnixMs: 1_700_000_000_000,
		HeartbeatSeq:    12345,
		Health:          cluster.HealthHealthy,
		Ready:           true,
		Capacity:        cluster.Capacity{CapacityBytes: 1 << 40, ResidentBytes: 1 << 39, Blocks: 123456},
		Counters:        cluster.Counters{RequestsTotal: 1 << 33, HitsTotal: 1 << 32, MissesTotal: 1 << 31, BytesServedTotal: 1 << 50},
		Labels:          map[string]string{},
	}
	for i := range cluster.MaxLabels {
		r.Labels[fmt.Sprintf("topology.talon.io/label-%02d", i)] = fmt.Sprintf("value-%02d-eu-west-1a-rack-17", i)
	}
	return r
}

// BenchmarkHeartbeatCodec measures the record work one heartbeat costs on
// each side, excluding the frame and the store round trips: the worker
// encodes its record once; a coordinator on etcd or Kubernetes decodes the
// payload, validates it, stamps it and encodes what it stores.
func BenchmarkHeartbeatCodec(b *testing.B) {
	rec := heartbeatRecord()
	payload, err := cluster.Encode(rec)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("worker", func(b *testing.B) {
		b.SetBytes(int64(len(payload)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := cluster.Encode(rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("coordinator", func(b *testing.B) {
		b.SetBytes(int64(len(payload)))
		b.ReportAllocs()
		for b.Loop() {
			r, err := cluster.Decode(payload)
			if err != nil {
				b.Fatal(err)
			}
			if err := state.ValidateRecord(r); err != nil {
				b.Fatal(err)
			}
			r.UpdatedAtUnixMs++
			if _, err := cluster.Encode(r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
