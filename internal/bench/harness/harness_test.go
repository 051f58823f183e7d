package harness_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/goleak"

	"github.com/talonhq/talon/internal/app"
	"github.com/talonhq/talon/internal/bench"
	"github.com/talonhq/talon/internal/bench/harness"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/coordinator"
	"github.com/talonhq/talon/internal/testenv"
	"github.com/talonhq/talon/internal/testsupport/coordtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestLookups(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a coordinator")
	}
	// The seeded workers never heartbeat: with a frozen liveness clock the
	// coordinator never proposes them late while the lookups run.
	c := coordtest.Start(t, coordtest.Options{ClusterID: "dev", WaitReady: true, FrozenLiveness: true})
	for _, id := range []string{"w1", "w2", "w3"} {
		_, err := c.Store.UpsertNode(context.Background(), &cluster.Record{FeatureLevel: cluster.BuildLevel,
			ClusterID: "dev", NodeID: id, Role: cluster.RoleWorker, IncarnationID: "i", Address: "127.0.0.1:1",
			Health: cluster.HealthHealthy, Ready: true,
		}, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
	}
	opts := harness.LookupOptions{Coordinators: []string{c.ControlAddr}, Concurrency: 4, Duration: time.Second, Keys: 100, Replicas: 2}
	if err := opts.Validate(); err != nil {
		t.Fatal(err)
	}
	var res harness.LookupResult
	var err error
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, err = harness.Lookups(context.Background(), opts)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond) // the coordinator may still be warming up
	}
	if err != nil {
		t.Fatal(err)
	}
	if res.Lookups == 0 || res.Errors != 0 || res.P50 <= 0 || res.P99 < res.P50 || res.Max < res.P99 {
		t.Fatalf("result %+v", res)
	}
	var out bytes.Buffer
	if err := res.Write(&out, opts); err != nil || !strings.Contains(out.String(), "lookups/s") {
		t.Fatalf("output %q %v", out.String(), err)
	}
	out.Reset()
	opts.Output = "json"
	var js map[string]any
	if err := res.Write(&out, opts); err != nil || json.Unmarshal(out.Bytes(), &js) != nil || js["lookups"] != float64(res.Lookups) {
		t.Fatalf("json output %q %v", out.String(), err)
	}
	bad := opts
	bad.Replicas = 17
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "--replicas 17") {
		t.Fatalf("validate replicas 17: %v", err)
	}
}

// defaultConn returns the connection settings of the flags' defaults.
func defaultConn(t *testing.T) harness.Conn {
	t.Helper()
	var c harness.Conn
	f := pflag.NewFlagSet("bench", pflag.ContinueOnError)
	c.RegisterFlags(f)
	if err := f.Parse(nil); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestHeartbeatOptionsValidate(t *testing.T) {
	noEnv := func(string) string { return "" }
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		edit        func(o *harness.HeartbeatOptions)
		getenv      func(string) string
		wantErr     string
		wantWriters int
		wantPass    string
	}{
		{name: "etcd default writers", edit: func(o *harness.HeartbeatOptions) {}, getenv: noEnv, wantWriters: harness.DefaultEtcdWriters},
		{name: "kubernetes default writers", edit: func(o *harness.HeartbeatOptions) { o.Backend = "kubernetes" }, getenv: noEnv, wantWriters: harness.DefaultKubeWriters},
		{name: "writers given", edit: func(o *harness.HeartbeatOptions) { o.Writers = 7 }, getenv: noEnv, wantWriters: 7},
		{name: "password from the environment", edit: func(o *harness.HeartbeatOptions) { o.Conn.Etcd.Username = "u" },
			getenv: func(k string) string { return map[string]string{"TALON_ETCD_PASSWORD": "from-env"}[k] }, wantWriters: harness.DefaultEtcdWriters, wantPass: "from-env"},
		{name: "password file wins", edit: func(o *harness.HeartbeatOptions) { o.Conn.Etcd.Username, o.Conn.Etcd.PasswordFile = "u", pwFile },
			getenv: func(string) string { return "from-env" }, wantWriters: harness.DefaultEtcdWriters, wantPass: "from-file"},
		{name: "no password", edit: func(o *harness.HeartbeatOptions) { o.Conn.Etcd.Username = "u" }, getenv: noEnv,
			wantErr: `--etcd-username "u": needs a password from TALON_ETCD_PASSWORD or --etcd-password-file`},
		{name: "kube qps", edit: func(o *harness.HeartbeatOptions) { o.Backend, o.Conn.Kube.QPS = "kubernetes", 0 }, getenv: noEnv,
			wantErr: "--kube-qps 0: must be from 1 to 100000"},
		{name: "etcd endpoints empty", edit: func(o *harness.HeartbeatOptions) { o.Conn.Etcd.Endpoints = nil }, getenv: noEnv,
			wantErr: "--etcd-endpoints is empty"},
		{name: "write mix", edit: func(o *harness.HeartbeatOptions) { o.Mix = "write" }, getenv: noEnv, wantWriters: harness.DefaultEtcdWriters},
		{name: "both mixes, status every heartbeat", edit: func(o *harness.HeartbeatOptions) { o.Mix, o.StatusInterval = "both", 0 }, getenv: noEnv, wantWriters: harness.DefaultEtcdWriters},
		{name: "one pair", edit: func(o *harness.HeartbeatOptions) { o.Pairs = 1 }, getenv: noEnv, wantWriters: harness.DefaultEtcdWriters},
		{name: "no pairs", edit: func(o *harness.HeartbeatOptions) { o.Pairs = 0 }, getenv: noEnv, wantErr: "--pairs 0: must be from 1 to 20"},
		{name: "too many pairs", edit: func(o *harness.HeartbeatOptions) { o.Pairs = 21 }, getenv: noEnv, wantErr: "--pairs 21: must be from 1 to 20"},
		{name: "unknown mix", edit: func(o *harness.HeartbeatOptions) { o.Mix = "" }, getenv: noEnv, wantErr: `--mix "": must be renew, write or both`},
		{name: "status interval under the heartbeat interval", edit: func(o *harness.HeartbeatOptions) { o.StatusInterval = time.Second }, getenv: noEnv,
			wantErr: "--status-interval 1s: must be 0 (every heartbeat writes the record) or from the heartbeat interval 5s to 1h"},
		{name: "status interval too long", edit: func(o *harness.HeartbeatOptions) { o.StatusInterval = 2 * time.Hour }, getenv: noEnv,
			wantErr: "--status-interval 2h0m0s: must be 0"},
		{name: "dial timeout", edit: func(o *harness.HeartbeatOptions) { o.Conn.Etcd.DialTimeout = 0 }, getenv: noEnv,
			wantErr: "--etcd-dial-timeout 0s: must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := harness.HeartbeatOptions{Backend: "etcd", Conn: defaultConn(t), Coordinators: 2, Duration: 10 * time.Second, Output: "text",
				Pairs: harness.DefaultPairs, Mix: "renew", StatusInterval: time.Minute}
			tt.edit(&o)
			err := o.Validate(tt.getenv)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Validate: %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || o.Writers != tt.wantWriters || o.Conn.Etcd.Password.Reveal() != tt.wantPass {
				t.Fatalf("Validate: %v; writers %d, password %q; want %d, %q", err, o.Writers, o.Conn.Etcd.Password.Reveal(), tt.wantWriters, tt.wantPass)
			}
		})
	}
}

// TestHeartbeatsMirrorTalonsMix runs talon bench heartbeats on a real
// etcd and checks that the raw ceiling does what Talon's store does per
// heartbeat: at the default status interval the same share of heartbeats
// only renews a lease (11 in 12), counted on the raw side by the writers
// and on the Talon side by the coordinators' stores; and that --mix write
// renews nothing.
func TestHeartbeatsMirrorTalonsMix(t *testing.T) {
	testenv.SkipIfShort(t)
	e := testenv.StartEtcd(t, testenv.EtcdOptions{})
	conn := defaultConn(t)
	conn.Etcd.Endpoints, conn.Etcd.Prefix = e.Endpoints(), "/mix"
	o := harness.HeartbeatOptions{Backend: "etcd", Conn: conn, Writers: 8, Coordinators: 1, Duration: 1500 * time.Millisecond, Output: "text",
		Pairs: 1, Mix: harness.MixBoth, StatusInterval: time.Minute}
	if err := o.Validate(func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	rep, err := harness.Heartbeats(context.Background(), app.BenchRoles(), o, t.Logf, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := rep.Write(&out, "text"); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", out.String())
	renew, ok := rep.Ceiling(bench.MixRenew)
	write, ok2 := rep.Ceiling(bench.MixWrite)
	if !ok || !ok2 || len(renew.Results) != 2 || len(write.Results) != 2 || len(rep.TalonResults) != 1 || rep.StatusEvery != 12 || renew.StatusEvery != 12 {
		t.Fatalf("report %+v", rep)
	}
	share := func(name string, r bench.Result) {
		t.Helper()
		if r.Ops < 12*o.Writers*2 || r.FailureCount() != 0 {
			t.Fatalf("%s: %d ok, failures %v (first %v): too few to check the mix", name, r.Ops, r.Failures, r.FirstErr)
		}
		if got := float64(r.Renewals) / float64(r.Ops); got < 11.0/12-0.03 || got > 11.0/12+0.03 {
			t.Errorf("%s: %d of %d heartbeats only renewed (%.3f), want 11 in 12", name, r.Renewals, r.Ops, got)
		}
	}
	share("raw renew", renew.RawResult)
	share("talon", rep.TalonResult)
	if write.RawResult.Ops == 0 || write.RawResult.Renewals != 0 {
		t.Errorf("raw write: %d ok, %d renewals, want none", write.RawResult.Ops, write.RawResult.Renewals)
	}
	if renew.Ratio.N != 1 || renew.Ratio.Median <= 0 || write.Ratio.N != 1 || rep.RawCreated != o.Writers || rep.TalonCreated < o.Writers {
		t.Errorf("ratios %+v %+v, created raw %d talon %d", renew.Ratio, write.Ratio, rep.RawCreated, rep.TalonCreated)
	}
}

func TestHeartbeatReportWrite(t *testing.T) {
	res := func(ops int, p99 time.Duration, renewals int) bench.Result {
		return bench.Result{Ops: ops, Elapsed: time.Second, Latencies: []time.Duration{p99 / 2, p99}, Renewals: renewals}
	}
	// Raw at 2000, 1800, 1600/s around Talon at 950 and 850/s: 0.5 each.
	raws := []bench.Result{res(2000, 2*time.Millisecond, 1833), res(1800, 2*time.Millisecond, 1650), res(1600, 2*time.Millisecond, 1466)}
	talons := []bench.Result{res(950, 4*time.Millisecond, 870), res(850, 3*time.Millisecond, 779)}
	talons[1].Failures, talons[1].FirstErr = map[string]int{"unavailable": 2}, errors.New("boom")
	c := harness.Ceiling{Mix: bench.MixRenew, StatusEvery: 12, Results: raws, RawResult: bench.Merge(raws...),
		Ratio:    bench.SpreadOf(bench.PairRatios(bench.Rates(raws), bench.Rates(talons))),
		P99Ratio: bench.SpreadOf(bench.PairRatios(bench.P99s(raws), bench.P99s(talons)))}
	c.Raw = c.RawResult.Summary()
	rep := harness.HeartbeatReport{Backend: "etcd", Location: "etcd 127.0.0.1:2379, prefix /p", Writers: 10, Coordinators: 2, PhaseSeconds: 1, Pairs: 2,
		RecordBytes: 1500, StatusIntervalSeconds: 60, StatusEvery: 12, Ceilings: []harness.Ceiling{c},
		Created: "leases granted", RawCreated: 10, TalonCreated: 12, TalonResults: talons, TalonResult: bench.Merge(talons...)}
	rep.Talon = rep.TalonResult.Summary()
	var out bytes.Buffer
	if err := rep.Write(&out, "text"); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{"heartbeats on etcd (etcd 127.0.0.1:2379, prefix /p): 10 writers, 2 coordinators, 2 pairs of 1s phases, 1500-byte records",
		"talon: status-interval 1m0s at heartbeat-interval 5s: the record is written every 12 heartbeats",
		"raw renew: 11 lease keepalives to 1 compare-and-swap put of the record per writer",
		"ratio talon/raw renew: 0.50 (0.50–0.50) of the rate, p99 1.75x (1.50x–2.00x)", "median (min–max) of 2 pairs",
		"leases granted: raw 10, talon 12", "failures (talon): unavailable 2", "first failure (talon): boom"} {
		if !strings.Contains(text, want) {
			t.Errorf("text report lacks %q:\n%s", want, text)
		}
	}
	// The phases in run order, then each side pooled.
	var order []string
	for _, line := range strings.Split(text, "\n") {
		if f := strings.Fields(line); len(f) > 3 && (f[0] == "raw" || f[0] == "talon") && !strings.Contains(line, ":") {
			if f[0] == "raw" {
				order = append(order, f[0]+" "+f[1]+" "+f[2]+" "+f[3])
			} else {
				order = append(order, f[0]+" "+f[1]+" "+f[2])
			}
		}
	}
	want := []string{"raw renew 1 2000", "talon 1 950", "raw renew 2 1800", "talon 2 850", "raw renew 3 1600", "raw renew all 1800", "talon all 900"}
	if !slices.Equal(order, want) {
		t.Errorf("rows %q, want %q", order, want)
	}
	for _, tt := range []struct {
		backend string
		c       harness.Ceiling
		want    string
	}{
		{"kubernetes", harness.Ceiling{Mix: bench.MixRenew, StatusEvery: 12}, "11 renewal patches (renewTime, talon.io/renew-seq) to 1 merge patch of the status per writer"},
		{"kubernetes", harness.Ceiling{Mix: bench.MixWrite}, "an UPDATE of the whole Lease on every heartbeat (the ceiling before lease renewals)"},
		{"etcd", harness.Ceiling{Mix: bench.MixWrite}, "a compare-and-swap put of the record on every heartbeat (the ceiling before lease renewals)"},
		{"etcd", harness.Ceiling{Mix: bench.MixRenew}, "a compare-and-swap put of the record on every heartbeat, as talon at status-interval 0"},
	} {
		r := harness.HeartbeatReport{Backend: tt.backend, Ceilings: []harness.Ceiling{tt.c}}
		out.Reset()
		if err := r.Write(&out, "text"); err != nil || !strings.Contains(out.String(), "raw "+string(tt.c.Mix)+": "+tt.want) {
			t.Errorf("%s %s: report lacks %q:\n%s", tt.backend, tt.c.Mix, tt.want, out.String())
		}
	}

	out.Reset()
	if err := rep.Write(&out, "json"); err != nil {
		t.Fatal(err)
	}
	var back harness.HeartbeatReport
	if err := json.Unmarshal(out.Bytes(), &back); err != nil {
		t.Fatalf("json report %q: %v", out.String(), err)
	}
	bc, ok := back.Ceiling(bench.MixRenew)
	if !ok || bc.Ratio.Median != 0.5 || bc.Ratio.N != 2 || bc.StatusEvery != 12 || back.Talon.Ops != 1800 || back.Talon.Renewals != 1649 || back.TalonCreated != 12 || back.Pairs != 2 {
		t.Fatalf("json report %q", out.String())
	}
	if _, ok := back.Ceiling(bench.MixWrite); ok {
		t.Fatal("a write ceiling that was not measured")
	}
}

// TestRunFleet runs talon bench fleet's measurement against an in-process
// coordinator: it registers, says so, waits for its go-ahead with --hold,
// heartbeats open loop and reports as JSON.
func TestRunFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a coordinator")
	}
	c := coordtest.Start(t, coordtest.Options{ClusterID: "bench", RequestTimeout: 5 * time.Second, WaitReady: true,
		Limits: coordinator.Limits{NodeWritesPerInterval: -1}, // the fleet beats faster than the coordinator's interval
		Timing: cluster.Timing{HeartbeatInterval: 5 * time.Second, UnhealthyAfter: time.Minute, LeaseTTL: 2 * time.Minute}})
	var progress []string
	o := harness.FleetProcess{Coordinators: []string{c.ControlAddr}, Workers: 20, Interval: time.Second, Duration: 2 * time.Second,
		ClusterID: "bench", NodePrefix: "fleet-", Hold: true, Output: "json"}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	rep, err := harness.RunFleet(context.Background(), o, strings.NewReader("go\n"), func(format string, a ...any) {
		progress = append(progress, fmt.Sprintf(format, a...))
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(progress) != 1 || !strings.HasPrefix(progress[0], harness.FleetRegistered+" 20 workers") {
		t.Fatalf("progress %q", progress)
	}
	var b bytes.Buffer
	if err := harness.WriteFleet(&b, rep, "json"); err != nil {
		t.Fatal(err)
	}
	var got bench.FleetReport
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, b.String())
	}
	// 20 workers, 2 heartbeats each in the 2 s: sent or missed.
	if got.Workers != 20 || got.ExpectedPerSecond != 20 || got.Sent+got.Missed != 40 || got.Heartbeats.Ops != got.Sent ||
		len(got.Heartbeats.Failures) != 0 || got.Heartbeats.ElapsedS != 2 {
		t.Fatalf("report %s", b.String())
	}
	b.Reset()
	if err := harness.WriteFleet(&b, rep, "text"); err != nil || !strings.Contains(b.String(), "of 20.0/s expected") {
		t.Fatalf("text %q, %v", b.String(), err)
	}
}
