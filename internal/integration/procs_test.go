package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/testsupport"
)

var (
	buildOnce sync.Once
	talonBin  string
	buildErr  error
	binDir    string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "talon-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// talon builds the talon binary once and returns its path. With
// TALON_TEST_BINARY set, the tests run that binary instead (an older
// build, to show that a test fails on the code before a fix).
func talon(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if p := os.Getenv("TALON_TEST_BINARY"); p != "" {
			talonBin = p
			return
		}
		talonBin = filepath.Join(binDir, "talon")
		out, err := exec.Command("go", "build", "-o", talonBin, "github.com/talonhq/talon/cmd/talon").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return talonBin
}

func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: runs real processes")
	}
}

// handedOut holds the ports freeAddr returned in this test binary, so two
// processes of one test never get the same one (a port closed by freeAddr
// can be handed out again by the kernel at once).
var handedOut sync.Map

// freeAddr returns a loopback address with a port that was free a moment
// ago and that no other freeAddr call of this run returned.
func freeAddr(t *testing.T) string {
	t.Helper()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		if _, taken := handedOut.LoadOrStore(addr, true); !taken {
			return addr
		}
	}
	t.Fatal("no fresh loopback port after 100 tries")
	return ""
}

// proc is a talon process under test.
type proc struct {
	t     *testing.T
	name  string
	args  []string
	env   []string
	cmd   *exec.Cmd
	out   *testsupport.SyncBuffer
	done  chan struct{}
	admin string // admin listener address
	addr  string // control or data listener address
}

// start runs talon with args; the process is killed when the test ends,
// and its output is logged if the test failed.
func start(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	return startWithEnv(t, name, nil, args...)
}

// startWithEnv is start with extra environment variables.
func startWithEnv(t *testing.T, name string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, name: name, args: args, env: env}
	for i, a := range args {
		switch a {
		case "--admin-listen":
			p.admin = args[i+1]
		case "--listen":
			p.addr = args[i+1]
		}
	}
	p.run()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("--- output of %s ---\n%s", p.name, tail(p.out.String(), 4000))
		}
	})
	return p
}

func (p *proc) run() {
	p.t.Helper()
	p.out = &testsupport.SyncBuffer{}
	p.cmd = exec.Command(talon(p.t), p.args...)
	p.cmd.Env = append(os.Environ(), p.env...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		p.t.Fatalf("start %s: %v", p.name, err)
	}
	p.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(p.cmd, p.done)
}

// restart starts the same command again (a new incarnation).
func (p *proc) restart() { p.run() }

func (p *proc) kill() {
	if p.cmd.Process != nil {
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *proc) signal(s os.Signal) { _ = p.cmd.Process.Signal(s) }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) api(t *testing.T) *apiv1.Client {
	t.Helper()
	c, err := apiv1.NewClient([]string{"http://" + p.admin}, apiv1.ClientOptions{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// ready reports whether a process's /readyz says ready.
func ready(t *testing.T, p *proc) bool {
	h, err := p.api(t).Readyz(context.Background())
	return err == nil && h.Ready()
}

func live(t *testing.T, p *proc) bool {
	h, err := p.api(t).Healthz(context.Background())
	return err == nil && h.Status == "ok"
}

// insecureArgs run a process without mutual TLS, for tests about other
// things; tls_test.go runs clusters with it.
var insecureArgs = []string{"--insecure-control-plane"}

// timingArgs are short heartbeat settings for tests (whole-second TTL for
// etcd). unhealthy-after 1.5s is the least the timing rule allows for a
// 250ms interval and a 1s request timeout (2 x 250ms + 1s): one lost
// heartbeat and its retry never make a live worker late.
var timingArgs = []string{"--heartbeat-interval", "250ms", "--unhealthy-after", "1500ms", "--lease-ttl", "3s", "--request-timeout", "1s", "--drain-delay", "0s", "--shutdown-timeout", "2s"}

func coordinatorArgs(id, listen, admin string, extra ...string) []string {
	args := []string{"coordinator", "--cluster-id", "it", "--node-id", id, "--listen", listen, "--admin-listen", admin, "--log-level", "debug"}
	args = append(args, timingArgs...)
	return append(args, withTLSDefault(extra)...)
}

func workerArgs(id, listen, admin string, coordinators []string, blobDir, cacheDir string, extra ...string) []string {
	args := []string{"worker", "--cluster-id", "it", "--node-id", id, "--listen", listen, "--admin-listen", admin,
		"--coordinators", strings.Join(coordinators, ","), "--blob-store", "file://" + blobDir, "--cache-dir", cacheDir,
		"--cache-capacity", "64MiB", "--block-size", "1MiB", "--log-level", "debug"}
	args = append(args, timingArgs...)
	return append(args, withTLSDefault(extra)...)
}

// withTLSDefault adds insecureArgs unless extra configures TLS.
func withTLSDefault(extra []string) []string {
	for _, a := range extra {
		if strings.HasPrefix(a, "--tls-") || strings.HasPrefix(a, "--insecure-") {
			return extra
		}
	}
	return append(slices.Clip(extra), insecureArgs...)
}

// result is a talon command run to completion.
type result struct {
	code           int
	stdout, stderr string
}

// runTalon runs talon with args to completion (at most a minute).
func runTalon(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, talon(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run talon %v: %v", args, err)
	}
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}
