package cli_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/talonhq/talon/internal/cli"
	"github.com/talonhq/talon/internal/testsupport"
)

// buildTalonctl builds cmd/talonctl, the real binary with only its own
// imports (the stall this guards against was in a package's init), into
// a temporary directory and returns its path.
func buildTalonctl(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("no go command to build talonctl: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "talonctl")
	build := testsupport.GoBuild(filepath.Join("..", ".."), bin, "./cmd/talonctl")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/talonctl: %v\n%s", err, out)
	}
	return bin
}

// ptyRun runs talonctl args as a child process whose stdin, stdout and
// stderr are a pseudo-terminal that never answers: nothing is ever
// written to its master side. It returns everything the child wrote, its
// exit code and how long it ran.
func ptyRun(t *testing.T, bin string, env []string, args ...string) (out string, code int, took time.Duration) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append([]string{"TERM=xterm-256color", "HOME=" + t.TempDir(), "XDG_CONFIG_HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}, env...)
	start := time.Now()
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 120, Rows: 40})
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	var buf bytes.Buffer
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(&buf, ptmx) // ends with EIO once the child has exited
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("talonctl %s did not end within 20s on a silent terminal; output so far:\n%q", strings.Join(args, " "), buf.String())
	}
	took = time.Since(start)
	<-copied
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatal(err)
	}
	return buf.String(), code, took
}

// TestSilentTerminal runs talonctl on a pseudo-terminal that answers no
// query (as under script, expect, CI runners and ssh -tt): no command but
// top may query the terminal, so each ends well within a second and
// writes no escape sequence. bubbletea v1 spent 5 s in its init waiting
// for an answer to a background-colour query (ESC]11;?), whatever the
// command.
func TestSilentTerminal(t *testing.T) {
	e := startEnv(t, envOptions{seed: true})
	bin := buildTalonctl(t)
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"version --client", nil, []string{"version", "--client"}, "talonctl"},
		{"version --client NO_COLOR", []string{"NO_COLOR=1"}, []string{"version", "--client"}, "talonctl"},
		{"nodes list NO_COLOR", []string{"NO_COLOR=1"}, []string{"nodes", "list", "--server", e.url}, "w-5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, code, took := ptyRun(t, bin, tc.env, tc.args...)
			if code != cli.ExitOK {
				t.Fatalf("exit %d, output:\n%s", code, out)
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("output lacks %q:\n%s", tc.want, out)
			}
			// ESC starts every escape sequence (CSI, OSC such as ESC]11;?);
			// 0x9b is the 8-bit CSI.
			if strings.IndexByte(out, 0x1b) >= 0 || strings.IndexByte(out, 0x9b) >= 0 {
				t.Errorf("output has escape sequences: %q", out)
			}
			if took >= time.Second {
				t.Errorf("took %s on a silent terminal, want under 1s", took)
			}
		})
	}
}
