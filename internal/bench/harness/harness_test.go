package harness_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/goleak"

	"github.com/talonhq/talon/internal/bench"
	"github.com/talonhq/talon/internal/bench/harness"
	"github.com/talonhq/talon/internal/cluster"
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
		_, err := c.Store.UpsertNode(context.Background(), &cluster.Record{
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
		{name: "dial timeout", edit: func(o *harness.HeartbeatOptions) { o.Conn.Etcd.DialTimeout = 0 }, getenv: noEnv,
			wantErr: "--etcd-dial-timeout 0s: must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := harness.HeartbeatOptions{Backend: "etcd", Conn: defaultConn(t), Coordinators: 2, Duration: 10 * time.Second, Output: "text"}
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

func TestHeartbeatReportWrite(t *testing.T) {
	raw := bench.Result{Ops: 2000, Elapsed: time.Second, Latencies: []time.Duration{time.Millisecond, 2 * time.Millisecond}}
	talon := bench.Result{Ops: 1000, Elapsed: time.Second, Latencies: []time.Duration{3 * time.Millisecond, 4 * time.Millisecond},
		Failures: map[string]int{"unavailable": 2}, FirstErr: errors.New("boom")}
	rep := harness.HeartbeatReport{Backend: "etcd", Location: "etcd 127.0.0.1:2379, prefix /p", Writers: 10, Coordinators: 2, PhaseSeconds: 1,
		RecordBytes: 1500, Ratio: 0.5, P99Ratio: 2, Created: "leases granted", RawCreated: 1, TalonCreated: 10, RawResult: raw, TalonResult: talon}
	rep.Raw, rep.Talon = raw.Summary(), talon.Summary()
	var out bytes.Buffer
	if err := rep.Write(&out, "text"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"heartbeats on etcd (etcd 127.0.0.1:2379, prefix /p): 10 writers, 2 coordinators, 1s per phase, 1500-byte records",
		"raw etcd", "leases granted", "ratio talon/raw: 0.50 of the rate, p99 2.00x", "failures (talon): unavailable 2", "first failure (talon): boom"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := rep.Write(&out, "json"); err != nil {
		t.Fatal(err)
	}
	var back harness.HeartbeatReport
	if err := json.Unmarshal(out.Bytes(), &back); err != nil || back.Ratio != 0.5 || back.Talon.Ops != 1000 || back.TalonCreated != 10 {
		t.Fatalf("json report %q: %v", out.String(), err)
	}
}
