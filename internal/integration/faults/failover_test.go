package faults

// Issue 38, "talonctl fails over like the client library": with two
// --server addresses and the first coordinator stopped (SIGSTOP: its port
// still accepts connections, nothing answers), a command costs one
// attempt deadline, not the whole --timeout. Before, every `nodes list`
// took 10.0 s and `coordinators list` 20.0 s.

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

func TestTalonctlFailsOverFromAHungServer(t *testing.T) {
	talontest.SkipShort(t)
	c := talontest.NewEtcdCluster(t, talontest.FastTiming, 2)
	a, b := c.Coordinator("coord-a"), c.Coordinator("coord-b")
	testsupport.WaitFor(t, 60*time.Second, "both coordinators ready", func() bool { return talontest.Ready(t, a) && talontest.Ready(t, b) })
	servers := []string{"http://" + a.Admin, "http://" + b.Admin}
	if code, _, stderr := talontest.Ctl(t, servers, "nodes", "list"); code != 0 {
		t.Fatalf("nodes list with both up: exit %d\n%s", code, stderr)
	}
	a.Signal(syscall.SIGSTOP)
	t.Cleanup(func() { a.Signal(syscall.SIGCONT) })

	limit := apiv1.DefaultAttemptTimeout + 2*time.Second // one attempt deadline plus the answer, on a loaded machine
	var worst time.Duration
	for i := range 3 {
		began := time.Now()
		code, stdout, stderr := talontest.Ctl(t, servers, "nodes", "list")
		took := time.Since(began)
		worst = max(worst, took)
		if code != 0 || !strings.Contains(stdout, "coord-b") {
			t.Fatalf("nodes list %d with coord-a stopped: exit %d\n%s%s", i+1, code, stdout, stderr)
		}
		t.Logf("nodes list %d with the first server stopped: %s", i+1, took.Round(time.Millisecond))
	}
	began := time.Now()
	code, stdout, stderr := talontest.Ctl(t, servers, "coordinators", "list")
	coordsTook := time.Since(began)
	t.Logf("coordinators list with coord-a stopped: exit %d in %s\n%s%s", code, coordsTook.Round(time.Millisecond), stdout, stderr)
	if worst > limit {
		t.Errorf("nodes list took up to %s with the first server stopped: want at most the attempt deadline %s plus the answer (%s)", worst, apiv1.DefaultAttemptTimeout, limit)
	}
	if code != 1 || (!strings.Contains(stderr, "coord-a") && !strings.Contains(stderr, a.Admin)) {
		t.Errorf("coordinators list with coord-a stopped: exit %d, want 1 naming coord-a or its address", code)
	}
	if coordsTook > 2*apiv1.DefaultAttemptTimeout+3*time.Second {
		t.Errorf("coordinators list took %s: want about two attempt deadlines (the listing, then coord-a's answer, each %s)", coordsTook, apiv1.DefaultAttemptTimeout)
	}
}
