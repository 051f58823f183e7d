package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// stopGrace is how long a graceful stop waits after SIGTERM before SIGKILL.
const stopGrace = 10 * time.Second

// logTailBytes bounds how much of a server log is copied into test output.
const logTailBytes = 16 << 10

// proc is one server process that can be started, signalled and restarted
// with the same arguments. Its output goes to logPath, appended across
// restarts.
//
// mu guards cmd, done and paused. The waiter goroutine started by start only
// closes the done channel it was handed, so it takes no lock.
type proc struct {
	name    string
	bin     string
	logPath string
	env     []string

	mu     sync.Mutex
	args   []string      // guarded by mu
	cmd    *exec.Cmd     // guarded by mu; nil before the first start
	done   chan struct{} // guarded by mu; closed when cmd has exited
	paused bool          // guarded by mu
}

// start launches the process. It fails if the previous run is still alive.
func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && !isClosed(p.done) {
		return fmt.Errorf("%s is already running (pid %d)", p.name, p.cmd.Process.Pid)
	}
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	// The child gets its own descriptor; ours is closed once it has started,
	// so no goroutine copies output.
	defer logf.Close()
	fmt.Fprintf(logf, "=== testenv: %s starting at %s: %s %s\n", p.name, time.Now().Format(time.RFC3339Nano), p.bin, strings.Join(p.args, " "))

	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.Env = p.env
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait() // the exit status is in cmd.ProcessState
		close(done)
	}()
	p.cmd, p.done, p.paused = cmd, done, false
	return nil
}

// exited returns a channel closed when the current run has exited, or nil
// when the process was never started.
func (p *proc) exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// exitStatus describes how the last run ended, for error messages.
func (p *proc) exitStatus() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || !isClosed(p.done) {
		return "running"
	}
	return p.cmd.ProcessState.String()
}

// signal sends sig to the running process. It is a no-op when the process
// is not running.
func (p *proc) signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.signalLocked(sig)
}

func (p *proc) signalLocked(sig syscall.Signal) error {
	if p.cmd == nil || isClosed(p.done) {
		return nil
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal %v to %s (pid %d): %w", sig, p.name, p.cmd.Process.Pid, err)
	}
	return nil
}

// setPaused sends SIGSTOP or SIGCONT and records the state.
func (p *proc) setPaused(pause bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	sig := syscall.SIGCONT
	if pause {
		sig = syscall.SIGSTOP
	}
	if err := p.signalLocked(sig); err != nil {
		return err
	}
	p.paused = pause
	if pause && p.cmd != nil {
		// Signals are delivered asynchronously: on a busy machine the
		// process can still answer a request right after kill(2)
		// returns. Wait until the kernel reports it stopped.
		waitStopped(p.cmd.Process.Pid, 2*time.Second)
	}
	return nil
}

// waitStopped polls /proc/PID/stat until the process state is T (stopped)
// or d passes. Where /proc is absent it returns at once.
func waitStopped(pid int, d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return
		}
		// The state follows the parenthesised command name.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && (b[i+2] == 'T' || b[i+2] == 't') {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// stop ends the process with SIGTERM (plus SIGCONT, so a paused process can
// handle it), waits up to grace, then SIGKILLs it and waits for it to exit.
// A grace of zero kills at once.
func (p *proc) stop(grace time.Duration) error {
	done := p.exited()
	if done == nil {
		return nil
	}
	if grace > 0 {
		if err := p.signal(syscall.SIGTERM); err != nil {
			return err
		}
		if err := p.signal(syscall.SIGCONT); err != nil {
			return err
		}
		timer := time.NewTimer(grace)
		defer timer.Stop()
		select {
		case <-done:
			return nil
		case <-timer.C:
		}
	}
	// SIGKILL works on a stopped process too.
	if err := p.signal(syscall.SIGKILL); err != nil {
		return err
	}
	select {
	case <-done:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("%s did not exit 30s after SIGKILL", p.name)
	}
}

// logTail returns the end of the log file.
func (p *proc) logTail() string {
	f, err := os.Open(p.logPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	off := max(fi.Size()-logTailBytes, 0)
	b, err := io.ReadAll(io.NewSectionReader(f, off, fi.Size()-off))
	if err != nil {
		return fmt.Sprintf("(reading log: %v)", err)
	}
	s := string(b)
	if off > 0 {
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[i+1:]
		}
		s = "...\n" + s
	}
	return s
}

// pid returns the running process's id, or 0 when it is not running.
func (p *proc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || isClosed(p.done) {
		return 0
	}
	return p.cmd.Process.Pid
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// childEnv is the test's environment without variables that would change a
// server's configuration behind its flags (etcd reads ETCD_* as flags and
// refuses a flag set both ways).
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "ETCD_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// freePorts returns n distinct free TCP ports on 127.0.0.1. The listeners
// are held until all are chosen and then closed, so a server can bind them;
// another process could take one in between, which start retries handle.
func freePorts(n int) ([]int, error) { return freePortsOn("127.0.0.1", n) }

// freePortsOn is freePorts on another loopback address (127.0.0.0/8 is all
// loopback on Linux), so servers of one test can be told apart from other
// engineers' by host as well as by port.
func freePortsOn(host string, n int) ([]int, error) {
	ports := make([]int, 0, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, fmt.Errorf("pick a free port on %s: %w", host, err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// isPaused reports whether the process was last paused and not resumed.
func (p *proc) isPaused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused
}
