package admin

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/config"
)

const (
	tokOps     = "tok-ops-3a9e51c2"
	tokMetrics = "tok-met-80d4e7a1"
	tokReader  = "tok-rea-1c6b2f90"
	tokLegacy  = "tok-leg-77e0a3d5"
)

// scopedTokens are one token of each kind: operate, metrics only, read
// only, and a bare line of the old format (read and metrics).
func scopedTokens(t *testing.T) config.AdminConfig {
	t.Helper()
	cfg := exposeAll()
	toks, err := config.ParseAdminTokens("ops:read,operate:"+tokOps+"\nprometheus:metrics:"+tokMetrics+"\nviewer:read:"+tokReader+"\n"+tokLegacy+"\n", "test")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tokens = toks
	return cfg
}

// TestScopes: each token does what its scopes say and nothing more. The
// metrics token cannot cordon (it could: every token could do
// everything), a refusal names the route and the missing scope, and a
// refused write changes nothing.
func TestScopes(t *testing.T) {
	e := startCoordinator(t, envOptions{admin: scopedTokens(t)})
	e.put(t, workerRecord("w1", nil), time.Minute)
	cordonPath, uncordonPath := apiv1.NodeActionPath("w1", apiv1.SuffixCordon), apiv1.NodeActionPath("w1", apiv1.SuffixUncordon)
	for _, tt := range []struct {
		method, path, token string
		status              int
		msg                 string
	}{
		{http.MethodPost, cordonPath, tokMetrics, http.StatusForbidden, `POST cordon needs scope operate; token "prometheus" has metrics`},
		{http.MethodPost, cordonPath, tokReader, http.StatusForbidden, `POST cordon needs scope operate; token "viewer" has read`},
		{http.MethodPost, cordonPath, tokLegacy, http.StatusForbidden, `POST cordon needs scope operate; token "line-4" has read,metrics`},
		{http.MethodPost, uncordonPath, tokMetrics, http.StatusForbidden, `POST uncordon needs scope operate`},
		{http.MethodGet, apiv1.PathNodes, tokMetrics, http.StatusForbidden, `GET nodes needs scope read; token "prometheus" has metrics`},
		{http.MethodGet, apiv1.PathMetrics, tokReader, http.StatusForbidden, `GET metrics needs scope metrics; token "viewer" has read`},
		{http.MethodGet, apiv1.PathMetrics, tokMetrics, http.StatusOK, ""},
		{http.MethodGet, apiv1.PathMetrics, tokLegacy, http.StatusOK, ""},
		{http.MethodGet, apiv1.PathNodes, tokReader, http.StatusOK, ""},
		{http.MethodGet, apiv1.PathNodes, tokLegacy, http.StatusOK, ""},
	} {
		r := e.do(t, tt.method, tt.path, tt.token)
		if r.status != tt.status {
			t.Fatalf("%s %s with %s: %d %s, want %d", tt.method, tt.path, tt.token[:7], r.status, r.body, tt.status)
		}
		if tt.msg != "" {
			if b := r.apiError(t); b.Code != apiv1.CodePermissionDenied || !strings.Contains(b.Message, tt.msg) {
				t.Fatalf("%s %s with %s: %+v, want permission_denied with %q", tt.method, tt.path, tt.token[:7], b, tt.msg)
			}
		}
		if e.cordonedInStore(t, "w1") {
			t.Fatalf("%s %s with %s cordoned the worker", tt.method, tt.path, tt.token[:7])
		}
	}
	if r := e.do(t, http.MethodPost, cordonPath, tokOps); r.status != http.StatusOK || !e.cordonedInStore(t, "w1") {
		t.Fatalf("cordon with the operate token: %d %s", r.status, r.body)
	}
	logs := e.logs.String()
	for _, want := range []string{
		`msg="audit: cordon permission_denied" component=admin audit=true principal=prometheus action=cordon node=w1 outcome=permission_denied status=403`,
		`msg="audit: cordon permission_denied" component=admin audit=true principal=viewer action=cordon node=w1 outcome=permission_denied status=403`,
		`msg="audit: cordon ok" component=admin audit=true principal=ops action=cordon node=w1 outcome=ok status=200`,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("no audit line %q in\n%s", want, logs)
		}
	}
	// prometheus's second refusal within the minute is counted, not
	// logged: see TestRefusedWritesAggregated.
	if strings.Contains(logs, `msg="audit: uncordon permission_denied"`) {
		t.Errorf("a principal's second refusal in a minute was logged:\n%s", logs)
	}
	if strings.Contains(logs, tokOps) || strings.Contains(logs, tokMetrics) {
		t.Error("a token reached the log")
	}
}

// TestWritesNeedATokenOnAnyDefault: a coordinator's listener without
// tokens serves its reads as before but refuses every write, and a
// worker's serves none at all (its listener cordoned for anyone who could
// connect).
func TestWritesNeedATokenOnAnyDefault(t *testing.T) {
	e := startCoordinator(t, envOptions{admin: exposeAll()})
	e.put(t, workerRecord("w1", nil), time.Minute)
	if r := e.get(t, apiv1.PathNodes); r.status != http.StatusOK {
		t.Fatalf("nodes without tokens configured: %d", r.status)
	}
	for _, sfx := range []string{apiv1.SuffixCordon, apiv1.SuffixUncordon} {
		r := e.do(t, http.MethodPost, apiv1.NodeActionPath("w1", sfx), "")
		if b := r.apiError(t); r.status != http.StatusForbidden || !strings.Contains(b.Message, "needs a bearer token with scope operate, and this listener has no tokens") {
			t.Fatalf("POST %s without tokens configured: %d %+v", sfx, r.status, b)
		}
	}
	if e.cordonedInStore(t, "w1") {
		t.Fatal("a write without a token cordoned the worker")
	}
	w := startWorker(t, exposeAll(), nil)
	for _, m := range []string{http.MethodPost, http.MethodDelete} {
		if r := w.do(t, m, "/api/v1/cordon?persist=true", ""); r.status != http.StatusNotFound {
			t.Fatalf("%s /api/v1/cordon on a worker without tokens: %d %s, want 404", m, r.status, r.body)
		}
	}
	if cordoned, _ := w.worker.Cordoned(); cordoned || !w.worker.Readiness().Ready {
		t.Fatal("a write to the worker's listener cordoned it")
	}
}

// TestCrossSiteWritesRefused: a write another site's page could send (no
// X-Talon-Request header, no JSON content type, a foreign Origin or
// Sec-Fetch-Site) is refused with 403 and changes nothing, on a worker's
// listener (it cordoned: 200) and a coordinator's, valid token or not.
func TestCrossSiteWritesRefused(t *testing.T) {
	w := startWorker(t, scopedTokens(t), nil)
	c := startCoordinator(t, envOptions{admin: scopedTokens(t)})
	c.put(t, workerRecord("w1", nil), time.Minute)
	cordonPath := apiv1.NodeActionPath("w1", apiv1.SuffixCordon)
	evil := func(h http.Header) http.Header { h.Set("Origin", "http://evil.example"); return h }
	cases := []struct {
		name string
		hdr  http.Header
		msg  string
	}{
		{"foreign origin, no header", evil(http.Header{}), `Origin "http://evil.example" is not this listener`},
		{"foreign origin with the header", evil(http.Header{apiv1.HeaderRequest: {"1"}}), `Origin "http://evil.example"`},
		{"foreign origin, json", evil(http.Header{"Content-Type": {"application/json"}}), `Origin "http://evil.example"`},
		{"no origin, no header", http.Header{}, "must carry the header X-Talon-Request: 1"},
		{"form content type", http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, "must carry the header X-Talon-Request"},
		{"cross-site fetch", http.Header{"Sec-Fetch-Site": {"cross-site"}, apiv1.HeaderRequest: {"1"}}, `Sec-Fetch-Site is "cross-site"`},
		{"null origin", http.Header{"Origin": {"null"}, apiv1.HeaderRequest: {"1"}}, `Origin "null"`},
	}
	// The refusal comes first, on any path, so a page cannot probe which
	// take writes.
	for _, at := range []struct {
		e    *env
		path string
	}{{w, "/api/v1/cordon"}, {c, apiv1.PathNodes}, {c, cordonPath}, {c, "/no/such/path"}} {
		e := at.e
		for _, tt := range cases {
			for _, tok := range []string{"", tokOps} {
				for _, m := range []string{http.MethodPost, http.MethodDelete} {
					r := e.doWith(t, m, at.path, tok, tt.hdr)
					if b := r.apiError(t); r.status != http.StatusForbidden || !strings.Contains(b.Message, tt.msg) {
						t.Fatalf("%s, %s %s%s, token %v: %d %+v, want 403 with %q", tt.name, m, e.url, at.path, tok != "", r.status, b, tt.msg)
					}
				}
			}
		}
	}
	if cordoned, _ := w.worker.Cordoned(); cordoned || c.cordonedInStore(t, "w1") {
		t.Fatal("a cross-site request cordoned the worker")
	}
	// The same origin, and a JSON content type, are writes of this
	// listener's own clients.
	host := strings.TrimPrefix(c.url, "http://")
	for _, hdr := range []http.Header{{"Origin": {"http://" + host}, apiv1.HeaderRequest: {"1"}}, {"Content-Type": {"application/json"}, "Sec-Fetch-Site": {"same-origin"}}} {
		if r := c.doWith(t, http.MethodPost, cordonPath, tokOps, hdr); r.status != http.StatusOK {
			t.Fatalf("same-site cordon %v: %d %s", hdr, r.status, r.body)
		}
	}
}

// TestTokenFileReload: a token removed from admin-token-file is refused
// within 2 s, and one added is accepted, without a restart (the file was
// read once, at start).
func TestTokenFileReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	write := func(text string) {
		// Through a rename, as a Kubernetes Secret volume updates.
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write("# ops\nops:read,operate:" + tokOps + "\nviewer:read:" + tokReader + "\n")
	cfg := exposeAll()
	toks, err := config.ReadAdminTokenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg.TokenFile, cfg.FileTokens = path, toks
	e := startCoordinator(t, envOptions{admin: cfg})
	e.put(t, workerRecord("w1", nil), time.Minute)
	if r := e.do(t, http.MethodGet, apiv1.PathNodes, tokOps); r.status != http.StatusOK {
		t.Fatalf("ops before the removal: %d", r.status)
	}
	write("viewer:read:" + tokReader + "\nprometheus:metrics:" + tokMetrics + "\n")
	removed := time.Now()
	for {
		r := e.do(t, http.MethodPost, apiv1.NodeActionPath("w1", apiv1.SuffixCordon), tokOps)
		if r.status == http.StatusUnauthorized {
			break
		}
		if r.status != http.StatusOK {
			t.Fatalf("ops after the removal: %d %s", r.status, r.body)
		}
		if time.Since(removed) > 2*time.Second {
			t.Fatalf("a removed token still accepted %s after the removal", time.Since(removed))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("removed token refused %s after the file changed", time.Since(removed).Round(time.Millisecond))
	if r := e.do(t, http.MethodGet, apiv1.PathMetrics, tokMetrics); r.status != http.StatusOK {
		t.Fatalf("a token added to the file: %d", r.status)
	}
	if r := e.do(t, http.MethodGet, apiv1.PathNodes, tokReader); r.status != http.StatusOK {
		t.Fatalf("a token kept in the file: %d", r.status)
	}
	// A file that no longer loads keeps the tokens in use, with a warning.
	write("viewer:bogus:" + tokReader + "\n")
	time.Sleep(1200 * time.Millisecond)
	if r := e.do(t, http.MethodGet, apiv1.PathNodes, tokReader); r.status != http.StatusOK {
		t.Fatalf("after a bad file: %d", r.status)
	}
	if logs := e.logs.String(); !strings.Contains(logs, "admin-token-file changed but does not load; keeping the previous tokens") || strings.Contains(logs, tokReader) {
		t.Fatalf("bad file warning missing, or it shows the token:\n%s", logs)
	}
}
