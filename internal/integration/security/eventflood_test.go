package security

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/pki"
	"github.com/talonhq/talon/internal/protocol"
	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// TestEventFloodKeepsOperatorEvents is issue 47's event flood on real
// processes: two coordinators on a 3-member etcd with mutual TLS, a real
// worker, and three worker credentials that re-register for two minutes
// as fast as the coordinators take them (a new incarnation, address and
// readiness each time: joins, restarts, readiness changes and
// PlacementVersion changes), far more events than the shared log keeps.
// Meanwhile an operator cordons and uncordons the real worker three times
// and one flooding credential is deny-listed. At the end the durable log
// (read from etcd) and both coordinators' /api/v1/events must still list
// every cordon, uncordon and revocation. Before issue 47 the flood evicted
// them from the 1,000-event log in about 50 s.
func TestEventFloodKeepsOperatorEvents(t *testing.T) {
	talontest.SkipShort(t)
	dir := t.TempDir()
	tokens, deny := filepath.Join(dir, "admin-tokens"), filepath.Join(dir, "deny")
	if err := os.WriteFile(tokens, []byte("ops:read,operate,metrics:"+talontest.OpsToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(deny, []byte("# revoked\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := talontest.NewEtcdCluster(t, talontest.FastTiming, 2)
	c.CoordExtra = []string{"--admin-token-file", tokens, "--tls-deny-file", deny}
	a, b := c.Coordinator("coord-a"), c.Coordinator("coord-b")
	testsupport.WaitFor(t, 60*time.Second, "two coordinators ready", func() bool { return talontest.Ready(t, a) && talontest.Ready(t, b) })
	c.Worker("w-target", []string{a.Addr, b.Addr}, talontest.LiveTiming{})
	testsupport.WaitFor(t, 60*time.Second, "w-target eligible on both coordinators", func() bool {
		for _, p := range []*talontest.Proc{a, b} {
			cl, err := talontest.OpsAPI(t, p).Cluster(context.Background())
			if err != nil || cl.EligibleWorkers != 1 {
				return false
			}
		}
		return true
	})

	const flooders, floodFor = 3, 2 * time.Minute
	type tally struct {
		mu       sync.Mutex
		attempts int
		byCode   map[string]int
	}
	tl := tally{byCode: map[string]int{}}
	ctx, cancel := context.WithTimeout(context.Background(), floodFor)
	defer cancel()
	var wg sync.WaitGroup
	for i := 1; i <= flooders; i++ {
		src := c.PKI.Source(t, pki.RoleWorker, fmt.Sprintf("flood-%d", i))
		wg.Go(func() { floodRegistrations(ctx, t, src, []string{a.Addr, b.Addr}, i, &tl.mu, &tl.attempts, tl.byCode) })
	}
	post := func(path string) {
		t.Helper()
		if code, body := talontest.Post(t, a, path, talontest.OpsToken, http.Header{"X-Talon-Request": {"1"}}); code != 200 {
			t.Errorf("POST %s: %d %s", path, code, body)
		}
	}
	start := time.Now()
	for round := range 3 {
		time.Sleep(time.Until(start.Add(time.Duration(10+20*round) * time.Second)))
		post("/api/v1/nodes/w-target/cordon")
		time.Sleep(3 * time.Second)
		post("/api/v1/nodes/w-target/uncordon")
	}
	time.Sleep(time.Until(start.Add(75 * time.Second)))
	if err := os.WriteFile(deny, []byte("# revoked\nworker/flood-3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wg.Wait()

	// The durable log, read from etcd itself.
	resp, err := c.EtcdClient.Get(context.Background(), "/talon/events/it/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	stored := map[state.NodeEventType]int{}
	for _, kv := range resp.Kvs {
		var ev state.NodeEvent
		if json.Unmarshal(kv.Value, &ev) == nil {
			stored[ev.Type]++
		}
	}
	want := map[state.NodeEventType]int{state.EventNodeCordoned: 3, state.EventNodeUncordoned: 3, state.EventNodeRevoked: 1}
	tl.mu.Lock()
	t.Logf("flood of %s from %d worker credentials: %d registrations, answers %v | durable log: %d events %v", floodFor, flooders, tl.attempts, tl.byCode, len(resp.Kvs), stored)
	tl.mu.Unlock()
	if len(resp.Kvs) < state.DefaultEventMax*9/10 {
		t.Errorf("the flood left %d events in the durable log: it did not fill it (want about %d), so the test proves nothing", len(resp.Kvs), state.DefaultEventMax)
	}
	for typ, n := range want {
		if stored[typ] < n {
			t.Errorf("durable log: %d %s events after the flood, want at least %d", stored[typ], typ, n)
		}
	}
	for _, p := range []*talontest.Proc{a, b} {
		l, err := talontest.OpsAPI(t, p).Events(context.Background(), apiv1.EventFilter{Types: []string{"node_cordoned", "node_uncordoned", "node_revoked"}, Limit: 1000})
		if err != nil {
			t.Fatalf("%s events: %v", p.Name, err)
		}
		got := map[string]int{}
		for _, ev := range l.Items {
			got[ev.Type]++
		}
		t.Logf("%s lists %v", p.Name, got)
		for typ, n := range want {
			if got[string(typ)] < n {
				t.Errorf("%s lists %d %s events after the flood, want at least %d", p.Name, got[string(typ)], typ, n)
			}
		}
	}
}

// floodRegistrations re-registers worker flood-<i> with a new incarnation, address and
// readiness as fast as the coordinators answer until ctx ends, counting
// every answer by code.
func floodRegistrations(ctx context.Context, t *testing.T, src *pki.Source, addrs []string, i int, mu *sync.Mutex, attempts *int, byCode map[string]int) {
	var cn *protocol.Conn
	for n := 0; ctx.Err() == nil; n++ {
		if cn == nil {
			nc, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addrs[n%len(addrs)], src.ClientConfig(pki.Expect{Roles: []pki.Role{pki.RoleCoordinator}}))
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			cn = protocol.NewConn(nc, protocol.ConnOptions{})
		}
		rec := &cluster.Record{ClusterID: "it", NodeID: fmt.Sprintf("flood-%d", i), Role: cluster.RoleWorker, IncarnationID: fmt.Sprintf("flood-%d-%d", i, n),
			Address: fmt.Sprintf("127.0.0.1:%d", 20000+n%20000), Version: "flood", StartTimeUnixMs: time.Now().UnixMilli(),
			Health: cluster.HealthHealthy, Ready: n%2 == 0, FeatureLevel: cluster.BuildLevel}
		msg, err := protocol.NewRegister(rec)
		if err != nil {
			t.Error(err)
			return
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		resp, err := cn.Call(cctx, msg)
		cancel()
		code := "ok"
		switch r := resp.(type) {
		case *protocol.Ack:
			code = r.Outcome.String()
		case *protocol.Error:
			code = r.Code.String()
		}
		var perr *protocol.Error
		switch {
		case errors.As(err, &perr):
			code = perr.Code.String()
		case err != nil:
			code = "conn_error"
			cn.Close()
			cn = nil
		}
		mu.Lock()
		*attempts++
		byCode[code]++
		mu.Unlock()
	}
	if cn != nil {
		cn.Close()
	}
}
