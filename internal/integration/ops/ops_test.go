package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cli"
	"github.com/talonhq/talon/internal/testenv"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// opsTiming is slow enough that two coordinators asked at once usually
// read the same store revision (the agreement check compares those).
var opsTiming = []string{"--heartbeat-interval", "1s", "--unhealthy-after", "4s", "--lease-ttl", "10s", "--request-timeout", "1s",
	"--drain-delay", "0s", "--shutdown-timeout", "2s"}

const opsHeartbeat = time.Second

// TestOperatorWorkflows runs two coordinators on one etcd, three workers
// and a third coordinator with another cluster ID on the same etcd (so
// its revisions are comparable and its placement differs), and drives
// coordinators list, cordon, uncordon, drain, events and describe
// against them.
func TestOperatorWorkflows(t *testing.T) {
	talontest.SkipShort(t)
	etcd := testenv.StartEtcd(t, testenv.EtcdOptions{})
	// Writes need a token with the operate scope, on the coordinators
	// (the only listeners that take writes); the workers' listeners take
	// the same file for their reads and metrics.
	tokens := filepath.Join(t.TempDir(), "admin-tokens")
	if err := os.WriteFile(tokens, []byte("ops:read,operate,metrics:"+talontest.OpsToken+"\nprometheus:metrics:"+talontest.MetricsToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	store := []string{"--state-backend", "etcd", "--etcd-endpoints", strings.Join(etcd.Endpoints(), ","), "--ha", "--coordinator-replicas", "2"}
	coord := func(id, cluster string) *talontest.Proc {
		args := []string{"coordinator", "--cluster-id", cluster, "--node-id", id, "--listen", talontest.FreeAddr(t), "--admin-listen", talontest.FreeAddr(t), "--log-level", "info",
			"--admin-token-file", tokens}
		args = append(append(append(args, opsTiming...), store...), talontest.InsecureArgs...)
		return talontest.Start(t, id, args...)
	}
	a, b := coord("coord-a", "it"), coord("coord-b", "it")
	testsupport.WaitFor(t, 30*time.Second, "both coordinators ready", func() bool { return talontest.Ready(t, a) && talontest.Ready(t, b) })
	blobs := t.TempDir()
	workers := map[string]*talontest.Proc{}
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("w-%d", i)
		args := []string{"worker", "--cluster-id", "it", "--node-id", id, "--listen", talontest.FreeAddr(t), "--admin-listen", talontest.FreeAddr(t),
			"--coordinators", a.Addr + "," + b.Addr, "--blob-store", "file://" + blobs, "--cache-dir", t.TempDir(),
			"--cache-capacity", "64MiB", "--block-size", "1MiB", "--log-level", "info", "--admin-token-file", tokens,
			"--labels", "zone=" + map[bool]string{true: "a", false: "b"}[i < 3]}
		workers[id] = talontest.Start(t, id, append(append(args, opsTiming...), talontest.InsecureArgs...)...)
	}
	all := []string{"w-1", "w-2", "w-3"}
	testsupport.WaitFor(t, 30*time.Second, "three eligible workers on both coordinators", func() bool {
		return slices.Equal(talontest.EligibleOn(t, a), all) && slices.Equal(talontest.EligibleOn(t, b), all)
	})
	servers := []string{"http://" + a.Admin}

	t.Run("CoordinatorsListAgree", func(t *testing.T) {
		// The records name both coordinators; asked at once they usually
		// read the same revision and must then agree.
		var out string
		testsupport.WaitFor(t, 20*time.Second, "both coordinators listed, agreeing at one revision", func() bool {
			code, stdout, _ := talontest.Ctl(t, servers, "coordinators", "list", "-o", "json")
			var rows struct{ Items []map[string]any }
			if code != 0 || json.Unmarshal([]byte(stdout), &rows) != nil || len(rows.Items) != 2 {
				return false
			}
			out = stdout
			return rows.Items[0]["agree"] == "yes" && rows.Items[1]["agree"] == "yes"
		})
		code, stdout, stderr := talontest.Ctl(t, servers, "coordinators", "list")
		if code != 0 || !strings.Contains(stdout, "coord-a") || !strings.Contains(stdout, "coord-b") || !strings.HasPrefix(stdout, "COORDINATOR ") {
			t.Fatalf("exit %d\n%s\n%s\n(json: %s)", code, stdout, stderr, out)
		}
	})

	t.Run("CoordinatorsListDisagreeAndUnreachable", func(t *testing.T) {
		// coord-x reads the same etcd (same revisions) for another cluster
		// ID: at a shared revision its PlacementVersion differs.
		x := coord("coord-x", "other")
		testsupport.WaitFor(t, 30*time.Second, "coord-x ready", func() bool { return talontest.Ready(t, x) })
		withX := []string{"http://" + a.Admin, "http://" + x.Admin}
		var stdout, stderr string
		var code int
		testsupport.WaitFor(t, 30*time.Second, "coord-x marked as disagreeing", func() bool {
			code, stdout, stderr = talontest.Ctl(t, withX, "coordinators", "list")
			return code == cli.ExitFailure && strings.Contains(stderr, "coord-x disagrees with coord-a")
		})
		if !strings.Contains(stdout, "disagrees with coord-a") {
			t.Fatalf("table does not mark the disagreement:\n%s", stdout)
		}
		dead := "http://" + talontest.FreeAddr(t)
		code, stdout, stderr = talontest.Ctl(t, append(servers, dead), "coordinators", "list")
		if code != cli.ExitFailure || !strings.Contains(stdout, "unreachable") || !strings.Contains(stderr, "did not answer") {
			t.Fatalf("with an unreachable coordinator: exit %d\n%s\n%s", code, stdout, stderr)
		}
		x.Kill()
	})

	t.Run("CordonExcludesWithinOneHeartbeat", func(t *testing.T) {
		code, stdout, stderr := talontest.Ctl(t, servers, "nodes", "cordon", "w-1")
		done := time.Now()
		if code != 0 || stdout != "node/w-1 cordoned\n" {
			t.Fatalf("cordon: exit %d\n%s\n%s", code, stdout, stderr)
		}
		testsupport.WaitFor(t, opsHeartbeat, "w-1 out of placement on both coordinators", func() bool {
			want := []string{"w-2", "w-3"}
			return slices.Equal(talontest.EligibleOn(t, a), want) && slices.Equal(talontest.EligibleOn(t, b), want)
		})
		t.Logf("w-1 left placement on both coordinators %s after the cordon returned", time.Since(done).Round(time.Millisecond))
		// The worker learns it over its control connection and reports it.
		testsupport.WaitFor(t, 10*opsHeartbeat, "w-1 reports not ready (cordoned) on coord-b", func() bool {
			n, err := talontest.OpsAPI(t, b).Node(context.Background(), "w-1")
			return err == nil && !n.Node.Ready && n.Node.NotReadyReason == "cordoned" && n.Node.Cordon != nil && n.Node.Cordon.By == "ops"
		})
		if code, stdout, _ := talontest.Ctl(t, servers, "nodes", "cordon", "w-1"); code != 0 || stdout != "node/w-1 already cordoned\n" {
			t.Fatalf("second cordon: %d %q", code, stdout)
		}
		// describe merges both coordinators' events by ID and names, for
		// each, the coordinator that observed it first: which one that is
		// for a given event is a race between their views, so either name
		// will do (each coordinator's own list is checked below).
		code, stdout, _ = talontest.Ctl(t, servers, "nodes", "describe", "w-1")
		if code != 0 || !strings.Contains(stdout, "false (cordoned)") || !strings.Contains(stdout, "Cordoned:") || !strings.Contains(stdout, "by ops") ||
			!strings.Contains(stdout, "node_cordoned") || !(strings.Contains(stdout, "coord-a") || strings.Contains(stdout, "coord-b")) {
			t.Fatalf("describe w-1: exit %d\n%s", code, stdout)
		}
		// Both coordinators list the cordon's event, whichever took it:
		// each asked alone, and talonctl, which merges their lists by the
		// event's ID (issue 38: a node event is written once per cluster),
		// shows it once.
		testsupport.WaitFor(t, 5*time.Second, "node_cordoned events on both coordinators", func() bool {
			for _, p := range []*talontest.Proc{a, b} {
				page, err := talontest.OpsAPI(t, p).Events(context.Background(), apiv1.EventFilter{NodeID: "w-1", Types: []string{"node_cordoned"}})
				if err != nil || len(page.Items) == 0 {
					return false
				}
				for _, e := range page.Items {
					if e.Reason != "cordoned by ops" || e.New != "cordoned" {
						t.Fatalf("event on %s: %+v", p.Name, e)
					}
				}
			}
			return true
		})
		code, stdout, _ = talontest.Ctl(t, []string{"http://" + a.Admin, "http://" + b.Admin}, "events", "--for", "w-1", "--type", "node_cordoned", "-o", "json")
		var merged struct{ Items []apiv1.Event }
		if code != 0 || json.Unmarshal([]byte(stdout), &merged) != nil || len(merged.Items) != 1 {
			t.Fatalf("talonctl events, both coordinators: exit %d, want the cordon once:\n%s", code, stdout)
		}
		if code, stdout, _ := talontest.Ctl(t, servers, "nodes", "uncordon", "w-1"); code != 0 || stdout != "node/w-1 uncordoned\n" {
			t.Fatalf("uncordon: %d %q", code, stdout)
		}
		testsupport.WaitFor(t, opsHeartbeat, "w-1 back in placement", func() bool {
			return slices.Equal(talontest.EligibleOn(t, a), all) && slices.Equal(talontest.EligibleOn(t, b), all)
		})
		out := a.Out.String()
		if !strings.Contains(out, `msg="audit: cordon ok" component=admin audit=true principal=ops action=cordon node=w-1 outcome=ok`) ||
			!strings.Contains(out, `msg="audit: uncordon ok" component=admin audit=true principal=ops action=uncordon node=w-1 outcome=ok`) {
			t.Fatalf("no audit lines in the coordinator's log:\n%s", talontest.Tail(out, 3000))
		}
	})

	t.Run("SeveralNodesSelectorsAndDryRun", func(t *testing.T) {
		// --dry-run says what would change and changes nothing.
		code, stdout, stderr := talontest.Ctl(t, servers, "nodes", "cordon", "w-1", "w-2", "--dry-run")
		if code != 0 || stdout != "node/w-1 cordoned (dry run)\nnode/w-2 cordoned (dry run)\n" {
			t.Fatalf("cordon --dry-run: exit %d\n%s\n%s", code, stdout, stderr)
		}
		time.Sleep(2 * opsHeartbeat)
		if got := talontest.EligibleOn(t, a); !slices.Equal(got, all) {
			t.Fatalf("a dry run changed placement: %v", got)
		}
		// -l zone=a selects w-1 and w-2; a name given too is done once.
		code, stdout, stderr = talontest.Ctl(t, servers, "nodes", "cordon", "w-2", "-l", "zone=a")
		if code != 0 || stdout != "node/w-2 cordoned\nnode/w-1 cordoned\n" {
			t.Fatalf("cordon w-2 -l zone=a: exit %d\n%s\n%s", code, stdout, stderr)
		}
		testsupport.WaitFor(t, 2*opsHeartbeat, "only w-3 eligible", func() bool {
			return slices.Equal(talontest.EligibleOn(t, a), []string{"w-3"}) && slices.Equal(talontest.EligibleOn(t, b), []string{"w-3"})
		})
		// A bad name among good ones: the good ones are done, the bad
		// one is named, the exit code is 1.
		code, stdout, stderr = talontest.Ctl(t, servers, "nodes", "uncordon", "w-1", "w-9", "w-2")
		if code != cli.ExitFailure || stdout != "node/w-1 uncordoned\nnode/w-2 uncordoned\n" || !strings.Contains(stderr, "node/w-9: no live worker w-9") {
			t.Fatalf("uncordon w-1 w-9 w-2: exit %d\n%s\n%s", code, stdout, stderr)
		}
		if code, _, stderr := talontest.Ctl(t, servers, "nodes", "cordon", "-l", "zone=nowhere"); code != cli.ExitFailure || !strings.Contains(stderr, "selects no live worker") {
			t.Fatalf("cordon -l zone=nowhere: exit %d %s", code, stderr)
		}
		if code, _, stderr := talontest.Ctl(t, servers, "nodes", "cordon"); code != cli.ExitUsage || !strings.Contains(stderr, "name at least one WORKER") {
			t.Fatalf("cordon without a target: exit %d %s", code, stderr)
		}
		testsupport.WaitFor(t, 2*opsHeartbeat, "all back in placement", func() bool {
			return slices.Equal(talontest.EligibleOn(t, a), all) && slices.Equal(talontest.EligibleOn(t, b), all)
		})
	})

	t.Run("CordonRoundsListedOnEveryCoordinator", func(t *testing.T) {
		// Issue 47: three cordon/uncordon rounds are three pairs of
		// placement_version_changed events (each occurrence its own
		// identity) on both coordinators, and talonctl lists them merged
		// in time order.
		since := time.Now().UnixMilli()
		for range 3 {
			for _, verb := range []string{"cordon", "uncordon"} {
				if code, _, stderr := talontest.Ctl(t, servers, "nodes", verb, "w-2"); code != 0 {
					t.Fatalf("%s w-2: %d %s", verb, code, stderr)
				}
				want := all
				if verb == "cordon" {
					want = []string{"w-1", "w-3"}
				}
				testsupport.WaitFor(t, 5*time.Second, verb+" seen by both coordinators", func() bool {
					return slices.Equal(talontest.EligibleOn(t, a), want) && slices.Equal(talontest.EligibleOn(t, b), want)
				})
			}
		}
		for _, p := range []*talontest.Proc{a, b} {
			testsupport.WaitFor(t, 5*time.Second, "three rounds listed on "+p.Name, func() bool {
				page, err := talontest.OpsAPI(t, p).Events(context.Background(), apiv1.EventFilter{SinceUnixMs: since,
					Types: []string{"placement_version_changed", "node_cordoned", "node_uncordoned"}})
				if err != nil {
					return false
				}
				n := map[string]int{}
				for _, e := range page.Items {
					n[e.Type]++
				}
				return n["placement_version_changed"] >= 6 && n["node_cordoned"] == 3 && n["node_uncordoned"] == 3
			})
		}
		code, stdout, _ := talontest.Ctl(t, []string{"http://" + a.Admin, "http://" + b.Admin}, "events", "--for", "w-2", "--since", fmt.Sprintf("%ds", int(time.Since(time.UnixMilli(since)).Seconds())+2), "-o", "json")
		var merged struct{ Items []apiv1.Event }
		if code != 0 || json.Unmarshal([]byte(stdout), &merged) != nil {
			t.Fatalf("talonctl events: exit %d\n%s", code, stdout)
		}
		var kinds []string
		for i, e := range merged.Items {
			if i > 0 && e.TimeUnixMs < merged.Items[i-1].TimeUnixMs {
				t.Fatalf("talonctl events not in time order at %d: %+v", i, merged.Items)
			}
			if (e.Type == "node_cordoned" || e.Type == "node_uncordoned") && e.TimeUnixMs >= since {
				kinds = append(kinds, e.Type)
			}
		}
		if want := "node_cordoned node_uncordoned node_cordoned node_uncordoned node_cordoned node_uncordoned"; strings.Join(kinds, " ") != want {
			t.Fatalf("talonctl events --for w-2: %v; want the three rounds in order", kinds)
		}
	})

	t.Run("SimulateDrainMatchesALiveDrain", func(t *testing.T) { checkSimulateDrain(t, servers, []*talontest.Proc{a, b}, all) })

	t.Run("DrainReturnsWhenNoCoordinatorPlacesAndTheWorkerIsIdle", func(t *testing.T) {
		code, stdout, stderr := talontest.Ctl(t, servers, "nodes", "drain", "w-2", "--drain-timeout", "60s")
		if code != 0 || stdout != "node/w-2 drained\n" || !strings.Contains(stderr, "node/w-2 cordoned") {
			t.Fatalf("drain: exit %d\n%s\n%s", code, stdout, stderr)
		}
		// When drain returns, no coordinator places on w-2 and its record
		// says drained.
		for _, p := range []*talontest.Proc{a, b} {
			if got := talontest.EligibleOn(t, p); slices.Contains(got, "w-2") {
				t.Fatalf("%s still places on w-2 after drain returned: %v", p.Name, got)
			}
		}
		if n, err := talontest.OpsAPI(t, a).Node(context.Background(), "w-2"); err != nil || !n.Node.Drained || n.Node.Cordon == nil {
			t.Fatalf("w-2 after drain: %+v %v", n, err)
		}
		talontest.Ctl(t, servers, "nodes", "uncordon", "w-2")
	})

	t.Run("PersistedCordonSurvivesRestart", func(t *testing.T) {
		if code, stdout, stderr := talontest.Ctl(t, servers, "nodes", "cordon", "w-3", "--persist"); code != 0 || stdout != "node/w-3 cordoned (kept across restarts)\n" {
			t.Fatalf("cordon --persist: %d %q %q", code, stdout, stderr)
		}
		w := workers["w-3"]
		testsupport.WaitFor(t, 10*opsHeartbeat, "w-3 learned the cordon", func() bool {
			st, err := talontest.WorkerAPI(t, w).Status(context.Background())
			return err == nil && st.Cordoned
		})
		w.Kill()
		w.Restart()
		testsupport.WaitFor(t, 20*time.Second, "w-3 back, cordoned", func() bool {
			st, err := talontest.WorkerAPI(t, w).Status(context.Background())
			return err == nil && st.Registered && st.Cordoned && !st.Ready
		})
		if got := talontest.EligibleOn(t, a); slices.Contains(got, "w-3") {
			t.Fatalf("restarted w-3 placed on while cordoned: %v", got)
		}
		// A cordon without --persist does not survive the worker's
		// restart... unless its record outlived it: the record is the
		// node's, so only an uncordon lifts it. Uncordon, and w-3 is back.
		talontest.Ctl(t, servers, "nodes", "uncordon", "w-3")
		testsupport.WaitFor(t, 10*opsHeartbeat, "w-3 ready again", func() bool {
			st, err := talontest.WorkerAPI(t, w).Status(context.Background())
			return err == nil && st.Registered && !st.Cordoned && st.Ready
		})
	})

	t.Run("WritesNeedOperateAndTheSameSite", func(t *testing.T) {
		// On real processes: the metrics token cannot cordon, a
		// cross-site request cannot either (token or not), and neither
		// changes anything; a worker's listener takes no write at all; a
		// token removed from the file is refused within 2 s, with no
		// restart.
		w := workers["w-1"]
		evil := http.Header{"Origin": {"http://evil.example"}}
		path := apiv1.NodeActionPath("w-1", apiv1.SuffixCordon) + "?persist=true"
		for _, tt := range []struct {
			token string
			hdr   http.Header
			want  string
		}{
			{talontest.MetricsToken, http.Header{apiv1.HeaderRequest: {"1"}}, `POST cordon needs scope operate; token \"prometheus\" has metrics`},
			{talontest.OpsToken, evil, `Origin \"http://evil.example\" is not this listener`},
			{"", evil, `Origin \"http://evil.example\" is not this listener`},
			{talontest.OpsToken, http.Header{}, "must carry the header X-Talon-Request"},
		} {
			if status, body := talontest.Post(t, a, path, tt.token, tt.hdr); status != http.StatusForbidden || !strings.Contains(body, tt.want) {
				t.Fatalf("POST cordon (token %v, %v): %d %s, want 403 with %s", tt.token != "", tt.hdr, status, body, tt.want)
			}
		}
		for _, tok := range []string{"", talontest.OpsToken} {
			if status, body := talontest.Post(t, w, "/api/v1/cordon?persist=true", tok, http.Header{apiv1.HeaderRequest: {"1"}}); status != http.StatusNotFound {
				t.Fatalf("POST /api/v1/cordon on a worker (token %v): %d %s, want 404", tok != "", status, body)
			}
		}
		st, err := talontest.WorkerAPI(t, w).Status(context.Background())
		if err != nil || st.Cordoned || !st.Ready {
			t.Fatalf("after refused writes: %+v %v", st, err)
		}
		if n, err := talontest.OpsAPI(t, a).Node(context.Background(), "w-1"); err != nil || n.Node.Cordon != nil {
			t.Fatalf("w-1's record after refused writes: %+v %v", n, err)
		}
		if out := a.Out.String(); !strings.Contains(out, `msg="audit: cordon permission_denied" component=admin audit=true principal=prometheus action=cordon node=w-1`) {
			t.Fatalf("no audit line of the refused cordon:\n%s", talontest.Tail(out, 3000))
		}
		if err := os.WriteFile(tokens, []byte("ops:read,operate,metrics:"+talontest.OpsToken+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		removed := time.Now()
		testsupport.WaitFor(t, 2*time.Second, "the removed metrics token refused", func() bool {
			req, _ := http.NewRequest(http.MethodGet, "http://"+a.Admin+apiv1.PathMetrics, nil)
			req.Header.Set("Authorization", "Bearer "+talontest.MetricsToken)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusUnauthorized
		})
		t.Logf("a coordinator process refused the removed token %s after the file changed", time.Since(removed).Round(time.Millisecond))
	})

	t.Run("CordonRefusesCoordinatorsAndUnknownNodes", func(t *testing.T) {
		code, _, stderr := talontest.Ctl(t, servers, "nodes", "cordon", "coord-a")
		if code != cli.ExitFailure || !strings.Contains(stderr, "coord-a is a coordinator: only workers are cordoned") {
			t.Fatalf("cordon coord-a: %d %s", code, stderr)
		}
		code, _, stderr = talontest.Ctl(t, servers, "nodes", "cordon", "w-9")
		if code != cli.ExitFailure || !strings.Contains(stderr, "w-9") {
			t.Fatalf("cordon w-9: %d %s", code, stderr)
		}
	})
}
