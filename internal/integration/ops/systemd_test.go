package ops

import (
	"net"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// notifySocket is a fake systemd NOTIFY_SOCKET: a unixgram socket that
// collects the sd_notify datagrams a process sends.
type notifySocket struct {
	path string
	conn *net.UnixConn
}

func newNotifySocket(t *testing.T) *notifySocket {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &notifySocket{path: path, conn: conn}
}

// next returns the next datagram, or "" when none arrives within d.
func (s *notifySocket) next(t *testing.T, d time.Duration) string {
	t.Helper()
	_ = s.conn.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 4096)
	n, err := s.conn.Read(buf)
	if err != nil {
		return ""
	}
	return string(buf[:n])
}

// startNotified starts a talon process with NOTIFY_SOCKET pointing at s.
func startNotified(t *testing.T, s *notifySocket, name string, args ...string) *talontest.Proc {
	t.Helper()
	return talontest.StartWithEnv(t, name, []string{"NOTIFY_SOCKET=" + s.path}, args...)
}

// TestSystemdNotify: under a (fake) systemd NOTIFY_SOCKET, as the
// Type=notify units run it, a worker whose coordinator is not up yet sends
// nothing while its /readyz answers 503; it sends READY=1 once it
// registers, and /readyz answers 200 then; SIGTERM sends STOPPING=1 at
// the start of the drain. The coordinator sends READY=1 too.
func TestSystemdNotify(t *testing.T) {
	talontest.SkipShort(t)
	ctl := talontest.FreeAddr(t)
	ws := newNotifySocket(t)
	worker := startNotified(t, ws, "worker", talontest.WorkerArgs("worker-1", talontest.FreeAddr(t), talontest.FreeAddr(t), []string{ctl}, t.TempDir(), t.TempDir())...)
	testsupport.WaitFor(t, 20*time.Second, "the worker's admin listener", func() bool { return talontest.Live(t, worker) })
	for i := 0; i < 3; i++ {
		if talontest.Ready(t, worker) {
			t.Fatal("the worker is ready without a coordinator")
		}
		if msg := ws.next(t, 700*time.Millisecond); msg != "" {
			t.Fatalf("the worker sent %q while /readyz answers 503", msg)
		}
	}

	cs := newNotifySocket(t)
	coord := startNotified(t, cs, "coordinator", talontest.CoordinatorArgs("coord", ctl, talontest.FreeAddr(t))...)
	if msg := cs.next(t, 30*time.Second); !strings.Contains(msg, "READY=1") {
		t.Fatalf("coordinator: got %q, want READY=1", msg)
	}
	if !talontest.Ready(t, coord) {
		t.Error("the coordinator sent READY=1 but its /readyz does not answer 200")
	}
	msg := ws.next(t, 30*time.Second)
	if !strings.Contains(msg, "READY=1") {
		t.Fatalf("worker: got %q, want READY=1 once registered", msg)
	}
	if !talontest.Ready(t, worker) {
		t.Error("the worker sent READY=1 but its /readyz does not answer 200")
	}
	t.Logf("worker: %q", msg)

	worker.Signal(syscall.SIGTERM)
	if msg := ws.next(t, 10*time.Second); !strings.Contains(msg, "STOPPING=1") {
		t.Fatalf("worker after SIGTERM: got %q, want STOPPING=1", msg)
	}
	select {
	case <-worker.Done:
	case <-time.After(20 * time.Second):
		t.Fatal("the worker did not exit after SIGTERM")
	}
}
