package app

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/testsupport"
)

// TestReadmeTour runs the README's tour, as printed, against `make demo`:
// the command line of the Makefile's demo target (with --dir added) as a
// real process on loopback, then every line of the tour's command block
// with bin/talon and bin/talonctl built from this tree. DIR, PID and the
// admin URL of coordinator-1 are replaced by the banner's, /tmp/ by the
// test's directory. A line fails the test when it exits non-zero, except
// for those that run until stopped (top, events -w, a worker), which must
// still be running after a few seconds: top runs once (--once), the
// others are stopped then.
func TestReadmeTour(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries and starts a dev cluster")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	for _, b := range []string{"talon", "talonctl"} {
		cmd := testsupport.GoBuild(root, filepath.Join(work, "bin", b), "./cmd/"+b)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", b, err, out)
		}
	}
	lines := tourLines(t, filepath.Join(root, "README.md"))
	demo := demoArgs(t, filepath.Join(root, "Makefile"))

	dir := filepath.Join(work, "dev")
	env := append(os.Environ(),
		"XDG_CONFIG_HOME="+filepath.Join(work, "config"), // never the user's contexts
		"XDG_CACHE_HOME="+filepath.Join(work, "cache"),
		"NO_COLOR=1")
	out := &testsupport.SyncBuffer{}
	dev := exec.Command(filepath.Join(work, "bin", "talon"), append(demo, "--dir", dir)...)
	dev.Dir, dev.Env, dev.Stdout, dev.Stderr = work, env, out, out
	if err := dev.Start(); err != nil {
		t.Fatal(err)
	}
	devDone := make(chan error, 1)
	go func() { devDone <- dev.Wait() }()
	t.Cleanup(func() {
		_ = dev.Process.Signal(os.Interrupt)
		select {
		case <-devDone:
		case <-time.After(30 * time.Second):
			_ = dev.Process.Kill()
			<-devDone
			t.Error("talon dev did not stop within 30s of SIGINT")
		}
	})
	testsupport.WaitFor(t, 90*time.Second, "the dev banner", func() bool { return strings.Contains(out.String(), "bin/talon worker --dev-dir") })
	banner := out.String()
	admin := regexp.MustCompile(`coordinator-1\s+control \S+\s+admin (http://\S+)`).FindStringSubmatch(banner)
	pid := regexp.MustCompile(`kill -USR1 (\d+)`).FindStringSubmatch(banner)
	worker := regexp.MustCompile(`(?m)^\s*(bin/talon worker --dev-dir .*)$`).FindStringSubmatch(banner)
	if admin == nil || pid == nil || worker == nil {
		t.Fatalf("the banner names no coordinator-1 admin URL, kill -USR1 PID or worker line:\n%s", banner)
	}
	testsupport.WaitFor(t, 30*time.Second, "three eligible workers", func() bool {
		cl, err := newAPI(t, admin[1], strings.TrimSpace(readFile(t, filepath.Join(dir, "admin-token")))).Cluster(context.Background())
		return err == nil && cl.EligibleWorkers == 3
	})

	replace := strings.NewReplacer("DIR", dir, "PID", pid[1], "http://127.0.0.1:7401", admin[1], "/tmp/", work+"/")
	for _, line := range lines {
		cmdline := replace.Replace(line)
		if strings.HasPrefix(line, "bin/talon worker ") {
			cmdline = worker[1]
		}
		if name, value, ok := strings.Cut(strings.TrimPrefix(cmdline, "export "), "="); ok && strings.HasPrefix(cmdline, "export ") {
			env = append(env, name+"="+strings.Fields(value)[0])
			continue
		}
		t.Logf("$ %s", line)
		stdout := runTourLine(t, work, env, cmdline, out)
		// top is on coordinator-1, the one kill -USR1 stops; after it,
		// talonctl fails over to another.
		if strings.Contains(line, "talonctl top") && !strings.Contains(stdout, "served by coordinator-1") {
			t.Errorf("%s: not served by coordinator-1, the coordinator kill -USR1 stops:\n%s", line, stdout)
		}
		if strings.HasPrefix(line, "kill -USR1") {
			if got := runTourLine(t, work, env, "bin/talonctl top --once", out); !regexp.MustCompile(`served by coordinator-[23] `).MatchString(got) {
				t.Errorf("after kill -USR1, top is not served by another coordinator:\n%s", got)
			}
		}
		if strings.HasPrefix(line, "bin/talon worker ") && !joined(t, admin[1], dir, "worker-4") {
			t.Errorf("%s: worker-4 never joined", line)
		}
	}
}

// joined reports whether the coordinator at url reports a join of node
// (the worker the tour starts has stopped and left by now; its join
// event stays).
func joined(t *testing.T, url, dir, node string) bool {
	t.Helper()
	evs, err := newAPI(t, url, strings.TrimSpace(readFile(t, filepath.Join(dir, "admin-token")))).Events(context.Background(), apiv1.EventFilter{NodeID: node})
	if err != nil {
		t.Errorf("events of %s: %v", node, err)
		return false
	}
	for _, e := range evs.Items {
		if e.Type == "node_joined" {
			return true
		}
	}
	return false
}

// runTourLine runs one line of the tour with bash in dir, fails the test
// when it fails, and returns its stdout.
func runTourLine(t *testing.T, dir string, env []string, line string, devOut *testsupport.SyncBuffer) string {
	t.Helper()
	endless := regexp.MustCompile(`talonctl (events -w|top)\b|talon worker `).FindStringSubmatch(line)
	if strings.Contains(line, "talonctl top") {
		line = strings.Replace(line, "talonctl top", "talonctl top --once", 1)
		endless = nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if endless != nil {
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, "bash", "-c", line)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) }
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	t.Logf("  %.1fs, %d bytes of output", time.Since(start).Seconds(), stdout.Len())
	switch {
	case endless != nil && ctx.Err() == nil:
		t.Errorf("%s: stopped by itself before 5s (%v), it should run until stopped\nstdout:\n%s\nstderr:\n%s", line, err, stdout.String(), stderr.String())
	case endless != nil && stdout.Len() == 0 && !strings.Contains(line, "talon worker "):
		t.Errorf("%s: printed nothing in 5s\nstderr:\n%s", line, stderr.String())
	case endless == nil && err != nil:
		t.Errorf("%s: %v\nstdout:\n%s\nstderr:\n%s", line, err, stdout.String(), stderr.String())
	}
	if m := regexp.MustCompile(`kill -(USR[12]) `).FindStringSubmatch(line); m != nil {
		want := map[string]string{"USR1": "SIGUSR1: stopped coordinator-1", "USR2": "SIGUSR2: started coordinator-1 again"}[m[1]]
		testsupport.WaitFor(t, 20*time.Second, want, func() bool { return strings.Contains(devOut.String(), want) })
	}
	return stdout.String()
}

// tourLines returns the command lines of the README's tour: the first sh
// block after the heading "## A tour".
func tourLines(t *testing.T, readme string) []string {
	t.Helper()
	text := readFile(t, readme)
	_, tour, ok := strings.Cut(text, "\n## A tour\n")
	if !ok {
		t.Fatal("README.md has no section ## A tour")
	}
	_, block, ok := strings.Cut(tour, "\n```sh\n")
	if !ok {
		t.Fatal("the tour has no ```sh block")
	}
	block, _, _ = strings.Cut(block, "\n```")
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(block))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	if len(lines) < 10 {
		t.Fatalf("the tour's block has %d commands; want the whole tour", len(lines))
	}
	return lines
}

// demoArgs returns the arguments of bin/talon in the Makefile's demo
// target.
func demoArgs(t *testing.T, makefile string) []string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^demo:.*\n\t\./bin/talon (.*)$`).FindStringSubmatch(readFile(t, makefile))
	if m == nil {
		t.Fatal("the Makefile's demo target does not run ./bin/talon")
	}
	return strings.Fields(m[1])
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return string(b)
}
