package faults

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// TestWorkerKilledAndRestarted: a worker killed with SIGKILL turns
// unhealthy after unhealthy-after, leaves placement, and disappears after
// the lease TTL; restarted (a new incarnation) it is accepted at once.
func TestWorkerKilledAndRestarted(t *testing.T) {
	talontest.SkipShort(t)
	ctl := talontest.FreeAddr(t)
	c := talontest.Start(t, "coordinator", talontest.CoordinatorArgs("coord", ctl, talontest.FreeAddr(t))...)
	testsupport.WaitFor(t, 20*time.Second, "coordinator ready", func() bool { return talontest.Ready(t, c) })
	blobs := t.TempDir()
	w1 := talontest.Start(t, "worker-1", talontest.WorkerArgs("worker-1", talontest.FreeAddr(t), talontest.FreeAddr(t), []string{ctl}, blobs, t.TempDir())...)
	talontest.Start(t, "worker-2", talontest.WorkerArgs("worker-2", talontest.FreeAddr(t), talontest.FreeAddr(t), []string{ctl}, blobs, t.TempDir())...)
	api := c.API(t)
	node := func(id string) (*apiv1.Node, error) {
		r, err := api.Node(context.Background(), id)
		if err != nil {
			return nil, err
		}
		return &r.Node, nil
	}
	var before *apiv1.Node
	testsupport.WaitFor(t, 20*time.Second, "both workers healthy", func() bool {
		n1, err1 := node("worker-1")
		n2, err2 := node("worker-2")
		before = n1
		return err1 == nil && err2 == nil && n1.Health == "healthy" && n2.Health == "healthy" && n1.Ready
	})
	inPlacement := func(id string) bool {
		p, err := api.Placement(context.Background(), "any-key", 2)
		if err != nil {
			return false
		}
		for _, cand := range p.Candidates {
			if cand.NodeID == id {
				return true
			}
		}
		return false
	}
	if !inPlacement("worker-1") {
		t.Fatal("worker-1 not a placement candidate while healthy")
	}

	w1.Kill()
	killed := time.Now()
	// Still listed, but unhealthy and out of placement.
	testsupport.WaitFor(t, 10*time.Second, "worker-1 unhealthy", func() bool {
		n, err := node("worker-1")
		return err == nil && n.Health == "unhealthy"
	})
	if d := time.Since(killed); d < 1200*time.Millisecond {
		t.Fatalf("worker-1 turned unhealthy %v after the kill, before unhealthy-after (1.5s)", d)
	}
	p, err := api.Placement(context.Background(), "any-key", 2)
	if err != nil {
		t.Fatal(err)
	}
	excluded := false
	for _, e := range p.Excluded {
		excluded = excluded || e.NodeID == "worker-1" && e.Reason == "unhealthy"
	}
	if !excluded || inPlacement("worker-1") {
		t.Fatalf("unhealthy worker-1 still placed: %+v", p)
	}
	// Expired after the lease TTL: gone from the node list (404).
	testsupport.WaitFor(t, 10*time.Second, "worker-1 expired", func() bool {
		_, err := node("worker-1")
		var ae *apiv1.APIError
		return errors.As(err, &ae) && ae.HTTPStatus == http.StatusNotFound
	})

	w1.Restart()
	testsupport.WaitFor(t, 5*time.Second, "restarted worker-1 accepted", func() bool {
		n, err := node("worker-1")
		return err == nil && n.Health == "healthy" && n.IncarnationID != before.IncarnationID
	})
	if !inPlacement("worker-1") {
		t.Fatal("restarted worker-1 not back in placement")
	}

	// Killed and restarted at once, while its old record is still live:
	// the new incarnation replaces it without waiting for expiry.
	prev, _ := node("worker-1")
	w1.Kill()
	w1.Restart()
	testsupport.WaitFor(t, 5*time.Second, "immediately restarted worker-1 accepted", func() bool {
		n, err := node("worker-1")
		return err == nil && n.IncarnationID != prev.IncarnationID && n.Health == "healthy"
	})
}
