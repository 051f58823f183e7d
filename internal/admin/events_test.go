package admin

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

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
		release, err := e.srv.watches.acquire(netip.AddrFrom4([4]byte{10, 0, byte(i / 256), byte(i)}))
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
		e.srv.watches.mu.Lock()
		defer e.srv.watches.mu.Unlock()
		return e.srv.watches.open == MaxWatchesPerClient
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

// TestWorkerCordon: POST cordons (ready false, reason cordoned, in the
// status and, after one heartbeat, in the coordinator's view), DELETE
// uncordons, GET is refused, a token is required, and each change is an
// audit line.
func TestWorkerCordon(t *testing.T) {
	cfg := exposeAll()
	cfg.Tokens = scoped(allScopes, "tok-w")
	e := startWorker(t, cfg, nil)
	if r := e.do(t, http.MethodPost, apiv1.PathCordon, ""); r.status != http.StatusUnauthorized {
		t.Fatalf("cordon without token: %d", r.status)
	}
	if r := e.do(t, http.MethodGet, apiv1.PathCordon, "tok-w"); r.status != http.StatusMethodNotAllowed || r.header.Get("Allow") != "POST, DELETE" {
		t.Fatalf("GET cordon: %d, Allow %q", r.status, r.header.Get("Allow"))
	}
	if r := e.do(t, http.MethodPost, apiv1.PathCordon+"?persist=true", "tok-w"); r.status != http.StatusBadRequest || !strings.Contains(r.apiError(t).Message, "no cache directory") {
		t.Fatalf("persisted cordon without a cordon file: %d %s", r.status, r.body)
	}
	r := e.do(t, http.MethodPost, apiv1.PathCordon, "tok-w")
	var c apiv1.Cordon
	r.decode(t, &c)
	if r.status != http.StatusOK || !c.Cordoned || c.Persisted || !c.Changed || c.NodeID != "w-real" {
		t.Fatalf("cordon: %d %s", r.status, r.body)
	}
	if rd := e.worker.Readiness(); rd.Ready || !strings.Contains(strings.Join(rd.Reasons, ";"), "cordoned") {
		t.Fatalf("readiness after cordon %+v", rd)
	}
	waitFor(t, "the store's record cordoned", func() bool {
		rec, _ := e.worker.LastAccepted()
		return rec != nil && !rec.Ready && rec.NotReadyReason == "cordoned"
	})
	var st apiv1.Status
	e.do(t, http.MethodGet, apiv1.PathStatus, "tok-w").decode(t, &st)
	if !st.Cordoned || st.Ready || st.Node == nil || st.Node.NotReadyReason != "cordoned" {
		t.Fatalf("status after cordon %+v", st)
	}
	// Cordoning again changes nothing.
	e.do(t, http.MethodPost, apiv1.PathCordon, "tok-w").decode(t, &c)
	if c.Changed || !c.Cordoned {
		t.Fatalf("second cordon %+v", c)
	}
	if r := e.do(t, http.MethodDelete, apiv1.PathCordon+"?persist=true", "tok-w"); r.status != http.StatusBadRequest {
		t.Fatalf("DELETE with persist: %d", r.status)
	}
	e.do(t, http.MethodDelete, apiv1.PathCordon, "tok-w").decode(t, &c)
	if c.Cordoned || !c.Changed {
		t.Fatalf("uncordon %+v", c)
	}
	waitFor(t, "ready again", func() bool { return e.worker.Readiness().Ready })
	logs := e.logs.String()
	// Each names the principal (the token's name), the action, the node
	// and the outcome.
	for _, want := range []string{`msg="audit: cordon ok" component=admin audit=true principal=name-of-tok-w action=cordon node=w-real outcome=ok status=200 client=127.0.0.1 persist=false changed=true`,
		`msg="audit: uncordon ok" component=admin audit=true principal=name-of-tok-w action=uncordon node=w-real outcome=ok status=200 client=127.0.0.1 persist=false changed=true`,
		`msg="audit: cordon invalid_argument" component=admin audit=true principal=name-of-tok-w action=cordon node=w-real outcome=invalid_argument status=400`} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
}
