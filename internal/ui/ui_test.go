package ui

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
	"golang.org/x/net/html"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cluster"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// get sends method path to h with the given extra headers.
func get(t *testing.T, h http.Handler, method, path string, hdr map[string]string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func body(t *testing.T, r *http.Response) []byte {
	t.Helper()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func embedded(t *testing.T, name string) []byte {
	t.Helper()
	b, err := static.ReadFile("static/" + name)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) == 0 {
		t.Fatalf("embedded %s is empty", name)
	}
	return b
}

func TestHandlerServesEmbeddedFiles(t *testing.T) {
	h := Handler()
	tests := []struct {
		path, file, ctype string
	}{
		{"/", "index.html", "text/html; charset=utf-8"},
		{"/index.html", "index.html", "text/html; charset=utf-8"},
		{"/app.js", "app.js", "text/javascript; charset=utf-8"},
		{"/app.css", "app.css", "text/css; charset=utf-8"},
	}
	etags := map[string]string{}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			r := get(t, h, http.MethodGet, tc.path, nil)
			b := body(t, r)
			if r.StatusCode != http.StatusOK {
				t.Fatalf("status %d", r.StatusCode)
			}
			if got := r.Header.Get("Content-Type"); got != tc.ctype {
				t.Errorf("Content-Type %q, want %q", got, tc.ctype)
			}
			if !bytes.Equal(b, embedded(t, tc.file)) {
				t.Errorf("body is not the embedded %s", tc.file)
			}
			etag := r.Header.Get("ETag")
			if len(etag) < 10 || !strings.HasPrefix(etag, `"`) || !strings.HasSuffix(etag, `"`) || strings.HasPrefix(etag, `W/`) {
				t.Errorf("ETag %q is not a strong entity tag", etag)
			}
			if got := r.Header.Get("Cache-Control"); got != "no-cache" {
				t.Errorf("Cache-Control %q, want no-cache", got)
			}
			if r.Header.Get("Last-Modified") != "" {
				t.Errorf("Last-Modified %q: embedded files have no modification time", r.Header.Get("Last-Modified"))
			}
			if prev, ok := etags[tc.file]; ok && prev != etag {
				t.Errorf("ETag %q differs from %q for the same file", etag, prev)
			}
			etags[tc.file] = etag

			hr := get(t, h, http.MethodHead, tc.path, nil)
			if hb := body(t, hr); hr.StatusCode != http.StatusOK || len(hb) != 0 || hr.Header.Get("ETag") != etag || hr.Header.Get("Content-Type") != tc.ctype {
				t.Errorf("HEAD: %d, %d body bytes, ETag %q, Content-Type %q", hr.StatusCode, len(hb), hr.Header.Get("ETag"), hr.Header.Get("Content-Type"))
			}
		})
	}
	seen := map[string]string{}
	for file, etag := range etags {
		if other, dup := seen[etag]; dup {
			t.Errorf("%s and %s share ETag %s", file, other, etag)
		}
		seen[etag] = file
	}
}

func TestHandlerConditionalRequests(t *testing.T) {
	h := Handler()
	for _, path := range []string{"/", "/app.js", "/app.css"} {
		t.Run(path, func(t *testing.T) {
			etag := get(t, h, http.MethodGet, path, nil).Header.Get("ETag")
			tests := []struct {
				name        string
				ifNoneMatch string
				want        int
			}{
				{"same tag", etag, http.StatusNotModified},
				{"among others", `"other", ` + etag, http.StatusNotModified},
				{"weak form of the tag", "W/" + etag, http.StatusNotModified}, // If-None-Match compares weakly
				{"other tag", `"stale-build"`, http.StatusOK},
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					r := get(t, h, http.MethodGet, path, map[string]string{"If-None-Match": tc.ifNoneMatch})
					b := body(t, r)
					if r.StatusCode != tc.want {
						t.Fatalf("If-None-Match %s: status %d, want %d", tc.ifNoneMatch, r.StatusCode, tc.want)
					}
					if tc.want == http.StatusNotModified && (len(b) != 0 || r.Header.Get("ETag") != etag) {
						t.Fatalf("304 with %d body bytes and ETag %q", len(b), r.Header.Get("ETag"))
					}
				})
			}
		})
	}
}

func TestHandlerRejects(t *testing.T) {
	h := Handler()
	tests := []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, "/nope", http.StatusNotFound},
		{http.MethodGet, "/static/app.js", http.StatusNotFound},
		{http.MethodGet, "/app.js/", http.StatusNotFound},
		{http.MethodGet, "/index.htm", http.StatusNotFound},
		{http.MethodGet, "/ui.go", http.StatusNotFound},
		{http.MethodPost, "/", http.StatusMethodNotAllowed},
		{http.MethodDelete, "/app.js", http.StatusMethodNotAllowed},
	}
	for _, tc := range tests {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			r := get(t, h, tc.method, tc.path, nil)
			_ = body(t, r)
			if r.StatusCode != tc.want {
				t.Fatalf("status %d, want %d", r.StatusCode, tc.want)
			}
			if r.Header.Get("ETag") != "" {
				t.Fatalf("error answer carries ETag %q", r.Header.Get("ETag"))
			}
			if tc.want == http.StatusMethodNotAllowed && r.Header.Get("Allow") != "GET, HEAD" {
				t.Fatalf("Allow %q", r.Header.Get("Allow"))
			}
		})
	}
}

// TestIndexReferencesOnlyEmbeddedAssets checks that the page loads nothing
// from elsewhere (it must work offline and under the listener's CSP): every
// src and href is served by Handler, a fragment, or data:, and there is no
// inline script or style for the CSP to block.
func TestIndexReferencesOnlyEmbeddedAssets(t *testing.T) {
	h := Handler()
	doc, err := html.Parse(bytes.NewReader(embedded(t, "index.html")))
	if err != nil {
		t.Fatal(err)
	}
	var refs []string
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			for _, a := range n.Attr {
				switch {
				case a.Key == "src" || a.Key == "href":
					refs = append(refs, a.Val)
				case a.Key == "style" || strings.HasPrefix(a.Key, "on"):
					t.Errorf("<%s %s=%q>: inline style and handlers are blocked by the CSP", n.Data, a.Key, a.Val)
				}
			}
			if (n.Data == "script" || n.Data == "style") && n.FirstChild != nil {
				t.Errorf("inline <%s>: blocked by the CSP", n.Data)
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	if len(refs) < 2 {
		t.Fatalf("index.html references %q; want at least app.js and app.css", refs)
	}
	for _, ref := range refs {
		switch {
		case strings.HasPrefix(ref, "data:"), strings.HasPrefix(ref, "#"):
			continue
		case strings.Contains(ref, ":") || strings.HasPrefix(ref, "/"):
			// Absolute URLs would leave the origin or break under a proxy path prefix.
			t.Errorf("reference %q is not relative", ref)
			continue
		}
		if r := get(t, h, http.MethodGet, "/"+ref, nil); r.StatusCode != http.StatusOK {
			t.Errorf("reference %q: handler answers %d", ref, r.StatusCode)
		}
	}
}

// TestAssetsAvoidUnsafeSinks guards the escaping rule: API data reaches the
// DOM only as text, so the script must not use HTML-parsing sinks at all,
// nor load anything from another origin.
func TestAssetsAvoidUnsafeSinks(t *testing.T) {
	js := string(embedded(t, "app.js"))
	for _, sink := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "localStorage"} {
		if strings.Contains(js, sink) {
			t.Errorf("app.js uses %s", sink)
		}
	}
	url := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
	for _, name := range []string{"index.html", "app.js", "app.css"} {
		if m := url.Find(embedded(t, name)); m != nil {
			t.Errorf("%s refers to another origin: %s", name, m)
		}
	}
	if !strings.Contains(js, "sessionStorage") || !strings.Contains(js, `"Bearer "`) {
		t.Error("app.js does not keep the token in sessionStorage and send it as a bearer token")
	}
}

// TestHealthRankPinned: the web UI's copy of the health order is
// apiv1.HealthRank's (issue 39: top ranked unknown before unhealthy,
// unlike talonctl and the UI).
func TestHealthRankPinned(t *testing.T) {
	js, err := static.ReadFile("static/app.js")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`const HEALTH_RANK = \{([^}]*)\}`).FindSubmatch(js)
	if m == nil {
		t.Fatal("app.js has no HEALTH_RANK")
	}
	got := map[string]int{}
	for _, kv := range regexp.MustCompile(`(\w+): (\d+)`).FindAllSubmatch(m[1], -1) {
		got[string(kv[1])], _ = strconv.Atoi(string(kv[2]))
	}
	states := cluster.HealthStates()
	if len(got) != len(states) {
		t.Fatalf("HEALTH_RANK has %d states %v, cluster.HealthStates %d", len(got), got, len(states))
	}
	for _, h := range states {
		if r, ok := got[string(h)]; !ok || r != apiv1.HealthRank(string(h)) {
			t.Errorf("HEALTH_RANK.%s = %d (present %t), apiv1.HealthRank = %d", h, r, ok, apiv1.HealthRank(string(h)))
		}
	}
}
