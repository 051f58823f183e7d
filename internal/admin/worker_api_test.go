package admin

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/worker/stats"
)

func TestWorkerStatus(t *testing.T) {
	st := stats.New()
	st.SetCapacity(1 << 30)
	st.Hit()
	st.Miss()
	st.Served(4096)
	e := startWorker(t, exposeAll(), st)
	waitFor(t, "an accepted heartbeat with a revision", func() bool {
		rec, rev := e.worker.LastAccepted()
		return rec != nil && rev != ""
	})

	r := e.get(t, apiv1.PathStatus)
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	var s apiv1.Status
	r.decode(t, &s)
	if s.SchemaVersion != apiv1.SchemaVersion || s.Revision == "" || s.Stale || s.GeneratedAtUnixMs == 0 || s.ObservedAtUnixMs != s.GeneratedAtUnixMs {
		t.Fatalf("meta %+v", s.Meta)
	}
	if s.NodeID != "w-real" || s.Role != "worker" || s.IncarnationID != e.worker.Incarnation() || s.DataAddress != e.worker.DataAddress() ||
		!s.Registered || !s.Ready || len(s.Reasons) != 0 {
		t.Fatalf("status %+v", s)
	}
	n := s.Node
	if n == nil || n.NodeID != "w-real" || n.ClusterID != clusterID || n.IncarnationID != s.IncarnationID || n.Address != s.DataAddress ||
		n.Health != "healthy" || !n.Ready || n.Labels["zone"] != "z1" || n.UpdatedAtUnixMs == 0 || n.StartTimeUnixMs == 0 || n.HeartbeatAgeMs < 0 {
		t.Fatalf("node %+v", n)
	}
	if s.Current == nil || s.Current.Capacity.CapacityBytes != 1<<30 || s.Current.Counters.HitsTotal != 1 ||
		s.Current.Counters.MissesTotal != 1 || s.Current.Counters.BytesServedTotal != 4096 {
		t.Fatalf("current %+v", s.Current)
	}
	// The record the worker reports is the one the coordinators hold.
	snapRec := func() string {
		snap, err := e.store.Snapshot(context.Background(), clusterID)
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range snap.Records {
			if rec.NodeID == "w-real" {
				return rec.IncarnationID
			}
		}
		return ""
	}
	if snapRec() != s.IncarnationID {
		t.Fatalf("store holds incarnation %q, status says %q", snapRec(), s.IncarnationID)
	}
	var raw map[string]json.RawMessage
	r.decode(t, &raw)
	for _, f := range []string{"schemaVersion", "generatedAtUnixMs", "revision", "nodeId", "incarnationId", "ready", "reasons", "node", "current"} {
		if _, ok := raw[f]; !ok {
			t.Errorf("status JSON has no %q", f)
		}
	}

	if r := e.get(t, apiv1.PathReadyz); r.status != http.StatusOK {
		t.Fatalf("worker readyz: %d %s", r.status, r.body)
	}
	// Coordinator resources are not served by a worker.
	for _, p := range []string{apiv1.PathCluster, apiv1.PathNodes, apiv1.PathNodes + "/w-real", apiv1.PathPlacement + "?key=k", "/"} {
		if r := e.get(t, p); r.status != http.StatusNotFound {
			t.Fatalf("%s on a worker: %d", p, r.status)
		}
	}
	c, err := apiv1.NewClient([]string{e.url}, apiv1.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := c.Status(context.Background())
	if err != nil || cs.NodeID != "w-real" {
		t.Fatalf("client Status: %+v, %v", cs, err)
	}
}

func TestWorkerStatusWithoutUsage(t *testing.T) {
	e := startWorker(t, exposeAll(), nil)
	r := e.get(t, apiv1.PathStatus)
	var s apiv1.Status
	r.decode(t, &s)
	if r.status != 200 || s.Current != nil || !strings.Contains(string(r.body), `"current":null`) {
		t.Fatalf("%d %s", r.status, r.body)
	}
}

// TestServeLifecycle serves on a real listener: connections are counted on
// the admin listener gauge, and Serve returns nil once ctx ends, with the
// listener closed and no goroutine left (goleak in TestMain).
func TestServeLifecycle(t *testing.T) {
	e := startCoordinator(t, envOptions{admin: exposeAll()})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.srv.Serve(ctx, ln) }()
	base := "http://" + ln.Addr().String()
	hc := &http.Client{Transport: &http.Transport{}}
	r := doURL(t, hc, http.MethodGet, base+apiv1.PathCluster, "")
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	gauge := func() float64 {
		fams, err := e.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			if f.GetName() != "talon_active_connections" {
				continue
			}
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "listener" && l.GetValue() == "admin" {
						return m.GetGauge().GetValue()
					}
				}
			}
		}
		return -1
	}
	if g := gauge(); g != 1 {
		t.Fatalf("admin connections = %v with one keep-alive connection open", g)
	}
	hc.CloseIdleConnections()
	waitFor(t, "connection closed", func() bool { return gauge() == 0 })

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after ctx ended")
	}
	if _, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		t.Fatal("listener still accepts after Serve returned")
	}
}
