package bench

import "github.com/talonhq/talon/internal/cluster"

// Record returns a typical worker record, about 1.5 KB encoded
// (RecordBytes; the size the raw ceilings were measured with): a
// restarted worker with a dozen Kubernetes-style labels. Every phase writes
// it, so raw and Talon figures move the same bytes.
func Record(clusterID, node string, seq uint64) *cluster.Record {
	return &cluster.Record{
		ClusterID: clusterID, NodeID: node, Role: cluster.RoleWorker, IncarnationID: "0f8e5c1a-6b7d-4c1e-9a53-" + node,
		Address: "10.42.17.203:7500", AdminAddress: "10.42.17.203:7501", Version: "v1.4.2 (go1.26.8, linux/amd64, commit 3f2c9ab1e7d04c55, built 2026-11-30T08:12:44Z)",
		StartTimeUnixMs: 1_784_800_000_000, HeartbeatSeq: seq, Health: cluster.HealthHealthy, Ready: true,
		Capacity: cluster.Capacity{CapacityBytes: 2 << 40, ResidentBytes: 1_873_412_300_800, Blocks: 447_000, Pages: 114_000_000, InflightLoads: 12},
		Counters: cluster.Counters{RequestsTotal: 9_812_345_678, ErrorsTotal: 1_234, HitsTotal: 8_700_000_000, MissesTotal: 1_112_345_678,
			BytesServedTotal: 431_000_000_000_000, BackendFetchesTotal: 1_112_345_678, BackendErrorsTotal: 17, EvictionsTotal: 98_000_000},
		Labels: map[string]string{"region": "eu-west-1", "zone": "eu-west-1b", "pod": "talon-worker-7d9f8b6c5-x2x9q",
			"host": "ip-10-42-17-203.eu-west-1.compute.internal", "rack": "r17", "pool": "nvme-large",
			"node.kubernetes.io/instance-type": "i4i.4xlarge", "topology.kubernetes.io/zone": "eu-west-1b",
			"app.kubernetes.io/version": "v1.4.2", "talon.io/disk": "nvme0n1,nvme1n1,nvme2n1,nvme3n1",
			"talon.io/blob-store": "s3://acme-prod-blobs-eu-west-1/talon/cache-tier-a", "talon.io/owner": "team-storage-platform",
			"talon.io/cache-dir": "/var/lib/talon/cache"},
		// A worker that has restarted: the incarnations it replaced.
		Superseded: []string{"5d2f9a7e-3c1b-4e8a-b6d4-" + node, "9b7c3e1f-0a2d-4f6b-8e5c-" + node},
		Generation: 3,
		// A worker of this build: a simulated worker of level 0 would hold
		// the cluster at the level before renewals (every heartbeat a write).
		FeatureLevel: cluster.BuildLevel,
	}
}

// RecordBytes returns the encoded size of Record, as stored by both phases.
func RecordBytes() int {
	b, err := cluster.Encode(Record("bench", "worker-00000", 1))
	if err != nil {
		return 0
	}
	return len(b)
}
