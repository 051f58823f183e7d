package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/state/memory"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/browsertest"
	"github.com/talonhq/talon/internal/testsupport/coordtest"
)

// The browser tests run the page in headless Chromium (browsertest)
// against a real coordinator and admin listener on loopback. They skip
// under -short and fail, not skip, when Chromium is missing: run
// .ci/ensure-chromium.sh. TALON_CHROMIUM names another Chromium binary.
// TALON_UI_SCREENSHOTS names a directory to save screenshots of the page
// in (for looking at it). Every wait is bounded by
// browsertest.DefaultTimeout: the page polls every 3 s and backs off to
// 6 s after a failure, so recovery takes at most ~10 s.

const (
	clusterID = "ui-test"
	// xssVersion is a build version that is markup; the page must show it
	// as text.
	xssVersion = `<img src=x onerror="window.__xss=1">v1`
)

// testTiming keeps records as seeded: the store runs on a frozen clock (no
// lease runs out), and unhealthy-after is longer than any test, so the
// coordinator, whose liveness clock is real, never proposes a seeded
// worker (which never heartbeats) late. A frozen liveness clock would do
// the same but would also freeze the recovery hold the store-failure
// tests wait out.
var testTiming = cluster.Timing{HeartbeatInterval: time.Second, UnhealthyAfter: time.Minute, LeaseTTL: 2 * time.Minute}

// chromium returns the Chromium binary (browsertest.Chromium).
func chromium(t *testing.T) string {
	t.Helper()
	return browsertest.Chromium(t)
}

// env is a coordinator over a memory store with an admin listener serving
// Handler on loopback. The store runs on a frozen clock: records do not age
// unless a test says so.
type env struct {
	store *memory.Store
	clock *testsupport.FakeClock
	url   string // base URL of the admin listener, with trailing slash
}

func startEnv(t *testing.T, adm config.AdminConfig) *env {
	t.Helper()
	e := &env{clock: testsupport.NewFakeClock(time.Now().Truncate(time.Millisecond))}
	c := coordtest.Start(t, coordtest.Options{
		ClusterID: clusterID, NodeID: "coord-a", Timing: testTiming,
		RequestTimeout: 300 * time.Millisecond, ShutdownTimeout: time.Second,
		StoreClock: e.clock.Now, WaitReady: true, Admin: &adm, UI: Handler(),
	})
	e.store, e.url = c.Memory, c.AdminURL+"/"
	return e
}

func exposeAll() config.AdminConfig {
	return config.AdminConfig{ExposeHealth: true, ExposeMetrics: true, ExposeAPI: true, ExposeUI: true}
}

// putWorkers writes five workers: two healthy, one degraded (all three
// eligible), one unhealthy and one not ready (excluded). w2's version is
// markup. Heartbeat ages differ so the age column has something to show.
func (e *env) putWorkers(t *testing.T) {
	t.Helper()
	recs := []*cluster.Record{
		{NodeID: "w1", Health: cluster.HealthHealthy, Ready: true, Version: "v1.4.2", Labels: map[string]string{"zone": "eu-1a", "rack": "r12"},
			Capacity: cluster.Capacity{CapacityBytes: 64 << 30, ResidentBytes: 21 << 30, Blocks: 5210, Pages: 1_333_760, InflightLoads: 3},
			Counters: cluster.Counters{RequestsTotal: 182_311, HitsTotal: 171_004, MissesTotal: 11_307, BytesServedTotal: 3 << 40, EvictionsTotal: 914}},
		{NodeID: "w2", Health: cluster.HealthHealthy, Ready: true, Version: xssVersion, Labels: map[string]string{"zone": "eu-1b", "note": "<b>bold</b>"},
			Capacity: cluster.Capacity{CapacityBytes: 64 << 30, ResidentBytes: 60 << 30},
			Counters: cluster.Counters{HitsTotal: 50, MissesTotal: 50}},
		{NodeID: "w3", Health: cluster.HealthDegraded, Ready: true, Version: "v1.4.2", Labels: map[string]string{"zone": "eu-1c"},
			Capacity: cluster.Capacity{CapacityBytes: 32 << 30, ResidentBytes: 1 << 30}},
		{NodeID: "w4", Health: cluster.HealthUnhealthy, Ready: true, Version: "v1.4.1"},
		{NodeID: "w5", Health: cluster.HealthHealthy, Ready: false, Version: "v1.4.2"},
	}
	for i, r := range recs {
		r.ClusterID, r.Role, r.IncarnationID = clusterID, cluster.RoleWorker, "inc-"+r.NodeID
		r.Address = fmt.Sprintf("10.0.0.%d:7500", i+11)
		if _, err := e.store.UpsertNode(context.Background(), r, testTiming.LeaseTTL); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(300 * time.Millisecond)
	}
}

// getJSON reads an API answer straight from the listener, to compare with
// what the page shows.
func (e *env) getJSON(t *testing.T, path string, v any) {
	t.Helper()
	resp, err := http.Get(e.url + strings.TrimPrefix(path, "/"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", path, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

// browser is one headless Chromium tab (browsertest.Browser) with the
// page-specific helpers below.
type browser struct {
	*browsertest.Browser
	t *testing.T
}

// newBrowser starts Chromium bin (closed at cleanup). Start it after the
// environment, so that it is closed before the listener.
func newBrowser(t *testing.T, bin string) *browser {
	t.Helper()
	return &browser{Browser: browsertest.New(t, bin), t: t}
}

func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	b.Do(what, steps...)
}

// eval evaluates a JavaScript expression in the page into v.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	return browsertest.Eval[T](b.Browser, expr)
}

// waitFor polls a boolean JavaScript expression until it is true.
func (b *browser) waitFor(what, expr string) {
	b.t.Helper()
	b.WaitFor(what, expr)
}

// screenshot saves a full-page PNG when TALON_UI_SCREENSHOTS names a directory.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	b.Screenshot(name)
}

// JavaScript snippets the tests share.
const (
	jsRows        = `Array.from(document.querySelectorAll("#nodes tbody tr[data-node]"), tr => tr.dataset.node)`
	jsBannerShown = `(e => !!e && !e.hidden && e.getClientRects().length > 0)(document.getElementById("banner"))`
)

// setFilters sets the node filters as a user would, then lets the page
// see the change.
func (b *browser) setFilters(text, role, health string) {
	b.t.Helper()
	eval[bool](b, fmt.Sprintf(`(() => {
		document.getElementById("filter").value = %q;
		document.getElementById("filter-role").value = %q;
		document.getElementById("filter-health").value = %q;
		document.getElementById("filter").dispatchEvent(new Event("input", {bubbles: true}));
		return true;
	})()`, text, role, health))
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	return eval[string](b, fmt.Sprintf(`(e => e ? e.textContent : "<missing>")(document.querySelector(%q))`, sel))
}

var allNodes = []string{"coordinator/coord-a", "worker/w1", "worker/w2", "worker/w3", "worker/w4", "worker/w5"}

func (b *browser) waitRows(want []string) {
	b.t.Helper()
	wantJSON, _ := json.Marshal(want)
	b.waitFor(fmt.Sprintf("node rows %s", wantJSON), fmt.Sprintf(`JSON.stringify(%s) === %q`, jsRows, wantJSON))
}

func TestBrowserRendersCluster(t *testing.T) {
	bin := chromium(t)
	e := startEnv(t, exposeAll())
	e.putWorkers(t)
	b := newBrowser(t, bin)
	b.do("opening the page", chromedp.Navigate(e.url))
	b.waitRows(allNodes)

	var c apiv1.Cluster
	e.getJSON(t, apiv1.PathCluster, &c)
	t.Run("header", func(t *testing.T) {
		if got := b.text("#cluster-id"); got != clusterID {
			t.Errorf("cluster ID %q, want %q", got, clusterID)
		}
		if got := b.text("#pv"); got != c.PlacementVersion {
			t.Errorf("placement version %q, want %q", got, c.PlacementVersion)
		}
		if got := b.text("#store"); got != "memory · healthy" {
			t.Errorf("store %q", got)
		}
		if got := b.text("#revision"); got == "" || got == "…" {
			t.Errorf("revision %q", got)
		}
		if got := b.text("#observed"); !regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC · .* ago$`).MatchString(got) {
			t.Errorf("observed %q", got)
		}
		if got := b.text("#served-by"); got != "coord-a" {
			t.Errorf("served by %q", got)
		}
		if eval[bool](b, jsBannerShown) {
			t.Error("banner shown while the data is current")
		}
	})
	t.Run("counts", func(t *testing.T) {
		got := eval[[]string](b, `Array.from(document.querySelectorAll("#counts tbody tr"), tr => Array.from(tr.cells, c => c.textContent).join(" "))`)
		want := []string{"Coordinators 1 1 0 0 0 1", "Workers 5 3 1 1 0 4", "All 6 4 1 1 0 5"}
		if !slices.Equal(got, want) {
			t.Errorf("counts %q, want %q", got, want)
		}
		if got := b.text("#eligible"); !strings.HasPrefix(got, "3 of 5 workers") {
			t.Errorf("eligible %q", got)
		}
		// Issue 38: the coordinators against the expected count, and the
		// cluster's totals as the API computed them.
		if got := b.text("#presence"); got != "Coordinators: 1 of 1 expected present, 1 ready." {
			t.Errorf("presence %q", got)
		}
		// Issue 46: the fixture's workers and coordinator run different
		// versions, so the page says the cluster is mid-upgrade, at the
		// level the API gives.
		if u := c.Upgrade; u == nil || !u.Mixed {
			t.Errorf("fixture upgrade %+v: want a mixed cluster", u)
		} else if got, want := b.text("#upgrade"), fmt.Sprintf("Mid-upgrade: cluster feature level %d (this coordinator speaks %d); versions ", u.FeatureLevel, u.ServerLevel); !strings.HasPrefix(got, want) {
			t.Errorf("upgrade %q, want it to start %q", got, want)
		}
		if got := b.text("#total-resident"); got != "82 GiB of 160 GiB on 5 workers" {
			t.Errorf("resident %q", got)
		}
		if got, want := b.text("#total-hit"), fmt.Sprintf("%.1f%%", *c.Capacity.HitRatio*100); got != want {
			t.Errorf("hit ratio %q, want %q (the API's)", got, want)
		}
	})
	t.Run("row cells", func(t *testing.T) {
		row := func(id string) []string {
			return eval[[]string](b, fmt.Sprintf(`Array.from(document.querySelector('#nodes tbody tr[data-node="worker/%s"]').cells, c => c.textContent)`, id))
		}
		// Rates need two heartbeats: none yet ("—", no trend).
		want := []string{"worker", "w1", "healthy", "yes", "1.5 s", "v1.4.2", "10.0.0.11:7500", "21 GiB / 64 GiB (32.8%)", "—", "—", "—", "", "93.8%", "rack=r12, zone=eu-1a"}
		if got := row("w1"); !slices.Equal(got, want) {
			t.Errorf("w1 cells\n got %q\nwant %q", got, want)
		}
		if got := row("w4")[2]; got != "unhealthy" {
			t.Errorf("w4 health %q", got)
		}
		if got := row("w5")[3]; got != "no" {
			t.Errorf("w5 ready %q", got)
		}
		// Markup in API data is text, never elements.
		if got := row("w2")[5]; got != xssVersion {
			t.Errorf("w2 version %q, want the literal %q", got, xssVersion)
		}
		if eval[bool](b, `document.querySelector("#nodes img") !== null || window.__xss !== undefined`) {
			t.Error("a version string became markup")
		}
		headers := eval[[]string](b, `Array.from(document.querySelectorAll("#nodes thead th"), th => th.getAttribute("scope") + ":" + th.textContent.trim())`)
		if len(headers) != 14 || headers[0] != "col:Role ▲" || headers[1] != "col:Node ID" || headers[13] != "col:Labels" {
			t.Errorf("headers %q", headers)
		}
	})
	t.Run("sort", func(t *testing.T) {
		b.do("sorting by heartbeat age", chromedp.Click(chromedp.CSS(`button[data-sort="age"]`)))
		b.waitRows([]string{"coordinator/coord-a", "worker/w5", "worker/w4", "worker/w3", "worker/w2", "worker/w1"})
		if got := eval[string](b, `document.querySelector('button[data-sort="age"]').parentElement.getAttribute("aria-sort")`); got != "ascending" {
			t.Errorf("aria-sort %q", got)
		}
		b.do("sorting by node ID", chromedp.Click(chromedp.CSS(`button[data-sort="nodeId"]`)), chromedp.Click(chromedp.CSS(`button[data-sort="nodeId"]`)))
		b.waitRows([]string{"worker/w5", "worker/w4", "worker/w3", "worker/w2", "worker/w1", "coordinator/coord-a"})
		b.do("sorting by role", chromedp.Click(chromedp.CSS(`button[data-sort="role"]`)))
		b.waitRows(allNodes)
	})
	t.Run("filter", func(t *testing.T) {
		b.do("filtering by label", chromedp.SendKeys(chromedp.CSS("#filter"), "eu-1b"))
		b.waitRows([]string{"worker/w2"})
		b.setFilters("", "", "healthy")
		b.waitRows([]string{"coordinator/coord-a", "worker/w1", "worker/w2", "worker/w5"})
		b.setFilters("", "worker", "healthy")
		b.waitRows([]string{"worker/w1", "worker/w2", "worker/w5"})
		if got := b.text("#shown"); got != "3 of 6 nodes match the filter" {
			t.Errorf("shown %q", got)
		}
		b.setFilters("", "", "")
		b.waitRows(allNodes)
	})
	b.screenshot("nodes")
	t.Run("detail", func(t *testing.T) {
		b.do("opening w2", chromedp.Click(chromedp.CSS(`a[data-node="worker/w2"]`)))
		b.waitFor("the detail view", `!document.getElementById("detail").hidden`)
		if got := b.text("#detail-h"); got != "Node w2 (worker)" {
			t.Errorf("detail heading %q", got)
		}
		if got := eval[string](b, `location.hash`); got != "#node/worker/w2" {
			t.Errorf("hash %q", got)
		}
		dl := eval[map[string]string](b, `Object.fromEntries(Array.from(document.querySelectorAll("#detail dt"), dt => [dt.textContent, dt.nextElementSibling.textContent]))`)
		for k, want := range map[string]string{"Version": xssVersion, "note": "<b>bold</b>", "zone": "eu-1b", "Hit ratio": "50.0%", "Incarnation": "inc-w2", "Data address": "10.0.0.12:7500"} {
			if dl[k] != want {
				t.Errorf("detail %s = %q, want %q", k, dl[k], want)
			}
		}
		// Issue 36: the counters are as old as the status, which a quiet
		// node writes once per status interval; the page says so, and who
		// cordoned (nobody here).
		if !strings.Contains(dl["Status written"], "capacity and counters are as of then") || dl["Cordoned"] != "no" {
			t.Errorf("detail Status written = %q, Cordoned = %q", dl["Status written"], dl["Cordoned"])
		}
		// Issue 38: the age column is the heartbeat's, and the detail
		// says when the last heartbeat was accepted.
		if got := b.text(`button[data-sort="age"]`); !strings.Contains(got, "HB age") {
			t.Errorf("age column header %q, want HB age", got)
		}
		if !strings.Contains(dl["Last heartbeat"], "ago at observation") {
			t.Errorf("detail Last heartbeat = %q", dl["Last heartbeat"])
		}
		if eval[bool](b, `document.querySelector("#detail b, #detail img") !== null`) {
			t.Error("a label value became markup")
		}
		b.screenshot("detail")
		// The node leaves: the view says so instead of showing old data.
		if _, err := e.store.RemoveNode(context.Background(), cluster.Key{ClusterID: clusterID, Role: cluster.RoleWorker, NodeID: "w2"}, "inc-w2"); err != nil {
			t.Fatal(err)
		}
		b.waitFor("the detail view to say w2 left", `document.getElementById("detail-missing").textContent.includes("not in the snapshot")`)
		b.do("closing the detail view", chromedp.Click(chromedp.CSS("#detail-close")))
		b.waitFor("the detail view to close", `document.getElementById("detail").hidden`)
	})
}

func TestBrowserStaleOnStoreFailure(t *testing.T) {
	bin := chromium(t)
	e := startEnv(t, exposeAll())
	e.putWorkers(t)
	b := newBrowser(t, bin)
	b.do("opening the page", chromedp.Navigate(e.url))
	b.waitRows(allNodes)
	observed := b.text("#observed")

	e.store.SetFault(state.ErrUnavailable)
	b.waitFor("the STALE banner", jsBannerShown+` && document.getElementById("banner-title").textContent === "STALE"`)
	// The last good data stays, dimmed, and nothing claims it is current.
	b.waitRows(allNodes)
	if got := b.text("#cluster-id"); got != clusterID {
		t.Errorf("cluster ID %q after the failure", got)
	}
	if !eval[bool](b, `document.getElementById("data").classList.contains("stale")`) {
		t.Error("data not marked stale")
	}
	text := b.text("#banner-text")
	obsTime := strings.SplitN(observed, " · ", 2)[0]
	if !strings.Contains(text, "observed "+obsTime) {
		t.Errorf("banner %q does not give the observation time %q", text, obsTime)
	}
	if got := b.text("#banner-error"); !strings.Contains(got, "HTTP 503 not_ready") {
		t.Errorf("banner error %q", got)
	}
	b.waitFor("the data age in the banner", `/^Data age .+\. Retrying in \d+ s\.$/.test(document.getElementById("banner-age").textContent)`)
	if got := b.text("#store"); got != "memory · not readable now" {
		t.Errorf("store %q while the coordinator answers 503", got)
	}
	if got := b.text("#conn"); got != "STALE: refresh failing" {
		t.Errorf("status %q", got)
	}
	if got := eval[string](b, `document.querySelector("#banner [aria-live]").getAttribute("aria-live")`); got != "assertive" {
		t.Errorf("banner aria-live %q", got)
	}
	if got := eval[string](b, `document.title`); !strings.Contains(got, "STALE") {
		t.Errorf("title %q", got)
	}
	b.screenshot("stale")

	e.store.ClearFault()
	b.waitFor("the banner to go", `document.getElementById("banner").hidden`)
	if eval[bool](b, `document.getElementById("data").classList.contains("stale")`) {
		t.Error("data still marked stale after recovery")
	}
	if got := b.text("#store"); got != "memory · healthy" {
		t.Errorf("store %q after recovery", got)
	}
	b.waitRows(allNodes)
}

func TestBrowserUnavailableBeforeFirstData(t *testing.T) {
	bin := chromium(t)
	e := startEnv(t, exposeAll())
	e.store.SetFault(state.ErrUnavailable)
	b := newBrowser(t, bin)
	b.do("opening the page", chromedp.Navigate(e.url))
	b.waitFor("the UNAVAILABLE banner", jsBannerShown+` && document.getElementById("banner-title").textContent === "UNAVAILABLE"`)
	if !eval[bool](b, `document.getElementById("data").hidden && document.getElementById("summary").hidden`) {
		t.Error("data or header summary shown without data")
	}
	if got := b.text("#banner-error"); !strings.Contains(got, "HTTP 503 not_ready") {
		t.Errorf("banner error %q", got)
	}
	b.screenshot("unavailable")
	e.store.ClearFault()
	b.waitRows([]string{"coordinator/coord-a"})
	b.waitFor("the banner to go", `document.getElementById("banner").hidden`)
}

func TestBrowserPlacementExplainer(t *testing.T) {
	bin := chromium(t)
	e := startEnv(t, exposeAll())
	e.putWorkers(t)
	b := newBrowser(t, bin)
	b.do("opening the page", chromedp.Navigate(e.url))
	b.waitRows(allNodes)

	const key = "volumes/vol-7/blocks/000042"
	var want apiv1.Placement
	e.getJSON(t, apiv1.PathPlacement+"?key=volumes%2Fvol-7%2Fblocks%2F000042&replicas=2", &want)
	if len(want.Owners) != 2 {
		t.Fatalf("API owners %+v", want.Owners)
	}
	// The replicas field defaults to the cluster's placementReplicas (2),
	// not 1: the explainer shows the owners clients read from.
	var cl apiv1.Cluster
	e.getJSON(t, apiv1.PathCluster, &cl)
	if cl.PlacementReplicas != 2 {
		t.Fatalf("cluster placementReplicas %d, want the default 2", cl.PlacementReplicas)
	}
	b.waitFor("the cluster's replicas in the explainer", `document.querySelector("#pl-replicas").value === "2"`)
	b.do("asking for the owners",
		chromedp.SendKeys(chromedp.CSS("#pl-key"), key),
		chromedp.Click(chromedp.CSS(`#placement-form button[type="submit"]`)),
	)
	b.waitFor("the owners", `document.querySelectorAll("#placement ol.owners li").length === 2`)
	owners := eval[[]string](b, `Array.from(document.querySelectorAll("#placement ol.owners li strong"), s => s.textContent)`)
	if want := []string{want.Owners[0].NodeID, want.Owners[1].NodeID}; !slices.Equal(owners, want) {
		t.Errorf("owners %q, want %q", owners, want)
	}
	tables := eval[[][]string](b, `Array.from(document.querySelectorAll("#placement table"), t => Array.from(t.tBodies[0].rows, r => Array.from(r.cells, c => c.textContent).join(" ")))`)
	if len(tables) != 2 {
		t.Fatalf("placement tables %q", tables)
	}
	var cands []string
	for _, c := range want.Candidates {
		owner := "no"
		if c.Rank <= 2 {
			owner = "yes"
		}
		cands = append(cands, fmt.Sprintf("%d %s %s %s %s", c.Rank, c.NodeID, c.Address, c.Score, owner))
	}
	if !slices.Equal(tables[0], cands) {
		t.Errorf("candidates\n got %q\nwant %q", tables[0], cands)
	}
	if excl := []string{"w4 unhealthy unhealthy", "w5 not ready healthy"}; !slices.Equal(tables[1], excl) {
		t.Errorf("excluded %q, want %q", tables[1], excl)
	}
	if got := b.text("#placement p"); !strings.Contains(got, key) || !strings.Contains(got, want.PlacementVersion) {
		t.Errorf("placement summary %q", got)
	}
	b.screenshot("placement")

	// Membership changes: the page says the explanation is out of date.
	if _, err := e.store.RemoveNode(context.Background(), cluster.Key{ClusterID: clusterID, Role: cluster.RoleWorker, NodeID: "w1"}, "inc-w1"); err != nil {
		t.Fatal(err)
	}
	b.waitFor("the out-of-date note", `document.querySelector("#placement p.note") !== null`)
}

func TestBrowserTokenPrompt(t *testing.T) {
	bin := chromium(t)
	const token = "ui-token-5f1d2c"
	adm := exposeAll()
	adm.Tokens = []config.AdminToken{{Name: "ui", Scopes: config.ScopeRead, Token: config.Secret(token)}}
	e := startEnv(t, adm)
	e.putWorkers(t)
	b := newBrowser(t, bin)
	b.do("opening the page", chromedp.Navigate(e.url))
	b.waitFor("the token prompt", `!document.getElementById("auth").hidden`)
	if !eval[bool](b, `document.getElementById("data").hidden`) {
		t.Error("data section shown before authentication")
	}
	if eval[bool](b, jsBannerShown) {
		t.Error("the STALE/UNAVAILABLE banner is shown for a missing token")
	}

	b.do("giving a wrong token", chromedp.SendKeys(chromedp.CSS("#token"), "wrong"), chromedp.Click(chromedp.CSS(`#auth-form button[type="submit"]`)))
	b.waitFor("the rejection", `document.getElementById("auth-error").textContent.includes("rejected")`)
	b.screenshot("token")
	if got := eval[string](b, `sessionStorage.getItem("talon.adminToken") || ""`); got != "" {
		t.Errorf("a rejected token stays in sessionStorage: %q", got)
	}

	b.do("giving the token", chromedp.SendKeys(chromedp.CSS("#token"), token+"\r"))
	b.waitRows(allNodes)
	if !eval[bool](b, `document.getElementById("auth").hidden`) {
		t.Error("token prompt still shown")
	}
	if got := eval[string](b, `sessionStorage.getItem("talon.adminToken")`); got != token {
		t.Errorf("sessionStorage token %q", got)
	}
	if got := eval[int](b, `localStorage.length + document.cookie.length`); got != 0 {
		t.Errorf("the page stored %d things outside sessionStorage", got)
	}
	if got := eval[string](b, `location.href`); strings.Contains(got, token) {
		t.Errorf("token in the URL %q", got)
	}
	if got := eval[string](b, `document.getElementById("token").value`); got != "" {
		t.Errorf("token left in the input: %q", got)
	}

	// A reload in the same tab keeps the token; forgetting it brings the prompt back.
	b.do("reloading", chromedp.Reload())
	b.waitRows(allNodes)
	b.do("forgetting the token", chromedp.Click(chromedp.CSS("#forget-token")))
	b.waitFor("the token prompt", `!document.getElementById("auth").hidden`)
	if got := eval[string](b, `sessionStorage.getItem("talon.adminToken") || ""`); got != "" {
		t.Errorf("forgotten token still stored: %q", got)
	}
}

// TestBrowserRatesEventsCoordinators: after a second heartbeat of w1 the
// page shows its live hit ratio, requests and bytes per second and a
// trend; the events panel lists what the coordinator observed; the
// coordinators panel shows this coordinator's own view.
func TestBrowserRatesEventsCoordinators(t *testing.T) {
	bin := chromium(t)
	e := startEnv(t, exposeAll())
	e.putWorkers(t)
	b := newBrowser(t, bin)
	b.do("opening the page", chromedp.Navigate(e.url))
	b.waitRows(allNodes)
	// w1 heartbeats 2 s (store clock) later: 1000 requests, 740 hits and
	// 260 misses (74% now, where the lifetime ratio is 93.8%), 2 MiB.
	rec := &cluster.Record{ClusterID: clusterID, Role: cluster.RoleWorker, NodeID: "w1", IncarnationID: "inc-w1", Address: "10.0.0.11:7500",
		Health: cluster.HealthHealthy, Ready: true, Version: "v1.4.2", HeartbeatSeq: 1, Labels: map[string]string{"zone": "eu-1a", "rack": "r12"},
		Capacity: cluster.Capacity{CapacityBytes: 64 << 30, ResidentBytes: 21 << 30},
		Counters: cluster.Counters{RequestsTotal: 182_311 + 1000, HitsTotal: 171_004 + 740, MissesTotal: 11_307 + 260, BytesServedTotal: 3<<40 + 2<<20, EvictionsTotal: 914}}
	var before apiv1.NodeResponse
	e.getJSON(t, apiv1.PathNodes+"/w1", &before)
	e.clock.Set(time.UnixMilli(before.Node.UpdatedAtUnixMs).Add(2 * time.Second))
	if _, err := e.store.UpsertNode(context.Background(), rec, testTiming.LeaseTTL); err != nil {
		t.Fatal(err)
	}
	cell := func(id string, i int) string {
		return eval[string](b, fmt.Sprintf(`(tr => tr ? tr.cells[%d].textContent : "")(document.querySelector('#nodes tbody tr[data-node="worker/%s"]'))`, i, id))
	}
	b.waitFor("w1's rates", `(tr => !!tr && tr.cells[9].textContent !== "—")(document.querySelector('#nodes tbody tr[data-node="worker/w1"]'))`)
	if got := cell("w1", 8); got != "74.0%" {
		t.Errorf("hit ratio now %q, want 74.0%%", got)
	}
	if got := cell("w1", 9); got != "500" {
		t.Errorf("req/s %q, want 500", got)
	}
	if got := cell("w1", 10); got != "1.05M" {
		t.Errorf("bytes/s %q, want 1.05M", got)
	}
	if got := cell("w1", 12); got != "93.7%" { // (171004+740) / (182311+1000)
		t.Errorf("lifetime hit ratio %q", got)
	}
	// A third heartbeat draws a trend of two points.
	rec.HeartbeatSeq, rec.Counters.RequestsTotal = 2, rec.Counters.RequestsTotal+2000
	e.clock.Advance(2 * time.Second)
	if _, err := e.store.UpsertNode(context.Background(), rec, testTiming.LeaseTTL); err != nil {
		t.Fatal(err)
	}
	b.waitFor("w1's trend", `(tr => !!tr && tr.cells[11].textContent.length === 2)(document.querySelector('#nodes tbody tr[data-node="worker/w1"]'))`)
	if got := cell("w1", 11); got != "▄█" {
		t.Errorf("trend %q, want ▄█ (500 then 1000 req/s)", got)
	}
	b.waitFor("the cluster trend", `document.getElementById("cluster-trend").textContent.startsWith("Cluster req/s")`)

	// Events: the joins the coordinator observed, newest first.
	b.waitFor("the events panel", `!document.getElementById("events-section").hidden && document.querySelectorAll('#events tbody tr[data-event="node_joined"]').length >= 5`)
	if got := b.text("#events-h"); got != "Events observed by coord-a" {
		t.Errorf("events heading %q", got)
	}
	// Coordinators: this one, with its own view.
	row := eval[[]string](b, `Array.from(document.querySelector('#coordinators tbody tr[data-coordinator="coord-a"]').cells, c => c.textContent)`)
	var c apiv1.Cluster
	e.getJSON(t, apiv1.PathCluster, &c)
	if len(row) != 9 || row[0] != "coord-a (this one)" || row[1] != "yes" || row[4] != c.PlacementVersion || row[5] != "3" || row[6] != "yes" {
		t.Errorf("coordinator row %q (placement %s)", row, c.PlacementVersion)
	}
	// Issue 38: another coordinator publishes a placement that differs
	// from this one's and keeps it: its row says so in words.
	other := &cluster.Record{ClusterID: clusterID, Role: cluster.RoleCoordinator, NodeID: "coord-b", IncarnationID: "inc-coord-b", Address: "10.0.0.99:7400",
		Version: "v1.4.2", Health: cluster.HealthHealthy, Ready: true, Capacity: cluster.Capacity{StoreHealthy: true}, PlacementVersion: "00000000000000bb", EligibleWorkers: 2}
	if _, err := e.store.UpsertNode(context.Background(), other, testTiming.LeaseTTL); err != nil {
		t.Fatal(err)
	}
	b.waitFor("coord-b marked as disagreeing", `(document.querySelector('#coordinators tbody tr[data-coordinator="coord-b"]')?.cells[6].textContent || "") === "NO: differs from coord-a"`)
	if got := b.text("#coordinators-note"); !strings.Contains(got, "1 DISAGREEING") {
		t.Errorf("coordinators note %q", got)
	}
	b.screenshot("rates-events-coordinators")
}

// TestBrowserDashboardLink: with admin-ui-dashboard-url set, the header
// links it (a new tab, no referrer); without, there is no link.
func TestBrowserDashboardLink(t *testing.T) {
	bin := chromium(t)
	adm := exposeAll()
	c := coordtest.Start(t, coordtest.Options{
		ClusterID: clusterID, NodeID: "coord-a", Timing: testTiming, RequestTimeout: 300 * time.Millisecond, ShutdownTimeout: time.Second,
		WaitReady: true, Admin: &adm, UI: HandlerWith(Options{DashboardURL: "https://grafana.example/d/talon"}),
	})
	b := newBrowser(t, bin)
	b.do("opening the page", chromedp.Navigate(c.AdminURL+"/"))
	b.waitFor("the dashboard link", `!document.getElementById("dashboard").hidden`)
	if got := eval[string](b, `document.getElementById("dashboard").href`); got != "https://grafana.example/d/talon" {
		t.Errorf("link %q", got)
	}
	if got := eval[string](b, `document.getElementById("dashboard").rel`); got != "noopener noreferrer" {
		t.Errorf("rel %q", got)
	}
	e := startEnv(t, exposeAll())
	b2 := newBrowser(t, bin)
	b2.do("opening the page without a dashboard", chromedp.Navigate(e.url))
	b2.waitRows([]string{"coordinator/coord-a"})
	if eval[bool](b2, `!document.getElementById("dashboard").hidden`) {
		t.Error("a dashboard link without the setting")
	}
}

// TestBrowserPagesLargeCluster: a cluster larger than a page of the table
// (TABLE_ROWS, 100) is shown a page at a time: the DOM holds one page of
// rows, the pager walks through every node exactly once in sort order,
// a filter or a sort goes back to the first page, and a node opened by
// URL brings its page.
func TestBrowserPagesLargeCluster(t *testing.T) {
	bin := chromium(t)
	e := startEnv(t, exposeAll())
	const workers = 250
	want := seedWorkers(t, e, workers)
	b := newBrowser(t, bin)
	b.do("opening the page", chromedp.Navigate(e.url))
	b.waitRows(want[:100])
	if got := b.text("#page-info"); got != "Rows 1–100 of 251 · page 1 of 3" {
		t.Errorf("page info %q", got)
	}
	if got := b.text("#shown"); got != "251 nodes" {
		t.Errorf("shown %q", got)
	}
	if !eval[bool](b, `document.getElementById("page-prev").disabled && !document.getElementById("page-next").disabled`) {
		t.Error("on the first page: previous enabled or next disabled")
	}
	var seen []string
	seen = append(seen, eval[[]string](b, jsRows)...)
	for page := 2; page <= 3; page++ {
		b.do("next page", chromedp.Click(chromedp.CSS("#page-next")))
		end := min(page*100, len(want))
		b.waitRows(want[(page-1)*100 : end])
		seen = append(seen, eval[[]string](b, jsRows)...)
	}
	if !slices.Equal(seen, want) {
		t.Errorf("the pages showed %d rows, want every one of the %d nodes once in order", len(seen), len(want))
	}
	if got := b.text("#page-info"); got != "Rows 201–251 of 251 · page 3 of 3" {
		t.Errorf("last page info %q", got)
	}
	if !eval[bool](b, `document.getElementById("page-next").disabled`) {
		t.Error("next enabled on the last page")
	}
	b.screenshot("pages")
	// A filter shows its matches from their first page.
	b.setFilters("worker", "", "")
	b.waitRows(want[1:101])
	if got := b.text("#page-info"); got != "Rows 1–100 of 250 · page 1 of 3" {
		t.Errorf("filtered page info %q", got)
	}
	b.setFilters("", "", "")
	b.waitRows(want[:100])
	// A sort goes back to the first page too.
	b.do("next page", chromedp.Click(chromedp.CSS("#page-next")))
	b.waitRows(want[100:200])
	b.do("sorting by node ID, descending", chromedp.Click(chromedp.CSS(`button[data-sort="nodeId"]`)), chromedp.Click(chromedp.CSS(`button[data-sort="nodeId"]`)))
	desc := slices.Clone(want[1:])
	slices.Reverse(desc)
	b.waitRows(desc[:100])
	b.do("sorting by role", chromedp.Click(chromedp.CSS(`button[data-sort="role"]`)))
	b.waitRows(want[:100])
	// A node opened by URL shows its page, selected.
	b.do("opening w-0240 by URL", chromedp.Navigate(e.url+"#node/worker/w-0240"))
	b.waitRows(want[200:])
	if got := eval[string](b, `document.querySelector("#nodes tbody tr.selected").dataset.node`); got != "worker/w-0240" {
		t.Errorf("selected row %q", got)
	}
	b.waitFor("the detail view", `!document.getElementById("detail").hidden`)
}

// TestBrowserLayoutNodesFirst: at 1400×900 the node table comes before
// the events and the coordinators, and the page never scrolls sideways
// (issue 38: the nodes sat below 20 event rows and the page scrolled
// sideways at 1400 px).
func TestBrowserLayoutNodesFirst(t *testing.T) {
	bin := chromium(t)
	e := startEnv(t, exposeAll())
	e.putWorkers(t)
	b := newBrowser(t, bin)
	b.do("a 1400×900 viewport", chromedp.EmulateViewport(1400, 900))
	b.do("opening the page", chromedp.Navigate(e.url))
	b.waitRows(allNodes)
	// A worker with wide content: many long labels, a long version and a
	// not-ready reason (the cells wrap; the page must not widen).
	wide := &cluster.Record{ClusterID: clusterID, Role: cluster.RoleWorker, NodeID: "worker-with-a-rather-long-node-identifier-0001", IncarnationID: "inc-wide",
		Address: "worker-with-a-rather-long-node-identifier-0001.cache.eu-central-1.example.internal:7500", Version: "v1.4.2-rc.3+build.20261203.abcdef0123456789",
		Health: cluster.HealthHealthy, Ready: false, NotReadyReason: "warming the cache from the blob store after a restart of the host",
		Labels: map[string]string{"topology.kubernetes.io/zone": "eu-central-1a", "topology.kubernetes.io/region": "eu-central-1",
			"node.kubernetes.io/instance-type": "m7i.8xlarge", "talon.io/pool": "hot-objects-large-blocks", "team": "storage-platform-caching"}}
	if _, err := e.store.UpsertNode(context.Background(), wide, testTiming.LeaseTTL); err != nil {
		t.Fatal(err)
	}
	b.waitFor("the wide worker", `document.querySelectorAll("#nodes tbody tr[data-node]").length > `+fmt.Sprint(len(allNodes)))
	b.waitFor("the events panel", `!document.getElementById("events-section").hidden`)
	top := func(sel string) float64 {
		return eval[float64](b, fmt.Sprintf(`document.querySelector(%q).getBoundingClientRect().top + window.scrollY`, sel))
	}
	nodes, events, coords := top("#nodes"), top("#events-section"), top("#coordinators")
	if nodes >= events || nodes >= coords {
		t.Errorf("node table at %.0f px, events at %.0f, coordinators at %.0f: want the nodes first", nodes, events, coords)
	}
	if nodes > 900 {
		t.Errorf("node table starts at %.0f px, below the first screen (900 px)", nodes)
	}
	if w := eval[[]float64](b, `[document.documentElement.scrollWidth, document.documentElement.clientWidth]`); w[0] > w[1] {
		t.Errorf("page %.0f px wide in a %.0f px viewport: it scrolls sideways", w[0], w[1])
	}
	for _, table := range []string{"#nodes", "#events", "#coordinators"} {
		if w := eval[[]float64](b, fmt.Sprintf(`(t => [t.getBoundingClientRect().right, document.documentElement.clientWidth])(document.querySelector(%q))`, table)); w[0] > w[1] {
			t.Errorf("%s ends at %.0f px in a %.0f px viewport: it scrolls sideways", table, w[0], w[1])
		}
	}
	b.screenshot("layout-1400")
}

// TestBrowserFirstPageWhileTheRestLoads: on a cluster of more than one
// page of nodes, the first load draws the first page as soon as it
// arrives and says the rest is loading; the count follows once every page
// did. The API behind the page answers the later pages 3 s late (a proxy),
// so on a page that waited for every page nothing would show before then.
func TestBrowserFirstPageWhileTheRestLoads(t *testing.T) {
	bin := chromium(t)
	e := startEnv(t, exposeAll())
	const workers = 1500
	want := seedWorkers(t, e, workers)
	target, err := url.Parse(e.url)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/api/v1/nodes") && r.URL.Query().Get("continue") != "" {
			select {
			case <-time.After(3 * time.Second):
			case <-r.Context().Done():
				return
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(slow.Close)
	b := newBrowser(t, bin)
	start := time.Now()
	b.do("opening the page", chromedp.Navigate(slow.URL+"/"))
	b.waitRows(want[:100])
	shown := b.text("#shown")
	if elapsed := time.Since(start); !strings.Contains(shown, "loading the rest") {
		t.Errorf("after %s the page shows %q, want the first page while the rest loads", elapsed.Round(time.Millisecond), shown)
	}
	if strings.HasPrefix(shown, "1501 nodes") {
		t.Errorf("the first page already counts every node: %q", shown)
	}
	b.waitFor("every node counted", `document.getElementById("shown").textContent === "1501 nodes"`)
	if got := b.text("#page-info"); got != "Rows 1–100 of 1501 · page 1 of 16" {
		t.Errorf("page info after the rest arrived: %q", got)
	}
}

// seedWorkers writes n healthy, ready workers w-0000... to e's store and
// returns the table's rows in order: the coordinator, then the workers.
func seedWorkers(t *testing.T, e *env, n int) []string {
	t.Helper()
	want := []string{"coordinator/coord-a"}
	for i := range n {
		id := fmt.Sprintf("w-%04d", i)
		r := &cluster.Record{ClusterID: clusterID, Role: cluster.RoleWorker, NodeID: id, IncarnationID: "inc-" + id,
			Address: fmt.Sprintf("10.0.%d.%d:7500", i/256, i%256), Health: cluster.HealthHealthy, Ready: true, Version: "v1.4.2"}
		if _, err := e.store.UpsertNode(context.Background(), r, testTiming.LeaseTTL); err != nil {
			t.Fatal(err)
		}
		want = append(want, "worker/"+id)
	}
	return want
}
