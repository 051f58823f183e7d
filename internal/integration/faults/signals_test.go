package faults

import (
	"syscall"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// TestSIGTERMDrainsAndSecondSignalExits: SIGTERM makes a coordinator
// unready while it stays live and keeps serving for the drain delay; a
// second SIGTERM ends it at once with status 143.
func TestSIGTERMDrainsAndSecondSignalExits(t *testing.T) {
	talontest.SkipShort(t)
	args := talontest.CoordinatorArgs("coord", talontest.FreeAddr(t), talontest.FreeAddr(t))
	args = append(args, "--drain-delay", "30s") // later flags win
	c := talontest.Start(t, "coordinator", args...)
	testsupport.WaitFor(t, 20*time.Second, "coordinator ready", func() bool { return talontest.Ready(t, c) })

	c.Signal(syscall.SIGTERM)
	testsupport.WaitFor(t, 5*time.Second, "unready after SIGTERM", func() bool { return !talontest.Ready(t, c) })
	if !talontest.Live(t, c) || c.Exited() {
		t.Fatal("coordinator stopped serving during the drain delay")
	}
	c.Signal(syscall.SIGTERM)
	testsupport.WaitFor(t, 5*time.Second, "exit after the second SIGTERM", c.Exited)
	// The process was reaped by the proc's own waiter.
	if code := c.Cmd.ProcessState.ExitCode(); code != 143 {
		t.Fatalf("exit code %d after a second SIGTERM, want 143", code)
	}
}
