package talontest

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

// The talon binary is built at most once per test binary, into binDir,
// which Main creates and removes.
var (
	buildOnce sync.Once
	talonBin  string
	buildErr  error
	binDir    string
)

// Main runs a test package's tests (call it from TestMain) with a
// temporary directory for the talon binary that the first process started
// builds, and removes the directory when the tests have run.
func Main(m *testing.M) {
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
		if binDir == "" {
			buildErr = fmt.Errorf("talontest: the package's TestMain must call talontest.Main")
			return
		}
		talonBin = filepath.Join(binDir, "talon")
		out, err := testsupport.GoBuild("", talonBin, "github.com/talonhq/talon/cmd/talon").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return talonBin
}

// Binary returns the path of HEAD's talon binary, building it first if
// no process has yet.
func Binary(t *testing.T) string {
	t.Helper()
	return talon(t)
}

// SkipShort skips an integration test under -short.
func SkipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: runs real processes")
	}
}

// handedOut holds the ports FreeAddr returned in this test binary, so two
// processes of one test never get the same one (a port closed by FreeAddr
// can be handed out again by the kernel at once).
var handedOut sync.Map

// FreeAddr returns a loopback address with a port that was free a moment
// ago and that no other FreeAddr call of this run returned.
func FreeAddr(t *testing.T) string {
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

// Proc is a talon process under test.
type Proc struct {
	t     *testing.T
	Name  string
	bin   string // the talon binary; "" for HEAD's (talon)
	args  []string
	env   []string
	Cmd   *exec.Cmd
	Out   *testsupport.SyncBuffer
	Done  chan struct{}
	Admin string // admin listener address
	Addr  string // control or data listener address

	apiOnce sync.Once
	api     *apiv1.Client // API's client, one per process: its connections are reused
	apiErr  error
}

// Start runs talon with args; the process is killed when the test ends,
// and its output is logged if the test failed.
func Start(t *testing.T, name string, args ...string) *Proc {
	t.Helper()
	return StartWithEnv(t, name, nil, args...)
}

// StartWithEnv is start with extra environment variables.
func StartWithEnv(t *testing.T, name string, env []string, args ...string) *Proc {
	t.Helper()
	return StartBin(t, "", name, env, args...)
}

// StartBin is StartWithEnv with the talon binary bin ("" for HEAD's): the
// mixed-version tests run the previous release's (PreviousRelease).
func StartBin(t *testing.T, bin, name string, env []string, args ...string) *Proc {
	t.Helper()
	p := &Proc{t: t, Name: name, bin: bin, args: args, env: env}
	for i, a := range args {
		switch a {
		case "--admin-listen":
			p.Admin = args[i+1]
		case "--listen":
			p.Addr = args[i+1]
		}
	}
	p.run()
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("--- output of %s ---\n%s", p.Name, Tail(p.Out.String(), 4000))
		}
	})
	return p
}

func (p *Proc) run() {
	p.t.Helper()
	p.Out = &testsupport.SyncBuffer{}
	bin := p.bin
	if bin == "" {
		bin = talon(p.t)
	}
	p.Cmd = exec.Command(bin, p.args...)
	p.Cmd.Env = append(os.Environ(), p.env...)
	p.Cmd.Stdout, p.Cmd.Stderr = p.Out, p.Out
	p.Cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.Cmd.Start(); err != nil {
		p.t.Fatalf("start %s: %v", p.Name, err)
	}
	p.Done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(p.Cmd, p.Done)
}

// Restart starts the same command again (a new incarnation).
func (p *Proc) Restart() { p.run() }

// RestartWith starts the same command again with the talon binary bin
// ("" for HEAD's): an upgrade or a rollback of the process.
func (p *Proc) RestartWith(bin string) {
	p.bin = bin
	p.run()
}

// Bin returns the talon binary the process runs ("" for HEAD's).
func (p *Proc) Bin() string { return p.bin }

// Stop sends SIGTERM and waits up to timeout for the process to exit (it
// drains and deregisters); it fails the test if the process does not.
func (p *Proc) Stop(t *testing.T, timeout time.Duration) {
	t.Helper()
	p.Signal(syscall.SIGTERM)
	select {
	case <-p.Done:
	case <-time.After(timeout):
		t.Fatalf("%s did not exit within %v of SIGTERM", p.Name, timeout)
	}
}

// Kill kills the process and waits for it to exit.
func (p *Proc) Kill() {
	if p.Cmd.Process != nil {
		_ = p.Cmd.Process.Kill()
		<-p.Done
	}
}

// Signal sends s to the process.
func (p *Proc) Signal(s os.Signal) { _ = p.Cmd.Process.Signal(s) }

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.Done:
		return true
	default:
		return false
	}
}

// API returns the /api/v1 client of the process's admin listener. It is
// one client per process, so a test that polls keeps reusing its
// connections: a client per call left each call's keep-alive connection
// open, and a coordinator polled for a minute reached its admin
// listener's per-address cap and answered every new connection with EOF.
func (p *Proc) API(t *testing.T) *apiv1.Client {
	t.Helper()
	p.apiOnce.Do(func() {
		p.api, p.apiErr = apiv1.NewClient([]string{"http://" + p.Admin}, apiv1.ClientOptions{Timeout: 2 * time.Second})
	})
	if p.apiErr != nil {
		t.Fatal(p.apiErr)
	}
	return p.api
}

// Tail returns the last n bytes of s, marked as cut when longer.
func Tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// Ready reports whether a process's /readyz says ready.
func Ready(t *testing.T, p *Proc) bool {
	h, err := p.API(t).Readyz(context.Background())
	return err == nil && h.Ready()
}

// Live reports whether a process's /healthz says ok.
func Live(t *testing.T, p *Proc) bool {
	h, err := p.API(t).Healthz(context.Background())
	return err == nil && h.Status == "ok"
}

// InsecureArgs run a process without mutual TLS, for tests about other
// things; internal/integration/security/tls_test.go runs clusters with
// TLS.
var InsecureArgs = []string{"--insecure-control-plane"}

// TimingArgs are short heartbeat settings for tests (whole-second TTL for
// etcd). unhealthy-after 1.5s is the least the timing rule allows for a
// 250ms interval and a 1s request timeout (2 x 250ms + 1s): one lost
// heartbeat and its retry never make a live worker late.
var TimingArgs = []string{"--heartbeat-interval", "250ms", "--unhealthy-after", "1500ms", "--lease-ttl", "3s", "--request-timeout", "1s", "--drain-delay", "0s", "--shutdown-timeout", "2s"}

// CoordinatorArgs are the flags of a coordinator in cluster "it" with TimingArgs,
// then extra; without TLS flags in extra it runs with InsecureArgs.
func CoordinatorArgs(id, listen, admin string, extra ...string) []string {
	args := []string{"coordinator", "--cluster-id", "it", "--node-id", id, "--listen", listen, "--admin-listen", admin, "--log-level", "debug"}
	args = append(args, TimingArgs...)
	return append(args, withTLSDefault(extra)...)
}

// WorkerArgs are the flags of a worker in cluster "it" with a file blob store,
// a 64 MiB cache of 1 MiB blocks and TimingArgs, then extra; without TLS
// flags in extra it runs with InsecureArgs.
func WorkerArgs(id, listen, admin string, coordinators []string, blobDir, cacheDir string, extra ...string) []string {
	args := []string{"worker", "--cluster-id", "it", "--node-id", id, "--listen", listen, "--admin-listen", admin,
		"--coordinators", strings.Join(coordinators, ","), "--blob-store", "file://" + blobDir, "--cache-dir", cacheDir,
		"--cache-capacity", "64MiB", "--block-size", "1MiB", "--log-level", "debug"}
	args = append(args, TimingArgs...)
	return append(args, withTLSDefault(extra)...)
}

// withTLSDefault adds InsecureArgs unless extra configures TLS.
func withTLSDefault(extra []string) []string {
	for _, a := range extra {
		if strings.HasPrefix(a, "--tls-") || strings.HasPrefix(a, "--insecure-") {
			return extra
		}
	}
	return append(slices.Clip(extra), InsecureArgs...)
}

// Result is a talon command run to completion.
type Result struct {
	Code           int
	Stdout, Stderr string
}

// RunTalon runs talon with args to completion (at most a minute).
func RunTalon(t *testing.T, env []string, args ...string) Result {
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
	return Result{Code: code, Stdout: out.String(), Stderr: errOut.String()}
}
