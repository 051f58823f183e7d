package integration

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/app"
	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/coordtest"
	"github.com/talonhq/talon/internal/testsupport/shapeproxy"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// TestBenchShapedProfile profiles the two sides of the shaped talon get
// row in one process: the same cold reads (an ObjectReader with talon
// get's --parallel 3 --replicas 1 --verify=false) over one worker and
// over three, with the coordinator, the workers (the code of talon
// worker, run in-process: a worker process cannot be profiled from
// outside), the reader and the shaping proxy in this process and
// versitygw in its own. It prints go tool pprof's top lines of each
// side, whose header says how much of the wall time the process spent on
// a CPU: what docs/performance.md quotes. It measures nothing for the
// report.
func TestBenchShapedProfile(t *testing.T) {
	if os.Getenv(benchReportEnv) == "" {
		t.Skipf("measurement: set %s=1", benchReportEnv)
	}
	talontest.SkipShort(t)
	st := startShapedStore(t, shapeFromEnv(t))
	for _, n := range []int{1, 3} {
		keys := shapedKeys(fmt.Sprintf("profile-%d", n), 3)
		st.putAll(t, shapedGetSize, keys...)
		rd := inProcessCluster(t, st, n)
		stop := profileWith(t, fmt.Sprintf("shaped-get-%d-workers", n), "-top", "-cum", "-nodecount=40")
		start := time.Now()
		for _, k := range keys {
			if got, err := rd.ReadObject(context.Background(), k, io.Discard); err != nil || got != shapedGetSize {
				t.Fatalf("read %s: %d bytes, %v", k, got, err)
			}
		}
		took := time.Since(start)
		stop()
		t.Logf("%d worker(s) in-process: %d cold reads of 256 MiB at %.0f MB/s", n, len(keys), float64(len(keys))*shapedGetSize/1e6/took.Seconds())
	}
}

// inProcessCluster runs a coordinator and n workers in this process on
// the shaped store (4 MiB blocks, no warm-up bound, the defaults
// otherwise, as startShapedCluster's processes) until the test ends, and
// returns a reader of talon get's settings over them.
func inProcessCluster(t *testing.T, st *shapedStore, n int) *client.ObjectReader {
	t.Helper()
	ln, err := net.Listen("tcp", shapeproxy.ListenAddr)
	if err != nil {
		t.Fatal(err)
	}
	timing := cluster.Timing{HeartbeatInterval: time.Second, UnhealthyAfter: 10 * time.Second, LeaseTTL: 20 * time.Second}
	c := coordtest.Start(t, coordtest.Options{ClusterID: "profile", Timing: timing, RequestTimeout: 2 * time.Second, ShutdownTimeout: time.Second,
		WaitReady: true, Listener: ln})
	for i := range n {
		startInProcessWorker(t, c.ControlAddr, st.url, fmt.Sprintf("profile-%d-of-%d", i+1, n), timing)
	}
	probe, err := client.New(client.Options{Coordinators: []string{c.ControlAddr}}) // no cache: every probe asks
	if err != nil {
		t.Fatal(err)
	}
	testsupport.WaitFor(t, 20*time.Second, "every worker an owner", func() bool { return owners(probe) == n })
	probe.Close()
	cl, err := client.New(client.Options{Coordinators: []string{c.ControlAddr}, CacheTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return &client.ObjectReader{Client: cl, HTTP: &http.Client{Timeout: time.Minute}, BlockSize: shapedBlock, Replicas: 1, Parallel: shapedGetParallel}
}

// startInProcessWorker runs worker id of coordinator ctl on blobURL in
// this process until the test ends.
func startInProcessWorker(t *testing.T, ctl, blobURL, id string, timing cluster.Timing) {
	t.Helper()
	l, err := config.Load(cluster.RoleWorker, config.Options{Environ: []string{"TALON_INSECURE_CONTROL_PLANE=true"}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := l.Config
	cfg.ClusterID, cfg.NodeID, cfg.Coordinators = "profile", id, []string{ctl}
	cfg.Listen, cfg.AdminListen = shapeproxy.ListenAddr, ""
	cfg.BlobStore, cfg.CacheDir, cfg.CacheCapacity, cfg.BlockSize = blobURL, t.TempDir(), 2<<30, shapedBlock
	cfg.WarmupRate = 0
	cfg.HeartbeatInterval, cfg.UnhealthyAfter, cfg.LeaseTTL = timing.HeartbeatInterval, timing.UnhealthyAfter, timing.LeaseTTL
	w, err := app.NewWorker(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	testsupport.WaitFor(t, 10*time.Second, id+" serving", func() bool { return w.Worker().Serving() })
}

// owners returns how many workers own the first of 64 blocks' keys.
func owners(cl *client.Client) int {
	seen := map[string]bool{}
	for b := range 64 {
		p, err := cl.Lookup(context.Background(), fmt.Sprintf("profile-probe#%d", b), 1)
		if err != nil || len(p.Owners) == 0 {
			return 0
		}
		seen[p.Owners[0].NodeID] = true
	}
	return len(seen)
}
