package integration

import (
	"syscall"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/testsupport"
)

// TestSIGTERMDrainsAndSecondSignalExits: SIGTERM makes a coordinator
// unready while it stays live and keeps serving for the drain delay; a
// second SIGTERM ends it at once with status 143.
func TestSIGTERMDrainsAndSecondSignalExits(t *testing.T) {
	skipShort(t)
	args := coordinatorArgs("coord", freeAddr(t), freeAddr(t))
	args = append(args, "--drain-delay", "30s") // later flags win
	c := start(t, "coordinator", args...)
	testsupport.WaitFor(t, 20*time.Second, "coordinator ready", func() bool { return ready(t, c) })

	c.signal(syscall.SIGTERM)
	testsupport.WaitFor(t, 5*time.Second, "unready after SIGTERM", func() bool { return !ready(t, c) })
	if !live(t, c) || c.exited() {
		t.Fatal("coordinator stopped serving during the drain delay")
	}
	c.signal(syscall.SIGTERM)
	testsupport.WaitFor(t, 5*time.Second, "exit after the second SIGTERM", c.exited)
	// The process was reaped by the proc's own waiter.
	if code := c.cmd.ProcessState.ExitCode(); code != 143 {
		t.Fatalf("exit code %d after a second SIGTERM, want 143", code)
	}
}
