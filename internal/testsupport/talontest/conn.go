package talontest

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/bench"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/protocol"
	"github.com/talonhq/talon/internal/state/kube"
)

// Default timing, per hour, that the compressed phases are scaled to
// (issue 36): a worker heartbeats every 5 s and writes its status every
// minute; a kubelet renews its node Lease every 10 s.
const (
	HbPerHour      = 3600 / 5
	StatusEvery    = 12 // 1 m / 5 s
	KubeletPerHour = 3600 / 10
	// StoreBytesNodes workers (and kubelets) write in each phase, each
	// storeBytesBeats times (ten minutes of default timing).
	StoreBytesNodes = 10
	StoreBytesBeats = 120
	KubeletBeats    = 60
)

// HeartbeatRecord is worker w's record at seq, its counters moving as a
// serving worker's do.
func HeartbeatRecord(clusterID string, w int, seq uint64) *cluster.Record {
	r := bench.Record(clusterID, fmt.Sprintf("worker-%02d", w), seq)
	r.Counters.RequestsTotal += seq * 1000
	r.Counters.HitsTotal += seq * 900
	r.Counters.BytesServedTotal += seq << 30
	r.Capacity.ResidentBytes += seq << 20
	return r
}

// Register registers StoreBytesNodes workers of clusterID on s.
func Register(t *testing.T, s *kube.Store, clusterID string) {
	t.Helper()
	for w := range StoreBytesNodes {
		if _, err := s.UpsertNode(context.Background(), HeartbeatRecord(clusterID, w, 0), 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}
}

// Conn is a raw control-protocol connection to one coordinator.
func Conn(t *testing.T, addr string) *protocol.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c := protocol.NewConn(nc, protocol.ConnOptions{})
	t.Cleanup(func() { c.Close() })
	return c
}

// SimRecord is the record of the simulated worker w-sim at heartbeat seq.
func SimRecord(seq uint64) *cluster.Record {
	return &cluster.Record{
		ClusterID: "it", NodeID: "w-sim", Role: cluster.RoleWorker, IncarnationID: "sim-1",
		Address: "127.0.0.1:9", Version: "sim", StartTimeUnixMs: 1, HeartbeatSeq: seq,
		Health: cluster.HealthHealthy, Ready: true, FeatureLevel: cluster.BuildLevel,
	}
}

// Send sends the simulated worker's record: a Register at seq 0 (its
// first message), a Heartbeat after.
func Send(t *testing.T, c *protocol.Conn, seq uint64) protocol.Outcome {
	var msg protocol.Message
	var err error
	if seq == 0 {
		msg, err = protocol.NewRegister(SimRecord(seq))
	} else {
		msg, err = protocol.NewHeartbeat(SimRecord(seq))
	}
	if err != nil {
		t.Error(err)
		return 0
	}
	resp, err := c.Call(context.Background(), msg)
	if err != nil {
		t.Errorf("heartbeat %d: %v", seq, err)
		return 0
	}
	return resp.(*protocol.Ack).Outcome
}
