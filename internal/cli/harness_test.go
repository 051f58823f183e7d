package cli_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/colorprofile"
	"go.uber.org/goleak"

	"github.com/talonhq/talon/internal/cli"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/state/memory"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/coordtest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const clusterID = "test"

// t0 is the store's (and every server's) clock when the goldens are taken.
var t0 = time.Date(2026, time.November, 1, 10, 0, 0, 0, time.UTC)

// testTiming keeps every seeded record visible (a lease of an hour on the
// store's frozen clock). Age alone makes no record unhealthy: the seeded
// w-5, 45s old, is marked late explicitly, as a coordinator would after
// ten seconds.
var testTiming = cluster.Timing{HeartbeatInterval: 200 * time.Millisecond, UnhealthyAfter: 10 * time.Second, LeaseTTL: time.Hour}

// integration skips tests that run a coordinator under -short.
func integration(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: runs a coordinator and its admin listener on loopback")
	}
}

// env is a real coordinator over a memory store with its admin listener
// served on loopback. The store, the coordinator and the admin server share
// one clock, frozen until a test moves it.
type env struct {
	store *memory.Store
	clock *testsupport.FakeClock
	coord *coordtest.Coordinator
	url   string
}

type envOptions struct {
	tokens []config.Secret
	// scoped are tokens with their own names and scopes, besides tokens.
	scoped []config.AdminToken
	// metrics exposes /metrics too.
	metrics bool
	// seed writes the standard workers (see seedWorkers).
	seed bool
}

// startEnv runs coordinator coord-a (control address advertised as
// coord-a.test:7400, started at t0-50m) and its admin server, and waits
// until the coordinator's own record is ready at t0.
func startEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	integration(t)
	e := &env{clock: testsupport.NewFakeClock(t0.Add(-50 * time.Minute))}
	e.coord = coordtest.Start(t, coordtest.Options{
		ClusterID: clusterID, NodeID: "coord-a", Advertise: "coord-a.test:7400", Labels: map[string]string{"zone": "a"},
		Timing: testTiming, RequestTimeout: 200 * time.Millisecond, ShutdownTimeout: time.Second,
		StoreClock: e.clock.Now, Clock: e.clock.Now,
		// The seeded records are static and no test here expects recovery
		// from a store fault: the coordinator proposes nothing by itself.
		FrozenLiveness: true,
		Admin:          &config.AdminConfig{ExposeHealth: true, ExposeAPI: true, ExposeMetrics: o.metrics, Tokens: append(readTokens(o.tokens), o.scoped...)},
	})
	e.store, e.url = e.coord.Memory, e.coord.AdminURL
	e.waitCoordinator(t)
	if o.seed {
		e.seedWorkers(t)
	}
	e.clock.Set(t0)
	e.waitCoordinator(t)
	return e
}

// waitCoordinator waits until the coordinator is ready and its own record,
// ready and healthy, was written at the clock's current time.
func (e *env) waitCoordinator(t *testing.T) {
	t.Helper()
	testsupport.WaitFor(t, 10*time.Second, "coordinator record at the current clock", func() bool {
		if !e.coord.Readiness().Ready {
			return false
		}
		r := e.coord.Record()
		return r != nil && r.Ready && r.Health == cluster.HealthHealthy && r.UpdatedAtUnixMs == e.clock.Now().UnixMilli()
	})
}

// worker is a seeded worker: its record and when (relative to t0) the
// store accepted it.
type worker struct {
	at  time.Duration
	rec cluster.Record
}

func gib(n float64) uint64 { return uint64(n * (1 << 30)) }

// seedWorkers writes five workers at fixed store times:
//
//	w-1 healthy, ready, age 0        w-2 healthy, ready, age 3s
//	w-3 degraded, ready, age 1.5s    w-4 healthy, not ready, age 0
//	w-5 reported healthy, age 45s, marked late: effectively unhealthy
func (e *env) seedWorkers(t *testing.T) {
	t.Helper()
	ws := []worker{
		{-45 * time.Second, cluster.Record{NodeID: "w-5", Version: "1.4.0", Health: cluster.HealthHealthy, Ready: true,
			StartTimeUnixMs: t0.Add(-5 * time.Hour).UnixMilli(), HeartbeatSeq: 7,
			Capacity: cluster.Capacity{CapacityBytes: gib(8), ResidentBytes: gib(1)}, Labels: map[string]string{"zone": "a"}}},
		{-3 * time.Second, cluster.Record{NodeID: "w-2", Version: "1.4.0", Health: cluster.HealthHealthy, Ready: true,
			StartTimeUnixMs: t0.Add(-26 * time.Hour).UnixMilli(), HeartbeatSeq: 31000,
			Capacity: cluster.Capacity{CapacityBytes: gib(8), ResidentBytes: gib(2)},
			Counters: cluster.Counters{HitsTotal: 50, MissesTotal: 50}, Labels: map[string]string{"zone": "b"}}},
		{-1500 * time.Millisecond, cluster.Record{NodeID: "w-3", Version: "1.5.0-rc.1", Health: cluster.HealthDegraded, Ready: true,
			StartTimeUnixMs: t0.Add(-10 * time.Minute).UnixMilli(), HeartbeatSeq: 120,
			Capacity: cluster.Capacity{CapacityBytes: gib(4), ResidentBytes: gib(4)}, Labels: map[string]string{"zone": "a"}}},
		{0, cluster.Record{NodeID: "w-1", Version: "1.4.0", Health: cluster.HealthHealthy, Ready: true,
			StartTimeUnixMs: t0.Add(-3 * time.Hour).UnixMilli(), HeartbeatSeq: 4200,
			Capacity: cluster.Capacity{CapacityBytes: gib(8), ResidentBytes: gib(6.5), Blocks: 1664, Pages: 26624},
			Counters: cluster.Counters{RequestsTotal: 10000, HitsTotal: 9000, MissesTotal: 1000, BytesServedTotal: 1 << 34},
			Labels:   map[string]string{"zone": "a", "tier": "ssd"}}},
		{0, cluster.Record{NodeID: "w-4", Version: "1.4.0", Health: cluster.HealthHealthy, Ready: false,
			StartTimeUnixMs: t0.Add(-30 * time.Second).UnixMilli(), HeartbeatSeq: 2,
			Capacity: cluster.Capacity{CapacityBytes: gib(8)}, Labels: map[string]string{"zone": "b"}}},
	}
	for _, w := range ws {
		e.clock.Set(t0.Add(w.at))
		rec := w.rec
		rec.ClusterID, rec.Role = clusterID, cluster.RoleWorker
		rec.IncarnationID = "inc-" + rec.NodeID
		rec.Address = rec.NodeID + ".data.test:7500"
		// The previous release's level: the coordinator (this build)
		// runs beside them, mid-upgrade.
		rec.FeatureLevel = cluster.BuildLevel - 1
		e.put(t, &rec)
	}
	// A coordinator that watched w-5 unchanged for unhealthy-after would
	// have proposed it late.
	key := cluster.Key{ClusterID: clusterID, Role: cluster.RoleWorker, NodeID: "w-5"}
	if res, err := e.store.ProposeTransition(context.Background(), key, "inc-w-5", 7, state.TransitionLate); err != nil || res.Outcome != state.OutcomeAccepted {
		t.Fatalf("marking w-5 late: %+v, %v", res, err)
	}
}

func (e *env) put(t *testing.T, rec *cluster.Record) {
	t.Helper()
	if _, err := e.store.UpsertNode(context.Background(), rec, testTiming.LeaseTTL); err != nil {
		t.Fatal(err)
	}
}

// coordIncarnation is the coordinator's random incarnation ID.
func (e *env) coordIncarnation(t *testing.T) string {
	t.Helper()
	r := e.coord.Record()
	if r == nil {
		t.Fatal("no coordinator record in the store")
	}
	return r.IncarnationID
}

// run is one talonctl invocation.
type run struct {
	args []string
	env  []string // KEY=VALUE; XDG_CONFIG_HOME defaults to an empty temp dir
	tty  bool     // stdout is a terminal (colour forced to ANSI unless NO_COLOR)
	ctx  context.Context
	out  io.Writer // default a buffer
}

type result struct {
	code   int
	stdout string
	stderr string
}

// talonctl runs cli.Main in-process with a Factory on buffers, the clock
// frozen at t0 and the given environment.
func talonctl(t *testing.T, r run) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	environ := append([]string{"XDG_CONFIG_HOME=" + t.TempDir()}, r.env...)
	f := &cli.Factory{
		IO:      cli.IOStreams{In: strings.NewReader(""), Out: &stdout, ErrOut: &stderr, StdoutTTY: r.tty, ColorProfile: colorprofile.ANSI},
		Environ: environ,
		Clock:   func() time.Time { return t0 },
	}
	if r.out != nil {
		f.IO.Out = io.MultiWriter(&stdout, r.out)
	}
	for _, kv := range environ {
		if kv == "NO_COLOR=1" {
			f.IO.NoColor = true
		}
	}
	ctx := r.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	code := cli.Main(ctx, r.args, f)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// closedURL is an admin URL where nothing listens.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

var (
	revisionJSON = regexp.MustCompile(`"revision": "[^"]*"`)
	revisionYAML = regexp.MustCompile(`(?m)^(\s*)revision: .*$`)
	revisionText = regexp.MustCompile(`(?m)^Revision:(\s+)\S+$`)
)

// scrub replaces the values that differ between runs: the store revision
// (the coordinator heartbeats all the time) and the coordinator's random
// incarnation ID (by a placeholder of the same width, to keep columns).
func scrub(s, incarnation string) string {
	s = revisionJSON.ReplaceAllString(s, `"revision": "REVISION"`)
	s = revisionYAML.ReplaceAllString(s, "${1}revision: REVISION")
	s = revisionText.ReplaceAllString(s, "Revision:${1}REVISION")
	if incarnation != "" {
		ph := "COORD-INCARNATION"
		ph += strings.Repeat("-", max(0, len(incarnation)-len(ph)))
		s = strings.ReplaceAll(s, incarnation, ph)
	}
	return s
}

// golden compares got with testdata/name.golden, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/cli/... -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (run with -update after checking the change):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// readTokens gives each token the read scope, all talonctl's reads need.
func readTokens(tokens []config.Secret) []config.AdminToken {
	out := make([]config.AdminToken, len(tokens))
	for i, tok := range tokens {
		out[i] = config.AdminToken{Name: fmt.Sprintf("t%d", i), Scopes: config.ScopeRead, Token: tok}
	}
	return out
}
