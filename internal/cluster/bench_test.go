package cluster

import (
	"fmt"
	"testing"
)

// heartbeatRecord is a typical worker record, about 1.5 KB encoded: the
// record the issue 18 report measures (bench.Record), with the per-worker
// pod, host and incarnation strings a real worker would have.
func heartbeatRecord(worker int, seq uint64) *Record {
	node := fmt.Sprintf("hb-%05d", worker)
	return &Record{
		ClusterID: "bench", NodeID: node, Role: RoleWorker, IncarnationID: "0f8e5c1a-6b7d-4c1e-9a53-" + node,
		Address: "10.42.17.203:7500", AdminAddress: "10.42.17.203:7501", Version: "v1.4.2 (go1.26.8, linux/amd64, commit 3f2c9ab1e7d04c55, built 2026-11-30T08:12:44Z)",
		StartTimeUnixMs: 1_784_800_000_000, HeartbeatSeq: seq, Health: HealthHealthy, Ready: true,
		Capacity: Capacity{CapacityBytes: 2 << 40, ResidentBytes: 1_873_412_300_800, Blocks: 447_000, Pages: 114_000_000, InflightLoads: 12},
		Counters: Counters{RequestsTotal: 9_812_345_678, ErrorsTotal: 1_234, HitsTotal: 8_700_000_000, MissesTotal: 1_112_345_678,
			BytesServedTotal: 431_000_000_000_000, BackendFetchesTotal: 1_112_345_678, BackendErrorsTotal: 17, EvictionsTotal: 98_000_000},
		Labels: map[string]string{"region": "eu-west-1", "zone": "eu-west-1b", "pod": fmt.Sprintf("talon-worker-7d9f8b6c5-%05d", worker),
			"host": fmt.Sprintf("ip-10-42-%d-%d.eu-west-1.compute.internal", worker/250, worker%250), "rack": "r17", "pool": "nvme-large",
			"node.kubernetes.io/instance-type": "i4i.4xlarge", "topology.kubernetes.io/zone": "eu-west-1b",
			"app.kubernetes.io/version": "v1.4.2", "talon.io/disk": "nvme0n1,nvme1n1,nvme2n1,nvme3n1",
			"talon.io/blob-store": "s3://acme-prod-blobs-eu-west-1/talon/cache-tier-a", "talon.io/owner": "team-storage-platform",
			"talon.io/cache-dir": "/var/lib/talon/cache"},
		Superseded: []string{"5d2f9a7e-3c1b-4e8a-b6d4-" + node, "9b7c3e1f-0a2d-4f6b-8e5c-" + node},
		Generation: 3,
	}
}

// heartbeatPayloads returns the encoded records of n workers. The
// benchmarks cycle through them, as a coordinator serving many workers
// does, so that no cache in the decoder sees the same strings every time.
func heartbeatPayloads(b *testing.B, n int) [][]byte {
	payloads := make([][]byte, n)
	for w := range payloads {
		p, err := Encode(heartbeatRecord(w, 1))
		if err != nil {
			b.Fatal(err)
		}
		payloads[w] = p
	}
	return payloads
}

// BenchmarkCodecHeartbeat measures the record work of one heartbeat on the
// coordinator: decode and validate the payload (protocol.DecodeRecordPayload
// is cluster.Decode) and encode the stored form (state.EncodeRecord is
// cluster.Encode). The goal (issue 30) is at most 5 µs and 10 allocations
// per heartbeat.
func BenchmarkCodecHeartbeat(b *testing.B) {
	payloads := heartbeatPayloads(b, 4096)
	b.SetBytes(int64(len(payloads[0])))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r, err := Decode(payloads[i%len(payloads)])
		if err != nil {
			b.Fatal(err)
		}
		r.UpdatedAtUnixMs++
		if _, err := Encode(r); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkCodec measures each half of the heartbeat path alone.
func BenchmarkCodec(b *testing.B) {
	rec := heartbeatRecord(1, 1)
	payloads := heartbeatPayloads(b, 4096)
	payload := payloads[1]
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(payload)))
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := Decode(payloads[i%len(payloads)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("encode", func(b *testing.B) {
		b.SetBytes(int64(len(payload)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Encode(rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("validate", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := rec.ValidateFields(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
