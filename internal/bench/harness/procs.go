package harness

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
)

// ProcUsage is what /proc says of one process: CPU time (user and
// system) and resident set.
type ProcUsage struct {
	CPU time.Duration
	RSS int64 // bytes
}

// readUsage reads pid's CPU time and resident set from /proc/PID/stat,
// with prometheus/procfs (the reader client_golang's process collector
// uses).
func readUsage(pid int) (ProcUsage, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return ProcUsage{}, err
	}
	st, err := p.Stat()
	if err != nil {
		return ProcUsage{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return ProcUsage{CPU: time.Duration(st.CPUTime() * float64(time.Second)), RSS: int64(st.ResidentMemory())}, nil
}

// freeAddr returns a free TCP address on host: a port the kernel picked,
// closed again for a child process to listen on.
func freeAddr(host string) (string, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// child is a process the harness started: a coordinator or a fleet. Its
// stderr goes line by line to onLine and the last lines are kept for an
// error message.
type child struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser // nil unless asked for
	done  chan struct{}  // closed when the process has exited and its output is read
	err   error          // the exit status; set before done closes

	mu   sync.Mutex // guards tail
	tail []string
}

// startChild starts exe with args and env added to this process's
// environment. With withStdin its stdin is a pipe (child.stdin); stdout,
// when not nil, receives its stdout; onLine, when not nil, each line of
// its stderr.
func startChild(name, exe string, args, env []string, withStdin bool, stdout io.Writer, onLine func(string)) (*child, error) {
	c := &child{name: name, done: make(chan struct{})}
	c.cmd = exec.Command(exe, args...)
	c.cmd.Env = append(os.Environ(), env...)
	c.cmd.Stdout = stdout
	c.cmd.SysProcAttr = sysProcAttr()
	if withStdin {
		w, err := c.cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		c.stdin = w
	}
	stderr, err := c.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			c.addLine(sc.Text())
			if onLine != nil {
				onLine(sc.Text())
			}
		}
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

func (c *child) addLine(l string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tail = append(c.tail, l)
	if len(c.tail) > 20 {
		c.tail = c.tail[1:]
	}
}

// pid returns the process's ID.
func (c *child) pid() int { return c.cmd.Process.Pid }

// exitError returns the process's exit error with the last lines it
// wrote to stderr.
func (c *child) exitError() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Errorf("%s exited: %v; its last output:\n%s", c.name, c.err, strings.Join(c.tail, "\n"))
}

// stop sends SIGTERM and waits up to grace for the exit, then kills the
// process. It returns the exit error unless the process ended by the
// signal or with status 0.
func (c *child) stop(grace time.Duration) error {
	select {
	case <-c.done:
	default:
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.done:
		case <-time.After(grace):
			_ = c.cmd.Process.Kill()
			<-c.done
			return fmt.Errorf("%s did not stop within %s of SIGTERM: killed", c.name, grace)
		}
	}
	var ee *exec.ExitError
	if c.err != nil && !(errors.As(c.err, &ee) && !ee.Exited()) {
		return c.exitError()
	}
	return nil
}

// waitHTTP200 polls url until it answers 200, the child exits, ctx ends or
// timeout passes.
func waitHTTP200(ctx context.Context, c *child, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	hc := &http.Client{Timeout: time.Second}
	last := "no answer"
	for time.Now().Before(deadline) {
		if resp, err := hc.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case <-c.done:
			return c.exitError()
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s: %s not 200 after %s: %s", c.name, url, timeout, last)
}
