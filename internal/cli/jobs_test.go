package cli_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cli"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/testsupport"
)

// TestWarmFollowsOnATerminal: `warm --wait` on a terminal redraws a
// progress bar in place until the job ends; a job cancelled meanwhile is
// exit 1 naming its state; `jobs get -o json` and `jobs list` show it. The
// coordinator's only worker is a record (no process picks the job up), so
// the job runs until the cancel.
func TestWarmFollowsOnATerminal(t *testing.T) {
	e := startEnv(t, envOptions{scoped: authTokens})
	e.put(t, &cluster.Record{ClusterID: clusterID, Role: cluster.RoleWorker, NodeID: "w-1", IncarnationID: "inc-w-1",
		Address: "w-1.data.test:7500", Version: "test", Health: cluster.HealthHealthy, Ready: true, FeatureLevel: cluster.BuildLevel})
	env := []string{"TALONCTL_SERVER=" + e.url, "TALONCTL_TOKEN=tok-ops-9a3e"}
	api, err := apiv1.NewClient([]string{e.url}, apiv1.ClientOptions{Timeout: 2 * time.Second, Token: "tok-ops-9a3e"})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan result, 1)
	go func() {
		done <- talonctl(t, run{args: []string{"warm", "ds/", "--wait", "--interval", "100ms"}, tty: true, env: env})
	}()
	var id string
	testsupport.WaitFor(t, 10*time.Second, "the job started", func() bool {
		l, err := api.Jobs(context.Background())
		if err != nil || len(l.Items) != 1 {
			return false
		}
		id = l.Items[0].ID
		return true
	})
	time.Sleep(300 * time.Millisecond) // a few redraws
	if _, err := api.CancelJob(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.code != cli.ExitFailure || !strings.Contains(r.stderr, "job "+id+" ended cancelled") {
		t.Fatalf("warm --wait of a cancelled job: exit %d, stderr %q; want 1 naming the cancel", r.code, r.stderr)
	}
	if n := strings.Count(r.stdout, "\r"); n < 2 || !strings.Contains(r.stdout, "0/0 blocks") || !strings.Contains(r.stdout, "State:") {
		t.Fatalf("stdout on a terminal (%d redraws):\n%q\nwant the bar redrawn in place, then the job", n, r.stdout)
	}
	g := talonctl(t, run{args: []string{"jobs", "get", id, "-o", "json"}, env: env})
	var j apiv1.Job
	if g.code != 0 || json.Unmarshal([]byte(g.stdout), &j) != nil || j.State != apiv1.JobCancelled || j.CancelledBy != "ops" || len(j.Workers) != 1 {
		t.Fatalf("jobs get: exit %d\n%s\n%s", g.code, g.stdout, g.stderr)
	}
	l := talonctl(t, run{args: []string{"jobs", "list"}, env: env})
	if l.code != 0 || !strings.Contains(l.stdout, id) || !strings.Contains(l.stdout, "cancelled") || !strings.Contains(l.stdout, "ds/*") {
		t.Fatalf("jobs list: exit %d\n%s\n%s", l.code, l.stdout, l.stderr)
	}
	ro := talonctl(t, run{args: []string{"warm", "ds/a"}, env: []string{"TALONCTL_SERVER=" + e.url, "TALONCTL_TOKEN=tok-viewer-5f1c"}})
	if ro.code == 0 || !strings.Contains(ro.stderr, "operate") {
		t.Fatalf("warm with a read-only token: exit %d, stderr %q; want refused naming the operate scope", ro.code, ro.stderr)
	}
}
