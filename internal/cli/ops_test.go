package cli_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cli"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/coordinator"
	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/testsupport"
)

var (
	seqJSON = regexp.MustCompile(`"(seq|lastSeq)": [0-9]+`)
	seqYAML = regexp.MustCompile(`(?m)^(\s*)seq: [0-9]+$`)
)

// waitEvent waits until the coordinator kept an event of type typ about node.
func (e *env) waitEvent(t *testing.T, node string, typ state.NodeEventType) {
	t.Helper()
	testsupport.WaitFor(t, 10*time.Second, string(typ)+" of "+node, func() bool {
		page, _ := e.coord.Events(coordinator.EventQuery{NodeID: node, Types: []state.NodeEventType{typ}})
		return len(page.Events) > 0
	})
}

// TestEventsAndDescribeGolden: w-9 joins at t0 and is cordoned; events
// and describe show it, on a terminal and piped, in every form.
func TestEventsAndDescribeGolden(t *testing.T) {
	e := startEnv(t, envOptions{seed: true})
	rec := cluster.Record{ClusterID: clusterID, Role: cluster.RoleWorker, NodeID: "w-9", IncarnationID: "inc-w-9", Address: "w-9.data.test:7500",
		AdminAddress: "w-9.admin.test:7501", Version: "1.5.0", Health: cluster.HealthHealthy, Ready: true, HeartbeatSeq: 1,
		StartTimeUnixMs: t0.Add(-time.Minute).UnixMilli(), Labels: map[string]string{"zone": "c"},
		Capacity: cluster.Capacity{CapacityBytes: gib(8), ResidentBytes: gib(2), Blocks: 512, Pages: 8192},
		Counters: cluster.Counters{RequestsTotal: 400, HitsTotal: 300, MissesTotal: 100, BytesServedTotal: 1 << 30}}
	e.put(t, &rec)
	e.waitEvent(t, "w-9", state.EventNodeJoined)
	rec.Ready, rec.NotReadyReason, rec.HeartbeatSeq = false, "cordoned", 2
	e.put(t, &rec)
	e.waitEvent(t, "w-9", state.EventNodeReadiness)
	if _, err := e.store.SetMarks(context.Background(), rec.Key(), rec.IncarnationID,
		state.MarkChange{SetCordon: true, Cordon: state.Cordon{By: "alice", AtUnixMs: t0.UnixMilli(), Persist: true}}); err != nil {
		t.Fatal(err)
	}
	e.waitEvent(t, "w-9", state.EventNodeCordoned)
	server := "TALONCTL_SERVER=" + e.url
	tests := []struct {
		name string
		args []string
		tty  bool
	}{
		{"events-for", []string{"events", "--for", "w-9"}, false},
		{"events-for-tty", []string{"events", "--for", "w-9"}, true},
		{"events-for-json", []string{"events", "--for", "w-9", "-o", "json"}, false},
		{"events-type-yaml", []string{"events", "--for", "w-9", "--type", "node_readiness_changed", "-o", "yaml"}, false},
		{"nodes-describe", []string{"nodes", "describe", "w-9"}, false},
		{"nodes-describe-tty", []string{"nodes", "describe", "w-9"}, true},
		{"nodes-describe-no-events", []string{"nodes", "describe", "w-1", "w-5", "--events", "0"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := talonctl(t, run{args: tt.args, tty: tt.tty, env: []string{server}})
			if r.code != 0 || r.stderr != "" {
				t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
			}
			golden(t, tt.name, seqYAML.ReplaceAllString(seqJSON.ReplaceAllString(scrub(r.stdout, ""), `"$1": N`), "${1}seq: N"))
		})
	}
	// The same headers on a terminal and in a pipe.
	tty := talonctl(t, run{args: []string{"events", "--for", "w-9"}, tty: true, env: []string{server, "NO_COLOR=1"}})
	piped := talonctl(t, run{args: []string{"events", "--for", "w-9"}, env: []string{server}})
	if h1, h2 := strings.SplitN(tty.stdout, "\n", 2)[0], strings.SplitN(piped.stdout, "\n", 2)[0]; strings.Fields(h1)[0] != strings.Fields(h2)[0] || len(strings.Fields(h1)) != len(strings.Fields(h2)) {
		t.Errorf("headers differ: %q vs %q", h1, h2)
	}
	r := talonctl(t, run{args: []string{"nodes", "describe", "w-9", "w-404"}, env: []string{server}})
	if r.code != cli.ExitFailure || !strings.Contains(r.stderr, "w-404") || !strings.Contains(r.stdout, "Name:") {
		t.Errorf("describe with a missing node: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	// Issue 38: nothing to list is an empty list, never null.
	if r := talonctl(t, run{args: []string{"events", "--for", "w-nobody", "-o", "json"}, env: []string{server}}); r.code != 0 || !strings.Contains(r.stdout, `"items": []`) {
		t.Errorf("events -o json with nothing: exit %d, %q", r.code, r.stdout)
	}
	for _, bad := range [][]string{{"events", "--type", "bogus"}, {"events", "--limit", "0"}, {"events", "--for", "a/b"}, {"events", "-w", "-o", "yaml"}, {"nodes", "describe", "w-1", "--events", "-1"}} {
		if r := talonctl(t, run{args: bad, env: []string{server}}); r.code != cli.ExitUsage || !strings.Contains(r.stderr, "--") {
			t.Errorf("%v: exit %d, stderr %s", bad, r.code, r.stderr)
		}
	}
}

// TestEventsWatch: -w prints an event that happens after it started.
func TestEventsWatch(t *testing.T) {
	e := startEnv(t, envOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &testsupport.SyncBuffer{}
	done := make(chan result, 1)
	go func() {
		done <- talonctl(t, run{args: []string{"events", "-w", "--for", "w-7", "-o", "json"}, env: []string{"TALONCTL_SERVER=" + e.url}, ctx: ctx, out: out})
	}()
	time.Sleep(300 * time.Millisecond)
	rec := cluster.Record{ClusterID: clusterID, Role: cluster.RoleWorker, NodeID: "w-7", IncarnationID: "inc-w-7", Address: "w-7.data.test:7500",
		Version: "1", Health: cluster.HealthHealthy, Ready: true}
	e.put(t, &rec)
	testsupport.WaitFor(t, 10*time.Second, "the join printed", func() bool { return strings.Contains(out.String(), `"type":"node_joined"`) })
	var ev apiv1.Event
	if err := json.Unmarshal([]byte(strings.SplitN(out.String(), "\n", 2)[0]), &ev); err != nil || ev.NodeID != "w-7" {
		t.Fatalf("watch line %q: %v", out.String(), err)
	}
	cancel()
	if r := <-done; r.code != 0 {
		t.Fatalf("watch exit %d: %s", r.code, r.stderr)
	}
}

// fakeCoordinator serves canned /api/v1/cluster and /readyz answers.
func fakeCoordinator(t *testing.T, id, revision, pv string, eligible int, ready bool, nodes func() []apiv1.Node) *httptest.Server {
	t.Helper()
	return fakeCoordinatorPresence(t, id, revision, pv, eligible, ready, nodes, apiv1.CoordinatorPresence{})
}

// fakeCoordinatorPresence is fakeCoordinator answering presence p in
// /api/v1/cluster.
func fakeCoordinatorPresence(t *testing.T, id, revision, pv string, eligible int, ready bool, nodes func() []apiv1.Node, p apiv1.CoordinatorPresence) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	meta := apiv1.Meta{SchemaVersion: 1, GeneratedAtUnixMs: t0.UnixMilli(), ObservedAtUnixMs: t0.Add(-120 * time.Millisecond).UnixMilli(), Revision: revision}
	mux.HandleFunc(apiv1.PathCluster, func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(apiv1.Cluster{Meta: meta, ClusterID: "test", ServedBy: id, PlacementVersion: pv, EligibleWorkers: eligible,
			Store: apiv1.StoreStatus{Backend: "etcd", Healthy: ready}, Coordinators: p})
	})
	mux.HandleFunc(apiv1.PathReadyz, func(w http.ResponseWriter, r *http.Request) {
		if ready {
			_ = json.NewEncoder(w).Encode(apiv1.Health{Status: apiv1.StatusReady})
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(apiv1.Health{Status: apiv1.StatusNotReady, Reasons: []string{"store unreachable: context deadline exceeded"}})
	})
	mux.HandleFunc(apiv1.PathNodes, func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(apiv1.NodeList{Meta: meta, Items: nodes()})
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// TestCoordinatorsListGolden: coord-a and coord-b read revision 42 and
// disagree on the PlacementVersion, coord-c read 41 (nothing to compare),
// coord-d does not answer: the table marks each and the exit code is 1.
// With coord-a and coord-c alone (nothing disagrees, all answer) it is 0.
func TestCoordinatorsListGolden(t *testing.T) {
	var records []apiv1.Node
	nodes := func() []apiv1.Node { return records }
	a := fakeCoordinator(t, "coord-a", "42", "00000000000000aa", 3, true, nodes)
	b := fakeCoordinator(t, "coord-b", "42", "00000000000000bb", 2, true, nodes)
	c := fakeCoordinator(t, "coord-c", "41", "00000000000000aa", 3, false, nodes)
	dead := closedURL(t)
	host := func(u string) string { return strings.TrimPrefix(u, "http://") }
	for _, n := range []struct{ id, url string }{{"coord-a", a.URL}, {"coord-b", b.URL}, {"coord-c", c.URL}, {"coord-d", dead}} {
		records = append(records, apiv1.Node{NodeID: n.id, Role: "coordinator", AdminAddress: host(n.url), Version: "1.5.0", Labels: map[string]string{}})
	}
	scrubDead := strings.NewReplacer(host(dead), "DEAD")
	for _, tt := range []struct {
		name string
		args []string
		tty  bool
	}{
		{"coordinators-list", []string{"coordinators", "list"}, false},
		{"coordinators-list-tty", []string{"coordinators", "list"}, true},
		{"coordinators-list-json", []string{"coordinators", "list", "-o", "json"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := talonctl(t, run{args: tt.args, tty: tt.tty, env: []string{"TALONCTL_SERVER=" + a.URL}})
			if r.code != cli.ExitFailure {
				t.Fatalf("exit %d, want 1\n%s", r.code, r.stderr)
			}
			out := scrubDead.Replace(r.stdout)
			for i, u := range []string{a.URL, b.URL, c.URL} {
				out = strings.ReplaceAll(out, u, "http://FAKE-"+string(rune('A'+i)))
			}
			golden(t, tt.name, out+"--- stderr\n"+scrubDead.Replace(r.stderr))
		})
	}
	// coord-c answers but is not ready (issue 38: exit 0 before).
	records = records[:1]
	records = append(records, apiv1.Node{NodeID: "coord-c", Role: "coordinator", AdminAddress: host(c.URL), Labels: map[string]string{}})
	if r := talonctl(t, run{args: []string{"coordinators", "list"}, env: []string{"TALONCTL_SERVER=" + a.URL}}); r.code != cli.ExitFailure || !strings.Contains(r.stderr, "coord-c is not ready") {
		t.Fatalf("a coordinator not ready: exit %d, want 1 naming it\n%s%s", r.code, r.stdout, r.stderr)
	}
	records = records[:1]
	if r := talonctl(t, run{args: []string{"coordinators", "list"}, env: []string{"TALONCTL_SERVER=" + a.URL}}); r.code != 0 {
		t.Fatalf("one coordinator, ready: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestCoordinatorsListMissing: one of two expected coordinators has no
// live record; the one present names it. The list shows it as missing,
// says 1 of 2 on stderr and exits 1 (issue 38: it exited 0 and showed one
// healthy coordinator).
func TestCoordinatorsListMissing(t *testing.T) {
	var records []apiv1.Node
	p := apiv1.CoordinatorPresence{Expected: 2, Present: 1, Ready: 1, Missing: []apiv1.MissingCoordinator{{NodeID: "coord-b", AdminAddress: "127.0.0.1:1"}}}
	a := fakeCoordinatorPresence(t, "coord-a", "42", "00000000000000aa", 3, true, func() []apiv1.Node { return records }, p)
	records = []apiv1.Node{{NodeID: "coord-a", Role: "coordinator", AdminAddress: strings.TrimPrefix(a.URL, "http://"), Version: "1.5.0", Labels: map[string]string{}}}
	r := talonctl(t, run{args: []string{"coordinators", "list"}, env: []string{"TALONCTL_SERVER=" + a.URL}})
	if r.code != cli.ExitFailure || !strings.Contains(r.stderr, "1 of 2 expected coordinators present") || !strings.Contains(r.stderr, "coord-b is missing") {
		t.Fatalf("exit %d, want 1 with the count and the missing name\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !regexp.MustCompile(`(?m)^coord-b\s+missing\s`).MatchString(r.stdout) {
		t.Fatalf("no missing row for coord-b:\n%s", r.stdout)
	}
	// Expected 3 with one name unknown to the answering coordinator.
	p.Expected = 3
	b := fakeCoordinatorPresence(t, "coord-a", "42", "00000000000000aa", 3, true, func() []apiv1.Node { return records }, p)
	records[0].AdminAddress = strings.TrimPrefix(b.URL, "http://")
	r = talonctl(t, run{args: []string{"coordinators", "list"}, env: []string{"TALONCTL_SERVER=" + b.URL}})
	if r.code != cli.ExitFailure || !strings.Contains(r.stderr, "1 more of the 3 expected missing") {
		t.Fatalf("expected 3: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestCredentialsNeverPrinted: a server URL with a user name and password
// is refused without repeating them, in every command's path through the
// connection code, and the message names the flag, not a Go API.
func TestCredentialsNeverPrinted(t *testing.T) {
	for _, args := range [][]string{
		{"--server", "http://u:SECRET@127.0.0.40:7401", "nodes", "list"},
		{"--server", "http://u:SECRET@127.0.0.40:7401", "coordinators", "list"},
		{"--server", "http://127.0.0.40:7401,https://admin:SECRET@h:1", "cluster", "status"},
		{"--server", "http://u:SECRET@h:bad:port", "nodes", "list"},
		{"--server", "ftp://u:SECRET@h", "top", "--once"},
	} {
		r := talonctl(t, run{args: args})
		if r.code != cli.ExitUsage || strings.Contains(r.stdout+r.stderr, "SECRET") || strings.Contains(r.stderr, "ClientOptions") || strings.Contains(r.stderr, "apiv1") {
			t.Errorf("%v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
		if !strings.Contains(r.stderr, "--server") {
			t.Errorf("%v: the message does not name --server: %s", args, r.stderr)
		}
	}
}

// TestKubectlParity: the kubectl habits of issue 27, each against the
// real coordinator: an unwrapped single object, node/ID names, JSONPath
// sorting (ascending), -L and --show-labels, -o completion of the
// template forms, and placement explain's warning for too few owners.
func TestKubectlParity(t *testing.T) {
	e := startEnv(t, envOptions{seed: true})
	server := []string{"TALONCTL_SERVER=" + e.url}
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"parity-get-jsonpath", []string{"nodes", "get", "w-1", "-o", "jsonpath={.nodeId} {.labels.zone}"}},
		{"parity-get-name", []string{"nodes", "get", "w-1", "-o", "name"}},
		{"parity-sort-jsonpath", []string{"nodes", "list", "--role", "worker", "--sort-by", ".capacity.residentBytes", "-L", "zone,tier"}},
		{"parity-sort-jsonpath-desc", []string{"nodes", "list", "--role", "worker", "--sort-by=-{.counters.hitsTotal}", "--show-labels"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := talonctl(t, run{args: tt.args, env: server})
			if r.code != 0 || r.stderr != "" {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			golden(t, tt.name, r.stdout)
		})
	}
	r := talonctl(t, run{args: []string{"nodes", "get", "w-1", "-o", "jsonpath={.nodeId}"}, env: server})
	if r.stdout != "w-1" {
		t.Errorf("jsonpath {.nodeId} of one node: %q", r.stdout)
	}
	cands, _, _ := completions(t, server, "nodes", "list", "-o", "")
	for _, want := range []string{"json", "jsonpath=", "go-template=", "custom-columns=", "custom-columns-file="} {
		if !slices.Contains(cands, want) {
			t.Errorf("-o completion lacks %q: %v", want, cands)
		}
	}
	if cands, directive, _ := completions(t, server, "nodes", "get", "w-1", "-o", "go-"); !slices.Contains(cands, "go-template=") || directive != ":6" {
		t.Errorf("-o go- completes %v %s, want go-template= without a space (:6)", cands, directive)
	}
	// 9 owners of 3 eligible workers: a warning, and the outcome says so.
	r = talonctl(t, run{args: []string{"placement", "explain", "k", "--replicas", "9"}, env: server})
	if r.code != 0 || !strings.Contains(r.stderr, "warning: only 3 of the 9 owners asked for: 3 workers are eligible") ||
		!strings.Contains(r.stdout, "ok, but only 3 of 9 owners (3 eligible workers)") {
		t.Errorf("explain --replicas 9: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
