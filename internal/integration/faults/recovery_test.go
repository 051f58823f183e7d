package faults

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/testenv"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// TestEtcdRestartRecovery stops etcd under a running coordinator: the
// coordinator logs that it waits for the store and names the endpoint, its
// API answers 503 (never 200 with empty data), and after etcd is back it
// is ready again quickly: after the recovery hold (heartbeat-interval + 2 x
// request-timeout, fail closed while workers re-register) and within 2 s
// more (the etcd client's reconnect backoff is capped; it used to take up
// to 10 s). The recovery time is logged; the bound is generous for loaded
// machines.
func TestEtcdRestartRecovery(t *testing.T) {
	talontest.SkipShort(t)
	e := testenv.StartEtcd(t, testenv.EtcdOptions{})
	ctl := talontest.FreeAddr(t)
	coord := talontest.Start(t, "coordinator", talontest.CoordinatorArgs("coord", ctl, talontest.FreeAddr(t), "--state-backend", "etcd", "--etcd-endpoints", strings.Join(e.Endpoints(), ","))...)
	testsupport.WaitFor(t, 20*time.Second, "coordinator ready", func() bool { return talontest.Ready(t, coord) })
	out := coord.Out.String()
	if w, s := strings.Index(out, "waiting for the store"), strings.Index(out, "coordinator serving"); w < 0 || s < w {
		t.Fatalf("want 'waiting for the store' before 'coordinator serving':\n%s", talontest.Tail(out, 2000))
	}

	e.Stop()
	testsupport.WaitFor(t, 20*time.Second, "coordinator unready", func() bool { return !talontest.Ready(t, coord) })
	for _, p := range []string{apiv1.PathNodes, apiv1.PathCluster} {
		resp, err := http.Get("http://" + coord.Admin + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("%s with etcd down: %d, want 503", p, resp.StatusCode)
		}
	}
	testsupport.WaitFor(t, 20*time.Second, "the endpoint named in the logs", func() bool {
		return strings.Contains(coord.Out.String(), e.Endpoints()[0])
	})

	e.Start()
	back := time.Now()
	testsupport.WaitFor(t, 30*time.Second, "coordinator ready again", func() bool { return talontest.Ready(t, coord) })
	took := time.Since(back)
	const hold = 250*time.Millisecond + 2*time.Second // talontest.TimingArgs: heartbeat 250ms, request timeout 1s
	t.Logf("ready %s after etcd answered again (recovery hold %s)", took.Round(10*time.Millisecond), hold)
	if took > hold+2*time.Second {
		t.Fatalf("recovery took %s after etcd restarted, want at most the hold %s + 2 s", took, hold)
	}
	if _, err := coord.API(t).Cluster(context.Background()); err != nil {
		t.Fatalf("API after recovery: %v", err)
	}
}
