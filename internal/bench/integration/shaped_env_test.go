package integration

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/blob"
	"github.com/talonhq/talon/internal/blob/s3"
	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/testenv"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/shapeproxy"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// This file is the set-up of the shaped-store rows
// (benchreport_shaped_test.go): S3 (versitygw) behind the shaping proxy,
// clusters of talon processes reading from it, and the CPU time each
// process spends.

// shapedBlock is the block size of the shaped rows: the workers' default.
const shapedBlock = 4 << 20

// shapedStore is versitygw behind a shaping proxy: every read, the
// workers' and the direct ones, goes through the proxy.
type shapedStore struct {
	srv   *testenv.S3
	proxy *shapeproxy.Proxy
	// url is the blob-store URL of the bucket through the proxy, and
	// store a client of it.
	url   string
	store blob.Store
}

// startShapedStore starts versitygw, a proxy of shape in front of it and
// a bucket, and sets the AWS environment in this process, so that the
// talon processes started after it inherit the credential.
func startShapedStore(t *testing.T, shape shapeproxy.Shape) *shapedStore {
	t.Helper()
	srv := testenv.StartS3(t)
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	srv.CreateBucket(t, "shaped")
	p := shapeproxy.Start(t, srv.Endpoint, shape)
	u := srv.URLVia(p.URL, "shaped", "")
	s, err := s3.New(u, blob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return &shapedStore{srv: srv, proxy: p, url: u, store: s}
}

// putAll uploads size bytes under each of keys, straight to the server.
func (s *shapedStore) putAll(t *testing.T, size int, keys ...string) {
	t.Helper()
	data := pattern64(size)
	for _, k := range keys {
		s.srv.Put(t, "shaped", k, data)
	}
}

// loopback21 returns n distinct addresses on 127.0.0.21 whose ports the
// kernel chose and that were free a moment ago (all held until every one
// is chosen, so none repeats).
func loopback21(t *testing.T, n int) []string {
	t.Helper()
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	out := make([]string, n)
	for i := range out {
		ln, err := net.Listen("tcp", shapeproxy.ListenAddr)
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		out[i] = ln.Addr().String()
	}
	return out
}

// shapedCluster is a coordinator and its workers, talon processes on
// 127.0.0.21, whose blob store is the shaped store.
type shapedCluster struct {
	ctl     string
	coord   *talontest.Proc
	workers []*talontest.Proc
	apis    []*apiv1.Client
	// reader reads an object a block at a time, from one owner.
	reader *client.ObjectReader
}

// startShapedCluster starts a coordinator and n workers (4 MiB blocks, a
// 2 GiB cache, no warm-up bound) on the shaped store and waits until
// every worker is eligible.
func startShapedCluster(t *testing.T, name string, s *shapedStore, n int) *shapedCluster {
	t.Helper()
	addrs := loopback21(t, 2+2*n)
	c := &shapedCluster{ctl: addrs[0]}
	c.coord = talontest.Start(t, name+"-coordinator", talontest.CoordinatorArgs(name, c.ctl, addrs[1], "--log-level", "info")...)
	testsupport.WaitFor(t, 20*time.Second, name+" coordinator ready", func() bool { return talontest.Ready(t, c.coord) })
	for i := range n {
		id := fmt.Sprintf("%s-worker-%d", name, i+1)
		// WorkerArgs names a file:// store: the --blob-store after it
		// is the one the worker takes.
		args := talontest.WorkerArgs(id, addrs[2+2*i], addrs[3+2*i], []string{c.ctl}, t.TempDir(), t.TempDir(),
			"--blob-store", s.url, "--block-size", "4MiB", "--cache-capacity", "2GiB", "--warmup-rate", "0", "--log-level", "info")
		w := talontest.Start(t, id, args...)
		c.workers = append(c.workers, w)
		c.apis = append(c.apis, talontest.WorkerAPI(t, w))
	}
	testsupport.WaitFor(t, 30*time.Second, name+" workers eligible", func() bool {
		cl, err := c.coord.API(t).Cluster(context.Background())
		return err == nil && cl.Nodes.Workers.Healthy == n && cl.EligibleWorkers == n
	})
	cl, err := client.New(client.Options{Coordinators: []string{c.ctl}, CacheTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	c.reader = &client.ObjectReader{Client: cl, HTTP: &http.Client{Timeout: time.Minute}, BlockSize: shapedBlock, Replicas: 1, Parallel: 1}
	return c
}

// usage sums the workers' live counters and gauges.
func (c *shapedCluster) usage(t *testing.T) apiv1.Usage {
	t.Helper()
	var sum apiv1.Usage
	for i, api := range c.apis {
		st, err := api.Status(context.Background())
		if err != nil || st.Current == nil {
			t.Fatalf("status of %s: %v", c.workers[i].Name, err)
		}
		u := st.Current
		sum.Capacity.InflightLoads += u.Capacity.InflightLoads
		sum.Counters.HitsTotal += u.Counters.HitsTotal
		sum.Counters.MissesTotal += u.Counters.MissesTotal
		sum.Counters.BackendFetchesTotal += u.Counters.BackendFetchesTotal
		sum.Counters.BytesServedTotal += u.Counters.BytesServedTotal
	}
	return sum
}

// readAheadLoads is the read-ahead loads the workers have started
// (talon_worker_cache_prefetches_total).
func (c *shapedCluster) readAheadLoads(t *testing.T) float64 {
	t.Helper()
	var sum float64
	for _, w := range c.workers {
		sum += talontest.SumMetric([]byte(talontest.ScrapeText(t, w)), "talon_worker_cache_prefetches_total")
	}
	return sum
}

// waitLoads waits until no worker has a block load in flight: a miss
// streams, so a reader can have the last block before its load is
// committed.
func (c *shapedCluster) waitLoads(t *testing.T) {
	t.Helper()
	testsupport.WaitFor(t, time.Minute, "block loads committed", func() bool { return c.usage(t).Capacity.InflightLoads == 0 })
}

// pids are the worker processes' ids.
func (c *shapedCluster) pids() []int {
	out := make([]int, len(c.workers))
	for i, w := range c.workers {
		out[i] = w.Cmd.Process.Pid
	}
	return out
}

// cpuMeter adds up the CPU time the processes of the shaped rows use
// during each kind of phase, by role: what each byte costs where.
type cpuMeter struct {
	roles map[string][]int // role -> process ids; this process is "proxy and reader"
	// used is the CPU time per phase kind and role, bytes the bytes the
	// phases of a kind read.
	used  map[string]map[string]time.Duration
	bytes map[string]int64
}

func newCPUMeter(roles map[string][]int) *cpuMeter {
	return &cpuMeter{roles: roles, used: map[string]map[string]time.Duration{}, bytes: map[string]int64{}}
}

// selfRole names this test process's share: the proxy, and the reader
// of the phases that read in-process.
const selfRole = "proxy and reader (test process)"

func (m *cpuMeter) now() map[string]time.Duration {
	out := map[string]time.Duration{selfRole: cpuTime()}
	for role, pids := range m.roles {
		for _, pid := range pids {
			out[role] += procCPU(pid)
		}
	}
	return out
}

// measure runs phase, a read of n bytes, and adds the CPU time the
// processes used meanwhile to kind's.
func (m *cpuMeter) measure(kind string, n int64, phase func()) {
	before := m.now()
	phase()
	after := m.now()
	if m.used[kind] == nil {
		m.used[kind] = map[string]time.Duration{}
	}
	for role, d := range after {
		m.used[kind][role] += d - before[role]
	}
	m.bytes[kind] += n
}

// add counts d more CPU time of role during kind's phases (a process
// that ended within the phase, such as talon get).
func (m *cpuMeter) add(kind, role string, d time.Duration) {
	if m.used[kind] == nil {
		m.used[kind] = map[string]time.Duration{}
	}
	m.used[kind][role] += d
}

// perGB renders kind's CPU seconds per GB read, by role.
func (m *cpuMeter) perGB(kind string) string {
	gb := float64(m.bytes[kind]) / 1e9
	if gb == 0 {
		return "-"
	}
	var parts []string
	var total float64
	for _, role := range slices.Sorted(maps.Keys(m.used[kind])) {
		s := m.used[kind][role].Seconds() / gb
		total += s
		parts = append(parts, fmt.Sprintf("%s %.2f", role, s))
	}
	return fmt.Sprintf("%.2f CPU s/GB (%s)", total, strings.Join(parts, ", "))
}

// procCPU is the user+system CPU time process pid has used (0 when it
// cannot be read), from /proc/PID/stat in clock ticks of 10 ms.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses and
	// may hold spaces: utime and stime are the 12th and 13th.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond
}
