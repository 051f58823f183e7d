package ops

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/bench"
	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/protocol"
	"github.com/talonhq/talon/internal/state/etcd"
	"github.com/talonhq/talon/internal/testenv"
	"github.com/talonhq/talon/internal/testsupport/coordtest"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// storeBytes is what etcd took per worker per hour in one run.
type storeBytes struct {
	received, dbGrowth, revisions float64 // per worker per hour
	workers                       int
	d                             time.Duration
}

// TestStoreBytesEtcd measures what heartbeats at the default timing
// (heartbeat 5 s, unhealthy 15 s, lease 30 s) cost a stock etcd, per worker
// per hour, by etcd's own figures (the gRPC bytes it received, the growth
// of its database in use, its revisions), with every heartbeat writing the
// record (status-interval 0: the behaviour before issue 36) and with
// renewals (status-interval 1m), side by side in one run on two etcd
// servers. Simulated workers send the typical record, with counters that
// move at every heartbeat, through one coordinator each. Issue 36 asks for
// at most a tenth of the old cost, which the test asserts (bytes, not
// speed). TALON_STORE_BYTES_MINUTES sets the run (default 2).
func TestStoreBytesEtcd(t *testing.T) {
	talontest.SkipShort(t)
	d := 2 * time.Minute
	if v := os.Getenv("TALON_STORE_BYTES_MINUTES"); v != "" {
		m, err := strconv.ParseFloat(v, 64)
		if err != nil || m <= 0 {
			t.Fatalf("TALON_STORE_BYTES_MINUTES=%q: want a positive number of minutes", v)
		}
		d = time.Duration(m * float64(time.Minute))
	}
	const workers = 60
	var before, after, pair storeBytes
	var wg sync.WaitGroup
	for _, run := range []struct {
		out          *storeBytes
		status       time.Duration
		coordinators int
	}{{&before, 0, 1}, {&after, cluster.DefaultStatusInterval, 1}, {&pair, cluster.DefaultStatusInterval, 2}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			*run.out = measureEtcdHeartbeats(t, workers, d, run.status, run.coordinators)
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	t.Logf("etcd, per worker per hour at heartbeat 5s (%d workers, %s each, one coordinator):", workers, d)
	t.Logf("| | received bytes | database growth | revisions |")
	t.Logf("|---|---|---|---|")
	t.Logf("| every heartbeat writes (before) | %.0f | %.0f | %.0f |", before.received, before.dbGrowth, before.revisions)
	t.Logf("| renewals, status every 1m (after) | %.0f | %.0f | %.0f |", after.received, after.dbGrowth, after.revisions)
	t.Logf("| two coordinators, renewals and the renewal log (exact ages everywhere) | %.0f | %.0f | %.0f |", pair.received, pair.dbGrowth, pair.revisions)
	t.Logf("| after / before | %.3f | %.3f | %.3f |", after.received/before.received, after.dbGrowth/before.dbGrowth, after.revisions/before.revisions)
	t.Logf("| two coordinators / before | %.3f | %.3f | %.3f |", pair.received/before.received, pair.dbGrowth/before.dbGrowth, pair.revisions/before.revisions)
	if r := after.received / before.received; r > 0.1 {
		t.Errorf("etcd received %.0f bytes per worker-hour with renewals, %.3f of %.0f with a write per heartbeat: want at most a tenth", after.received, r, before.received)
	}
	if r := after.revisions / before.revisions; r > 0.1 {
		t.Errorf("%.0f revisions per worker-hour with renewals, %.3f of %.0f: want at most a tenth", after.revisions, r, before.revisions)
	}
	// The renewal log (exact heartbeat ages on every coordinator) costs
	// about 7 bytes a renewal plus a fixed part per coordinator (a put
	// every half interval while it accepted renewals, and a watch), which a 60-worker run
	// spreads over few workers. It must keep at least 95% of what the
	// renewals saved, in bytes received and in database growth.
	t.Logf("renewal log: %.0f bytes per heartbeat at %d workers over two coordinators (received, two coordinators minus one)", (pair.received-after.received)/720, workers)
	for _, f := range []struct {
		name                string
		before, after, pair float64
	}{{"bytes received", before.received, after.received, pair.received}, {"database growth", before.dbGrowth, after.dbGrowth, pair.dbGrowth}} {
		if kept := (f.before - f.pair) / (f.before - f.after); kept < 0.95 {
			t.Errorf("%s: two coordinators with the renewal log keep %.3f of the renewals' savings (%.0f -> %.0f, one coordinator %.0f per worker-hour): want at least 0.95", f.name, kept, f.before, f.pair, f.after)
		}
	}
}

// measureEtcdHeartbeats runs coordinators (1 or 2; with 2 the workers
// alternate between them and each publishes its renewals for the other)
// on a fresh etcd with the
// default timing and status interval status, registers workers simulated
// workers and has each heartbeat every 5 s for d, and returns etcd's
// figures for the heartbeats (registration excluded) per worker per hour.
func measureEtcdHeartbeats(t *testing.T, workers int, d, status time.Duration, coordinators int) storeBytes {
	e := testenv.StartEtcd(t, testenv.EtcdOptions{})
	o := etcd.DefaultOptions()
	o.Endpoints, o.CacheSnapshots = e.Endpoints(), true
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store, err := etcd.New(ctx, o)
	if err != nil {
		t.Error(err)
		return storeBytes{}
	}
	defer store.Close()
	timing := cluster.DefaultTiming()
	timing.StatusInterval = status
	var cls []*client.Client
	for i := range coordinators {
		c := coordtest.Start(t, coordtest.Options{ClusterID: "bytes", NodeID: fmt.Sprintf("coord-%d", i), Store: store, Timing: timing, RequestTimeout: 2 * time.Second, WaitReady: true})
		defer c.Stop()
		cl, err := client.New(client.Options{Coordinators: []string{c.ControlAddr}, MaxIdleConns: workers})
		if err != nil {
			t.Error(err)
			return storeBytes{}
		}
		defer cl.Close()
		cls = append(cls, cl)
	}
	callOne := func(ctx context.Context, cl *client.Client, msg protocol.Message, err error) error {
		if err != nil {
			return err
		}
		resp, err := cl.Call(ctx, msg)
		if err != nil {
			return err
		}
		if a, ok := resp.(*protocol.Ack); !ok || a.Outcome != protocol.OutcomeAccepted {
			return fmt.Errorf("answer %v", resp)
		}
		return nil
	}
	call := func(w int) func(protocol.Message, error) error {
		return func(msg protocol.Message, err error) error { return callOne(ctx, cls[w%len(cls)], msg, err) }
	}
	recs := make([]*cluster.Record, workers)
	for w := range recs {
		recs[w] = bench.Record("bytes", fmt.Sprintf("worker-%03d", w), 0)
		if err := call(w)(protocol.NewRegister(recs[w])); err != nil {
			t.Errorf("register %s: %v", recs[w].NodeID, err)
			return storeBytes{}
		}
	}
	start := etcdFigures(t, e)
	var wg sync.WaitGroup
	var failed sync.Once
	deadline := time.Now().Add(d)
	for w, rec := range recs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(rand.N(timing.HeartbeatInterval))
			tick := time.NewTicker(timing.HeartbeatInterval)
			defer tick.Stop()
			for time.Now().Before(deadline) {
				rec.HeartbeatSeq++
				rec.Counters.RequestsTotal += 1000 // traffic: counters move, nothing else
				rec.Counters.HitsTotal += 900
				if err := call(w)(protocol.NewHeartbeat(rec)); err != nil {
					failed.Do(func() { t.Errorf("heartbeat %s seq %d: %v", rec.NodeID, rec.HeartbeatSeq, err) })
				}
				<-tick.C
			}
		}()
	}
	wg.Wait()
	end := etcdFigures(t, e)
	hours := float64(workers) * d.Hours()
	return storeBytes{
		received:  (end.received - start.received) / hours,
		dbGrowth:  (end.inUse - start.inUse) / hours,
		revisions: (end.revision - start.revision) / hours,
		workers:   workers, d: d,
	}
}

// etcdFigure is what etcd's /metrics says at one moment.
type etcdFigure struct{ received, inUse, revision float64 }

// etcdFigures scrapes the etcd server's own metrics.
func etcdFigures(t *testing.T, e *testenv.Etcd) etcdFigure {
	t.Helper()
	resp, err := http.Get(e.Endpoints()[0] + "/metrics")
	if err != nil {
		t.Fatalf("scrape etcd: %v", err)
	}
	defer resp.Body.Close()
	var f etcdFigure
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(name, "etcd_network_client_grpc_received_bytes_total"):
			f.received += v
		case name == "etcd_mvcc_db_total_size_in_use_in_bytes":
			f.inUse = v
		case name == "etcd_debugging_mvcc_current_revision":
			f.revision = v
		}
	}
	if f.revision == 0 {
		t.Fatal("etcd's /metrics has no etcd_debugging_mvcc_current_revision")
	}
	return f
}
