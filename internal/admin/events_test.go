package admin

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/config"

	"github.com/talonhq/talon/internal/apiv1"
)

// TestEventsEndpoint: a worker joining shows up as events, filters narrow
// the list, bad parameters name the parameter, value and rule.
func TestEventsEndpoint(t *testing.T) {
	e := startCoordinator(t, envOptions{admin: exposeAll()})
	e.put(t, workerRecord("w-1", nil), time.Hour)
	var list apiv1.EventList
	waitFor(t, "w-1 joined event", func() bool {
		r := e.get(t, apiv1.PathEvents+"?node=w-1")
		r.decode(t, &list)
		return r.status == http.StatusOK && len(list.Items) > 0
	})
	ev := list.Items[0]
	if ev.Type != "node_joined" || ev.NodeID != "w-1" || ev.Role != "worker" || ev.Coordinator != "coord-a" || ev.Seq == 0 || ev.Revision == "" {
		t.Fatalf("event %+v", ev)
	}
	if list.Coordinator != "coord-a" || list.Incarnation != e.coord.Incarnation() || list.LastSeq < ev.Seq {
		t.Fatalf("list %+v", list)
	}
	r := e.get(t, apiv1.PathEvents+"?type=placement_version_changed")
	r.decode(t, &list)
	for _, it := range list.Items {
		if it.Type != "placement_version_changed" {
			t.Fatalf("type filter let %+v through", it)
		}
	}
	if len(list.Items) == 0 {
		t.Fatal("no placement_version_changed event")
	}
	// Pagination: limit=1 pages through every event in order.
	all := e.get(t, apiv1.PathEvents)
	var full apiv1.EventList
	all.decode(t, &full)
	var paged []uint64
	after := ""
	for range 1000 {
		r := e.get(t, apiv1.PathEvents+"?limit=1"+after)
		var page apiv1.EventList
		r.decode(t, &page)
		for _, it := range page.Items {
			paged = append(paged, it.Seq)
		}
		if page.Continue == "" {
			break
		}
		after = "&continue=" + page.Continue
	}
	if len(paged) < len(full.Items) || paged[0] != full.Items[0].Seq {
		t.Fatalf("paged %v, full %d items", paged, len(full.Items))
	}
	for _, tt := range []struct{ query, param, want string }{
		{"type=bogus", "type", `"bogus": must be one of`},
		{"limit=0", "limit", "must be an integer from 1 to 1000"},
		{"limit=1001", "limit", "must be an integer from 1 to 1000"},
		{"after=-1", "after", "must be an event sequence number"},
		// It wrapped and answered every event (issue 37).
		{"after=18446744073709551615", "after", "an integer from 0 to 9223372036854775807"},
		{"continue=9223372036854775808", "continue", "an integer from 0 to 9223372036854775807"},
		{"timeoutSeconds=51", "timeoutSeconds", "must be an integer from 1 to 50"},
		{"node=a/b", "node", "must be a node ID"},
		{"colour=red", "colour", "is not a parameter of this endpoint"},
	} {
		r := e.get(t, apiv1.PathEvents+"?"+tt.query)
		body := r.apiError(t)
		if r.status != http.StatusBadRequest || body.Parameter != tt.param || !strings.Contains(body.Message, tt.want) {
			t.Errorf("%s: %d %+v, want 400 on %s with %q", tt.query, r.status, body, tt.param, tt.want)
		}
	}
	if r := e.do(t, http.MethodPost, apiv1.PathEvents, ""); r.status != http.StatusMethodNotAllowed {
		t.Errorf("POST events: %d", r.status)
	}
}

// TestEventsWatch: a watch after the last event waits until the next one
// and answers it; with none, it answers an empty page at its timeout.
func TestEventsWatch(t *testing.T) {
	e := startCoordinator(t, envOptions{admin: exposeAll()})
	var list apiv1.EventList
	e.get(t, apiv1.PathEvents).decode(t, &list)
	last := list.LastSeq
	got := make(chan *response, 1)
	go func() {
		got <- e.get(t, fmt.Sprintf("%s?watch=true&timeoutSeconds=10&node=w-9&after=%d", apiv1.PathEvents, last))
	}()
	time.Sleep(200 * time.Millisecond)
	select {
	case r := <-got:
		t.Fatalf("watch answered before any event: %d %s", r.status, r.body)
	default:
	}
	e.put(t, workerRecord("w-9", nil), time.Hour)
	select {
	case r := <-got:
		var page apiv1.EventList
		r.decode(t, &page)
		if r.status != http.StatusOK || len(page.Items) == 0 || page.Items[0].NodeID != "w-9" || page.Items[0].Type != "node_joined" {
			t.Fatalf("watch answered %d %s", r.status, r.body)
		}
	case <-time.After(8 * time.Second):
		t.Fatal("watch did not answer the join")
	}
	start := time.Now()
	r := e.get(t, apiv1.PathEvents+"?watch=true&timeoutSeconds=1&node=nobody")
	e.get(t, apiv1.PathEvents).decode(t, &list)
	var page apiv1.EventList
	r.decode(t, &page)
	if r.status != http.StatusOK || len(page.Items) != 0 || time.Since(start) < time.Second {
		t.Fatalf("empty watch: %d after %s: %s", r.status, time.Since(start), r.body)
	}
}

// TestEventsWatchCap: past MaxWatches open watches, the next is refused
// with 429 at once rather than held.
func TestEventsWatchCap(t *testing.T) {
	e := startCoordinator(t, envOptions{admin: exposeAll()})
	var releases []func()
	for i := range MaxWatches {
		// As if MaxWatches watches of as many clients were open.
		release, err := e.srv.api.watches.acquire(netip.AddrFrom4([4]byte{10, 0, byte(i / 256), byte(i)}), "")
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, release)
	}
	release := func() {
		for _, r := range releases {
			r()
		}
	}
	t.Cleanup(release)
	start := time.Now()
	r := e.get(t, apiv1.PathEvents+"?watch=true&timeoutSeconds=5&node=nobody")
	if r.status != http.StatusTooManyRequests || time.Since(start) > 2*time.Second || !strings.Contains(r.apiError(t).Message, "event watches are open") {
		t.Fatalf("watch past the cap: %d after %s: %s", r.status, time.Since(start), r.body)
	}
	// A plain list is no watch: it is served.
	if r := e.get(t, apiv1.PathEvents); r.status != http.StatusOK {
		t.Fatalf("list at the watch cap: %d", r.status)
	}
	release()
}

// TestEventsWatchesPerClient: one client holds at most
// MaxWatchesPerClient watches, the next refused with 429 at once, while
// another client still gets a slot (one client held all 64).
func TestEventsWatchesPerClient(t *testing.T) {
	e := startCoordinator(t, envOptions{admin: exposeAll()})
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	for range MaxWatchesPerClient {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.get(t, apiv1.PathEvents+"?watch=true&timeoutSeconds=3&node=nobody")
		}()
	}
	waitFor(t, "the client's watches open", func() bool {
		e.srv.api.watches.mu.Lock()
		defer e.srv.api.watches.mu.Unlock()
		return e.srv.api.watches.open == MaxWatchesPerClient
	})
	start := time.Now()
	r := e.get(t, apiv1.PathEvents+"?watch=true&timeoutSeconds=3&node=nobody")
	if r.status != http.StatusTooManyRequests || time.Since(start) > 2*time.Second || !strings.Contains(r.apiError(t).Message, "the most one client may") {
		t.Fatalf("a watch past the client's share: %d after %s: %s", r.status, time.Since(start), r.body)
	}
	other := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext}}
	defer other.CloseIdleConnections()
	start = time.Now()
	r = doURL(t, other, http.MethodGet, e.url+apiv1.PathEvents+"?watch=true&timeoutSeconds=1&node=nobody", "")
	if r.status != http.StatusOK || time.Since(start) < time.Second {
		t.Fatalf("another client's watch: %d after %s: %s", r.status, time.Since(start), r.body)
	}
}

// TestEventsRequireToken: the events endpoint is authenticated like the
// other API endpoints.
func TestEventsRequireToken(t *testing.T) {
	cfg := exposeAll()
	cfg.Tokens = scoped(allScopes, "tok-events")
	e := startCoordinator(t, envOptions{admin: cfg})
	if r := e.get(t, apiv1.PathEvents); r.status != http.StatusUnauthorized || strings.Contains(string(r.body), "coord-a") {
		t.Fatalf("without token: %d %s", r.status, r.body)
	}
	if r := e.do(t, http.MethodGet, apiv1.PathEvents, "tok-events"); r.status != http.StatusOK {
		t.Fatalf("with token: %d %s", r.status, r.body)
	}
}

// TestWorkerServesNoWrites: a worker's admin listener takes no write, on
// the old cordon path or any other, with or without an operate token, and
// refuses a cross-site one before anything else (issue 37: a POST of
// /api/v1/cordon?persist=true, even from a foreign Origin, cordoned the
// worker persistently). The worker stays ready and uncordoned.
func TestWorkerServesNoWrites(t *testing.T) {
	cfg := exposeAll()
	cfg.Tokens = scoped(allScopes, "tok-w")
	e := startWorker(t, cfg, nil)
	for _, tc := range []struct {
		method, path, token string
		hdr                 http.Header
		want                int
	}{
		{http.MethodPost, "/api/v1/cordon?persist=true", "", nil, http.StatusNotFound},
		{http.MethodPost, "/api/v1/cordon?persist=true", "tok-w", nil, http.StatusNotFound},
		{http.MethodDelete, "/api/v1/cordon", "tok-w", nil, http.StatusNotFound},
		{http.MethodPost, apiv1.NodeActionPath("w-real", apiv1.SuffixCordon), "tok-w", nil, http.StatusNotFound},
		{http.MethodPost, "/api/v1/cordon?persist=true", "", http.Header{"Origin": {"http://evil.example"}}, http.StatusForbidden},
		{http.MethodPost, "/api/v1/cordon?persist=true", "tok-w", http.Header{"Origin": {"http://evil.example"}, apiv1.HeaderRequest: {"1"}}, http.StatusForbidden},
	} {
		hdr := tc.hdr
		if hdr == nil {
			hdr = http.Header{apiv1.HeaderRequest: {"1"}}
		}
		if r := e.doWith(t, tc.method, tc.path, tc.token, hdr); r.status != tc.want {
			t.Errorf("%s %s (token %q, %v): %d %s, want %d", tc.method, tc.path, tc.token, tc.hdr, r.status, r.body, tc.want)
		}
	}
	if on, _ := e.worker.Cordoned(); on || !e.worker.Readiness().Ready {
		t.Fatalf("after the writes: cordoned %v, readiness %+v; want an untouched, ready worker", on, e.worker.Readiness())
	}
}

// TestNodeCordon: a coordinator's POST /api/v1/nodes/{id}/cordon marks the
// worker's record in the store with the principal and the time (persist
// on request), once: again changes nothing; /uncordon lifts it. It needs
// the operate scope (401 without a token, 403 with a read-and-metrics
// one), takes POST only, answers 404 for an unknown worker and 400 for a
// coordinator or an unknown parameter, and each write is an audit line
// naming the principal, the action and the worker. The node's API record
// and the events show the cordon.
func TestNodeCordon(t *testing.T) {
	cfg := exposeAll()
	cfg.Tokens = append(scoped(allScopes, "tok-op"), scoped(config.ScopeRead|config.ScopeMetrics, "tok-ro")...)
	e := startCoordinator(t, envOptions{admin: cfg})
	e.put(t, workerRecord("w1", nil), time.Minute)
	cordonPath := apiv1.NodeActionPath("w1", apiv1.SuffixCordon)
	for _, tc := range []struct {
		method, path, token string
		want                int
	}{
		{http.MethodPost, cordonPath, "", http.StatusUnauthorized},
		{http.MethodPost, cordonPath, "tok-ro", http.StatusForbidden},
		{http.MethodGet, cordonPath, "tok-op", http.StatusMethodNotAllowed},
		{http.MethodPost, apiv1.NodeActionPath("nope", apiv1.SuffixCordon), "tok-op", http.StatusNotFound},
		{http.MethodPost, apiv1.NodeActionPath("coord-a", apiv1.SuffixCordon), "tok-op", http.StatusBadRequest},
		{http.MethodPost, apiv1.NodeActionPath("w1", apiv1.SuffixUncordon) + "?persist=true", "tok-op", http.StatusBadRequest},
		{http.MethodPost, cordonPath + "?persist=maybe", "tok-op", http.StatusBadRequest},
	} {
		if r := e.do(t, tc.method, tc.path, tc.token); r.status != tc.want {
			t.Errorf("%s %s (token %q): %d %s, want %d", tc.method, tc.path, tc.token, r.status, r.body, tc.want)
		}
	}
	stored := func() *cluster.Record {
		snap, err := e.store.Snapshot(context.Background(), clusterID)
		if err != nil {
			t.Fatal(err)
		}
		return snap.Find(cluster.Key{ClusterID: clusterID, Role: cluster.RoleWorker, NodeID: "w1"})
	}
	if rec := stored(); rec.Cordoned() {
		t.Fatalf("refused requests cordoned w1: %+v", rec)
	}
	var c apiv1.Cordon
	r := e.do(t, http.MethodPost, cordonPath, "tok-op")
	r.decode(t, &c)
	if r.status != http.StatusOK || !c.Cordoned || c.Persisted || !c.Changed || c.Cordon == nil || c.Cordon.By != "name-of-tok-o" || c.Cordon.AtUnixMs == 0 {
		t.Fatalf("cordon: %d %s", r.status, r.body)
	}
	if rec := stored(); rec.CordonedBy != "name-of-tok-o" || rec.CordonPersist {
		t.Fatalf("stored record after the cordon: by %q persist %v", rec.CordonedBy, rec.CordonPersist)
	}
	e.do(t, http.MethodPost, cordonPath, "tok-op").decode(t, &c)
	if c.Changed || !c.Cordoned {
		t.Fatalf("second cordon %+v, want no change", c)
	}
	e.do(t, http.MethodPost, cordonPath+"?persist=true", "tok-op").decode(t, &c)
	if !c.Changed || !c.Persisted {
		t.Fatalf("cordon adding persist %+v, want a change to persisted", c)
	}
	waitFor(t, "the node's API record shows the cordon", func() bool {
		var n apiv1.NodeResponse
		e.do(t, http.MethodGet, apiv1.PathNodes+"/w1", "tok-ro").decode(t, &n)
		return n.Node.Cordon != nil && n.Node.Cordon.Persist && n.Node.Cordon.By == "name-of-tok-o"
	})
	e.do(t, http.MethodPost, apiv1.NodeActionPath("w1", apiv1.SuffixUncordon), "tok-op").decode(t, &c)
	if !c.Changed || c.Cordoned || c.Cordon != nil {
		t.Fatalf("uncordon %+v", c)
	}
	if rec := stored(); rec.Cordoned() || rec.CordonPersist {
		t.Fatalf("stored record after the uncordon still cordoned: %+v", rec)
	}
	waitFor(t, "cordon and uncordon events", func() bool {
		var l apiv1.EventList
		e.do(t, http.MethodGet, apiv1.PathEvents+"?node=w1", "tok-ro").decode(t, &l)
		var types []string
		for _, ev := range l.Items {
			types = append(types, ev.Type)
		}
		return slices.Contains(types, "node_cordoned") && slices.Contains(types, "node_uncordoned")
	})
	logs := e.logs.String()
	for _, want := range []string{
		`msg="audit: cordon ok" component=admin audit=true principal=name-of-tok-o action=cordon node=w1 outcome=ok status=200 client=127.0.0.1 persist=false changed=true`,
		`msg="audit: cordon ok" component=admin audit=true principal=name-of-tok-o action=cordon node=w1 outcome=ok status=200 client=127.0.0.1 persist=true changed=true`,
		`msg="audit: uncordon ok" component=admin audit=true principal=name-of-tok-o action=uncordon node=w1 outcome=ok status=200 client=127.0.0.1 persist=false changed=true`,
		`msg="audit: cordon permission_denied" component=admin audit=true principal=name-of-tok-r action=cordon node=w1 outcome=permission_denied status=403`,
		`msg="audit: cordon not_found" component=admin audit=true principal=name-of-tok-o action=cordon node=nope outcome=not_found status=404`,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q", want)
		}
	}
}

// TestCordonWaitsForFeatureLevel: while a worker of the build before
// feature levels is live (the cluster's level is 0), a cordon is refused
// with 409 feature_level naming the process that holds the level back,
// and nothing is written: a level-0 coordinator's next write of the
// record would drop the mark. An uncordon is still served.
func TestCordonWaitsForFeatureLevel(t *testing.T) {
	cfg := exposeAll()
	cfg.Tokens = scoped(allScopes, "tok-op")
	e := startCoordinator(t, envOptions{admin: cfg})
	old := workerRecord("w1", nil)
	old.FeatureLevel = cluster.LevelBase
	e.put(t, old, time.Minute)
	e.put(t, workerRecord("w2", nil), time.Minute)
	r := e.do(t, http.MethodPost, apiv1.NodeActionPath("w2", apiv1.SuffixCordon), "tok-op")
	if body := string(r.body); r.status != http.StatusConflict || !strings.Contains(body, `"code":"feature_level"`) || !strings.Contains(body, "worker/w1") ||
		!strings.Contains(body, `"retryable":true`) {
		t.Fatalf("cordon at cluster level 0: %d %s; want 409 feature_level naming worker/w1", r.status, r.body)
	}
	snap, err := e.store.Snapshot(context.Background(), clusterID)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Find(cluster.Key{ClusterID: clusterID, Role: cluster.RoleWorker, NodeID: "w2"}).Cordoned() {
		t.Fatal("the refused cordon was written")
	}
	if r := e.do(t, http.MethodPost, apiv1.NodeActionPath("w2", apiv1.SuffixUncordon), "tok-op"); r.status != http.StatusOK {
		t.Fatalf("uncordon at cluster level 0: %d %s; want 200", r.status, r.body)
	}
}
