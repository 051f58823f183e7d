package cli_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/coordtest"
)

// tmuxBin returns tmux: TALON_TMUX (set by make test from
// .ci/ensure-tool.sh), or PATH.
func tmuxBin(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("TALON_TMUX"); p != "" {
		return p
	}
	p, err := exec.LookPath("tmux")
	if err != nil {
		t.Fatal("tmux not found: run make test (it installs it) or set TALON_TMUX")
	}
	return p
}

// tmuxSession runs talonctl in a detached tmux session of w×h cells on
// its own server socket, and returns a function that captures the
// screen as text.
func tmuxSession(t *testing.T, tmux, bin string, w, h int, env []string, args ...string) func() string {
	t.Helper()
	sock := fmt.Sprintf("talon-top-%d-%d", os.Getpid(), w)
	cmdline := strings.Join(append([]string{"env"}, append(env, append([]string{bin}, args...)...)...), " ")
	start := exec.Command(tmux, "-L", sock, "-f", "/dev/null", "new-session", "-d", "-s", "top", "-x", fmt.Sprint(w), "-y", fmt.Sprint(h), cmdline)
	start.Env = append(os.Environ(), "TERM=xterm-256color")
	if out, err := start.CombinedOutput(); err != nil {
		t.Fatalf("tmux new-session: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command(tmux, "-L", sock, "kill-server").Run() })
	return func() string {
		out, err := exec.Command(tmux, "-L", sock, "capture-pane", "-p", "-t", "top").Output()
		if err != nil {
			return ""
		}
		return string(out)
	}
}

// TestTopInTmux runs the real talonctl top in tmux at 80×24, 120×40 and
// 200×60: the observation age, "? help" and "q quit" are on screen at
// every size, the help overlay fits, and after a store outage the STALE
// banner clears within one refresh interval of the coordinator's
// recovery.
func TestTopInTmux(t *testing.T) {
	integration(t)
	tmux := tmuxBin(t)
	bin := buildTalonctl(t)
	// A coordinator on real clocks (the shared env's liveness clock
	// stands still, so it would never leave a recovery hold).
	c := coordtest.Start(t, coordtest.Options{
		ClusterID: clusterID, NodeID: "coord-a", Timing: testTiming, RequestTimeout: 200 * time.Millisecond, ShutdownTimeout: time.Second,
		Admin: &config.AdminConfig{ExposeHealth: true, ExposeAPI: true},
	})
	for i := 1; i <= 5; i++ {
		rec := &cluster.Record{ClusterID: clusterID, NodeID: fmt.Sprintf("w-%d", i), Role: cluster.RoleWorker, IncarnationID: "inc",
			Address: fmt.Sprintf("w-%d.data.test:7500", i), Version: "1.4.0", Health: cluster.HealthHealthy, Ready: true, FeatureLevel: cluster.BuildLevel}
		if _, err := c.Memory.UpsertNode(context.Background(), rec, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitReady(t)
	const refresh = time.Second
	env := []string{"TALONCTL_SERVER=" + c.AdminURL, "XDG_CONFIG_HOME=" + t.TempDir(), "NO_COLOR=1"}
	for _, size := range []struct{ w, h int }{{80, 24}, {120, 40}, {200, 60}} {
		t.Run(fmt.Sprintf("%dx%d", size.w, size.h), func(t *testing.T) {
			screen := tmuxSession(t, tmux, bin, size.w, size.h, env, "top", "--refresh", refresh.String())
			var s string
			// Wait for a whole frame, footer included: a capture taken while
			// tmux paints the first one can hold only its top lines.
			testsupport.WaitFor(t, 15*time.Second, "top on screen, footer included", func() bool {
				s = screen()
				return strings.Contains(s, "w-5") && strings.Contains(s, "observed") && strings.Contains(s, "q quit")
			})
			for _, want := range []string{"observed", "? help", "q quit", "ROLE", "NODE", "HEALTH"} {
				if !strings.Contains(s, want) {
					t.Errorf("screen lacks %q:\n%s", want, s)
				}
			}
			lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
			for i, l := range lines {
				if strings.HasSuffix(l, "…") && strings.Contains(l, "observed") {
					t.Errorf("line %d, the observation age, is cut: %q", i, l)
				}
			}
			if size.h >= 40 && !strings.Contains(s, "EVENTS of coord-a") {
				t.Errorf("no events pane at %dx%d:\n%s", size.w, size.h, s)
			}
			if wide := size.w >= 160 && size.h >= 50; wide != strings.Contains(s, "COORDINATORS as their records show them") {
				t.Errorf("coordinators pane at %dx%d: shown %v, want %v:\n%s", size.w, size.h, !wide, wide, s)
			}
			// The help overlay fits: every key's description is on screen.
			sock := fmt.Sprintf("talon-top-%d-%d", os.Getpid(), size.w)
			if err := exec.Command(tmux, "-L", sock, "send-keys", "-t", "top", "?").Run(); err != nil {
				t.Fatal(err)
			}
			testsupport.WaitFor(t, 5*time.Second, "the help overlay", func() bool { return strings.Contains(screen(), "scroll columns right") })
			s = screen()
			for _, want := range []string{"refresh now", "quit", "toggle coordinators", "reverse order", "scroll columns left", "back / clear filter"} {
				if !strings.Contains(s, want) {
					t.Errorf("help overlay lacks %q at %dx%d:\n%s", want, size.w, size.h, s)
				}
			}
			_ = exec.Command(tmux, "-L", sock, "send-keys", "-t", "top", "?").Run()

			if size.w != 120 {
				return
			}
			// A store outage long enough for an exponential backoff to
			// grow: STALE appears, and clears within one refresh of the
			// coordinator answering again.
			c.Memory.SetFault(fmt.Errorf("%w: injected outage", state.ErrUnavailable))
			testsupport.WaitFor(t, 15*time.Second, "STALE", func() bool { return strings.Contains(screen(), "STALE") })
			time.Sleep(8 * time.Second) // an exponential backoff would reach 4-8 s
			c.Memory.SetFault(nil)
			api := c.AdminURL
			testsupport.WaitFor(t, 15*time.Second, "the coordinator answering again", func() bool {
				r := talonctl(t, run{args: []string{"cluster", "status"}, env: []string{"TALONCTL_SERVER=" + api}})
				return r.code == 0
			})
			back := time.Now()
			testsupport.WaitFor(t, 15*time.Second, "STALE cleared", func() bool { return !strings.Contains(screen(), "STALE") })
			took := time.Since(back)
			t.Logf("STALE cleared %s after the coordinator answered again (refresh %s)", took.Round(10*time.Millisecond), refresh)
			if took > refresh+500*time.Millisecond {
				t.Errorf("STALE cleared %s after recovery, more than one refresh interval (%s)", took, refresh)
			}
		})
	}
}
