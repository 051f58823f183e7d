package top

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
	"go.uber.org/goleak"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cli/cmdutil"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/state/memory"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/coordtest"
	"github.com/talonhq/talon/tui"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const clusterID = "test"

// factory returns a factory with test streams, no environment (so no
// config file) and the given servers.
func factory(tty bool, servers ...string) (*cmdutil.Factory, *bytes.Buffer, *bytes.Buffer) {
	var out, errOut bytes.Buffer
	f := &cmdutil.Factory{IO: cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut, StdoutTTY: tty, NoColor: true}}
	f.Conn.Servers = servers
	return f, &out, &errOut
}

// parse runs the command with args and returns the options runF saw (nil
// when it was not reached) and the command's error.
func parse(t *testing.T, f *cmdutil.Factory, args ...string) (*TopOptions, error) {
	t.Helper()
	var got *TopOptions
	cmd := NewCmdTop(f, func(o *TopOptions) error { got = o; return nil })
	cmd.SetArgs(args)
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	return got, cmd.Execute()
}

func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		name     string
		tty      bool
		args     []string
		wantCode int
		wantErr  string
		check    func(t *testing.T, o *TopOptions)
	}{
		{name: "defaults on a terminal", tty: true, check: func(t *testing.T, o *TopOptions) {
			if o.Refresh != 2*time.Second || o.Once || o.UnhealthyAfter != 15*time.Second || o.AllowStale {
				t.Errorf("options %+v", o)
			}
		}},
		{name: "refresh at the minimum", tty: true, args: []string{"--refresh", "500ms"}, check: func(t *testing.T, o *TopOptions) {
			if o.Refresh != 500*time.Millisecond {
				t.Errorf("refresh %s", o.Refresh)
			}
		}},
		{name: "refresh below the minimum", tty: true, args: []string{"--refresh", "100ms"},
			wantCode: cmdutil.ExitUsage, wantErr: "--refresh 100ms: must be at least 500ms"},
		{name: "zero refresh", tty: true, args: []string{"--refresh", "0s"},
			wantCode: cmdutil.ExitUsage, wantErr: "--refresh 0s: must be at least 500ms"},
		{name: "unhealthy-after zero", tty: true, args: []string{"--unhealthy-after", "0s"},
			wantCode: cmdutil.ExitUsage, wantErr: "--unhealthy-after 0s: must be positive"},
		{name: "no terminal without --once", tty: false,
			wantCode: cmdutil.ExitUsage, wantErr: "stdout is not a terminal: talonctl top draws a live view and needs one; use --once to print one frame"},
		{name: "no terminal with --once", tty: false, args: []string{"--once"}, check: func(t *testing.T, o *TopOptions) {
			if !o.Once {
				t.Error("--once not set")
			}
		}},
		{name: "arguments refused", tty: true, args: []string{"nodes"}, wantCode: cmdutil.ExitUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, _, _ := factory(tc.tty, "http://127.0.0.1:1")
			o, err := parse(t, f, tc.args...)
			if code := cmdutil.ExitCode(err); code != tc.wantCode {
				t.Fatalf("exit code %d (%v), want %d", code, err, tc.wantCode)
			}
			if tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr) {
				t.Fatalf("error %q, want %q", err, tc.wantErr)
			}
			if tc.wantCode != 0 && o != nil {
				t.Fatal("run reached despite the usage error")
			}
			if tc.check != nil {
				tc.check(t, o)
			}
		})
	}
}

func TestFetchTimeout(t *testing.T) {
	for _, tc := range []struct{ conn, refresh, want time.Duration }{
		{10 * time.Second, 2 * time.Second, 5 * time.Second},
		{10 * time.Second, 4 * time.Second, 8 * time.Second},
		{10 * time.Second, time.Minute, 10 * time.Second},
		{time.Second, 2 * time.Second, time.Second},
	} {
		t.Run(fmt.Sprintf("timeout %s refresh %s", tc.conn, tc.refresh), func(t *testing.T) {
			if got := fetchTimeout(tc.conn, tc.refresh); got != tc.want {
				t.Errorf("fetchTimeout = %s, want %s", got, tc.want)
			}
		})
	}
}

// env is a real coordinator over a memory store, with its admin listener
// on loopback and three seeded workers.
type env struct {
	store *memory.Store
	coord *coordtest.Coordinator
	hs    *httptest.Server
}

// integration skips tests that run a coordinator under -short.
func integration(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: runs a coordinator and its admin listener on loopback")
	}
}

func startEnv(t *testing.T) *env {
	t.Helper()
	integration(t)
	c := coordtest.Start(t, coordtest.Options{
		ClusterID: clusterID, NodeID: "coord-a", Advertise: "coord-a.test:7400",
		Timing:         cluster.Timing{HeartbeatInterval: 200 * time.Millisecond, UnhealthyAfter: 10 * time.Second, LeaseTTL: time.Hour},
		RequestTimeout: 200 * time.Millisecond, ShutdownTimeout: time.Second,
		Admin: &config.AdminConfig{ExposeHealth: true, ExposeAPI: true},
	})
	e := &env{store: c.Memory, coord: c, hs: c.AdminServer}
	for i := 1; i <= 3; i++ {
		rec := &cluster.Record{
			ClusterID: clusterID, NodeID: fmt.Sprintf("w-%d", i), Role: cluster.RoleWorker, IncarnationID: fmt.Sprintf("inc-%d", i),
			Address: fmt.Sprintf("w-%d.test:7500", i), Version: "1.4.0", Health: cluster.HealthHealthy, Ready: true, FeatureLevel: cluster.BuildLevel,
			StartTimeUnixMs: time.Now().Add(-time.Hour).UnixMilli(), HeartbeatSeq: 1,
			Capacity: cluster.Capacity{CapacityBytes: 8 << 30, ResidentBytes: uint64(i) << 30},
		}
		if _, err := e.store.UpsertNode(context.Background(), rec, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitReady(t)
	return e
}

// TestOnce prints one frame of a real cluster without a terminal.
func TestOnce(t *testing.T) {
	e := startEnv(t)
	f, out, _ := factory(false, e.hs.URL)
	o, err := parse(t, f, "--once")
	if err != nil {
		t.Fatal(err)
	}
	if err := topRun(context.Background(), o); err != nil {
		t.Fatalf("top --once: %v", err)
	}
	frame := out.String()
	for _, s := range []string{
		"cluster test", "served by coord-a (" + e.hs.URL + ")", "store memory healthy",
		"coordinators 1/1: 1 healthy, 1 ready", "workers 3: 3 healthy, 3 ready", "coord-a", "w-1", "w-2", "w-3", "3.0G/8.0G",
	} {
		if !strings.Contains(frame, s) {
			t.Errorf("frame lacks %q:\n%s", s, frame)
		}
	}
	if strings.Contains(frame, "\x1b") || strings.Contains(frame, "STALE") {
		t.Errorf("frame has escape sequences or a STALE banner:\n%q", frame)
	}
}

// TestOnceColour checks that --once colours only a terminal without
// NO_COLOR.
func TestOnceColour(t *testing.T) {
	e := startEnv(t)
	for _, tc := range []struct {
		name       string
		tty        bool
		noColor    bool
		wantEscape bool
	}{
		{"terminal", true, false, true},
		{"terminal with NO_COLOR", true, true, false},
		{"pipe", false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, out, _ := factory(tc.tty, e.hs.URL)
			f.IO.NoColor = tc.noColor
			f.IO.ColorProfile = colorprofile.ANSI256
			o, err := parse(t, f, "--once")
			if err != nil {
				t.Fatal(err)
			}
			if err := topRun(context.Background(), o); err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(out.String(), "\x1b["); got != tc.wantEscape {
				t.Errorf("escape sequences: %v, want %v:\n%q", got, tc.wantEscape, out.String())
			}
		})
	}
}

// TestOnceUnavailable prints nothing and exits 3 when no server answers.
func TestOnceUnavailable(t *testing.T) {
	integration(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	f, out, _ := factory(false, url)
	o, err := parse(t, f, "--once")
	if err != nil {
		t.Fatal(err)
	}
	err = topRun(context.Background(), o)
	if code := cmdutil.ExitCode(err); code != cmdutil.ExitUnavailable {
		t.Fatalf("exit code %d (%v), want %d", code, err, cmdutil.ExitUnavailable)
	}
	if out.Len() != 0 {
		t.Errorf("stdout %q, want nothing", out.String())
	}
}

// TestLiveStale runs the real program against a real coordinator, makes
// the API fail, and checks that the STALE banner appears over the last
// good data, which stays on screen.
func TestLiveStale(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fail  func(e *env)
		error string
	}{
		{"coordinator and admin listener stopped", func(e *env) { e.coord.Stop(); e.hs.Close() }, "admin api unavailable"},
		{"store fails", func(e *env) {
			e.store.SetFault(fmt.Errorf("injected outage: %w", state.ErrUnavailable))
		}, "503 not_ready"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := startEnv(t)
			f, _, _ := factory(true, e.hs.URL)
			o, err := parse(t, f, "--refresh", "500ms")
			if err != nil {
				t.Fatal(err)
			}
			in, keys := io.Pipe()
			out := &testsupport.SyncBuffer{}
			o.IO.In, o.IO.Out = in, out
			finals := make(chan *tui.Model, 1)
			o.onExit = func(m *tui.Model) { finals <- m }
			// The output is a buffer, not a terminal: give the program a size.
			o.programOptions = []tea.ProgramOption{tea.WithWindowSize(140, 30)}
			ran := make(chan error, 1)
			go func() { ran <- topRun(context.Background(), o) }()
			t.Cleanup(func() { keys.Close() })

			testsupport.WaitFor(t, 15*time.Second, "the first poll on screen", func() bool { return strings.Contains(out.String(), "w-3") })
			tc.fail(e)
			testsupport.WaitFor(t, 15*time.Second, "the STALE banner", func() bool { return strings.Contains(out.String(), "STALE") })
			if _, err := keys.Write([]byte("q")); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-ran:
				if err != nil {
					t.Fatalf("top: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("top did not quit on q")
			}
			keys.Close()
			m := <-finals
			if !m.Stale() || m.Last() == nil || m.Failures() == 0 {
				t.Fatalf("final model: stale %v, poll %v, failures %d", m.Stale(), m.Last() != nil, m.Failures())
			}
			if !strings.Contains(m.Err().Error(), tc.error) {
				t.Errorf("error %q, want it to mention %q", m.Err(), tc.error)
			}
			view := m.Frame()
			for _, s := range []string{"STALE", "showing the last good snapshot", tc.error, "next retry in", "cluster test", "coord-a", "w-1", "w-2", "w-3"} {
				if !strings.Contains(view, s) {
					t.Errorf("final view lacks %q:\n%s", s, view)
				}
			}
		})
	}
}

// TestOnceWaitsForTwoStatusSamples: a worker whose heartbeat renewed only
// its lease at the second poll has no new counters yet; --once polls again
// until it has, so that the frame shows its rate, not "-".
func TestOnceWaitsForTwoStatusSamples(t *testing.T) {
	base := time.Now().Add(-time.Minute).UnixMilli()
	node := func(hbMs, statusMs int64, requests uint64) apiv1.Node {
		return apiv1.Node{NodeID: "w-1", Role: "worker", IncarnationID: "i1", Health: "healthy", Ready: true,
			HeartbeatAtUnixMs: base + hbMs, UpdatedAtUnixMs: base + statusMs, StatusAtUnixMs: base + statusMs,
			Counters: apiv1.Counters{RequestsTotal: requests}}
	}
	polls := []apiv1.Node{
		node(0, 0, 1000),       // first sample
		node(1000, 0, 1000),    // lease renewed, status not rewritten
		node(2000, 2000, 3000), // second status: 2000 requests in 2s
	}
	var fetches int
	get := func(context.Context) (*tui.Poll, error) {
		n := polls[min(fetches, len(polls)-1)]
		fetches++
		return &tui.Poll{Cluster: apiv1.Cluster{ClusterID: "test", Timing: apiv1.Timing{HeartbeatIntervalMs: 10, StatusIntervalMs: 2000}}, Nodes: []apiv1.Node{n}}, nil
	}
	f, out, _ := factory(false)
	o, err := parse(t, f, "--once")
	if err != nil {
		t.Fatal(err)
	}
	if err := onceRun(context.Background(), o, tui.Options{Refresh: time.Second, UnhealthyAfter: time.Hour, Now: time.Now}, colorprofile.NoTTY, get); err != nil {
		t.Fatal(err)
	}
	if fetches != 3 {
		t.Errorf("%d fetches, want 3: the third carries the second status", fetches)
	}
	if !regexp.MustCompile(`(?m)\sw-1\s.*\s1\.00k\s`).MatchString(out.String()) {
		t.Errorf("no rate of 1000 req/s for w-1:\n%s", out.String())
	}
}
