// Package ui is the management web UI that coordinators serve on their
// administration listener (ADR 0001 sections 8, 9 and 11).
//
// The UI is three static files embedded in the binary (index.html, app.js,
// app.css): no build step, no third-party code, nothing fetched from
// elsewhere, so it works offline. The page reads the same-origin /api/v1
// like any other client, with relative URLs so that it also works behind a
// reverse proxy that mounts the listener under a path. It holds no
// credentials of its own; when the API answers 401 it asks the operator for
// a bearer token and keeps it in the tab's sessionStorage only.
//
// Invariants:
//
//   - Handler serves only the embedded files and the deployment's static
//     UI options (/ui-config.json): the same bytes to every caller, no
//     cluster data, no secrets, no templating. The admin listener relies on
//     that to serve them without a token.
//   - Every file carries a strong ETag (a digest of its content) and
//     Cache-Control: no-cache, so browsers revalidate and get 304 until
//     the binary changes.
//   - The page marks data it could not refresh as STALE, with its
//     observation time and age, and never shows it as current (ADR 0001
//     section 8).
//   - The page builds the DOM from text nodes only (never innerHTML with
//     API data) and needs no inline script or style, so the listener's
//     Content-Security-Policy can forbid both.
package ui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

//go:embed static/index.html static/app.js static/app.css
var static embed.FS

// contentTypes lists the embedded files and their Content-Type.
var contentTypes = map[string]string{
	"index.html": "text/html; charset=utf-8",
	"app.js":     "text/javascript; charset=utf-8",
	"app.css":    "text/css; charset=utf-8",
}

// asset is one embedded file, ready to serve.
type asset struct {
	body  []byte
	ctype string
	etag  string
}

// handler serves the assets. It is immutable after Handler and safe for
// concurrent use.
type handler struct {
	byPath map[string]*asset
}

// Options are the deployment's settings the page reads from
// /ui-config.json: static for the process, the same for every caller,
// never cluster data or secrets (they are served without a token).
type Options struct {
	// DashboardURL is linked from the header when set (validated by the
	// configuration: an http(s) URL without credentials).
	DashboardURL string `json:"dashboardUrl"`
}

// Handler returns the UI's handler without options; see HandlerWith.
func Handler() http.Handler { return HandlerWith(Options{}) }

// HandlerWith returns the UI's handler. It serves "/" and "/index.html"
// (the page), "/app.js", "/app.css" and "/ui-config.json" (opts) to GET and
// HEAD, answers conditional requests with 304, and answers 404 for any
// other path and 405 for any other method.
func HandlerWith(opts Options) http.Handler {
	h := &handler{byPath: make(map[string]*asset, len(contentTypes)+1)}
	for name, ctype := range contentTypes {
		b, err := static.ReadFile("static/" + name)
		if err != nil {
			// The go:embed directive above lists the same names: the
			// build fails before this can.
			panic(fmt.Sprintf("ui: embedded file %s: %v", name, err))
		}
		sum := sha256.Sum256(b)
		h.byPath["/"+name] = &asset{
			body:  b,
			ctype: ctype,
			etag:  `"` + base64.RawURLEncoding.EncodeToString(sum[:18]) + `"`,
		}
	}
	h.byPath["/"] = h.byPath["/index.html"]
	cfg, err := json.Marshal(opts)
	if err != nil {
		panic(fmt.Sprintf("ui: options: %v", err)) // strings always marshal
	}
	sum := sha256.Sum256(cfg)
	h.byPath["/ui-config.json"] = &asset{body: cfg, ctype: "application/json; charset=utf-8", etag: `"` + base64.RawURLEncoding.EncodeToString(sum[:18]) + `"`}
	return h
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed: only GET and HEAD are served", http.StatusMethodNotAllowed)
		return
	}
	a, ok := h.byPath[r.URL.Path]
	if !ok {
		http.NotFound(w, r)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", a.ctype)
	hd.Set("ETag", a.etag)
	hd.Set("Cache-Control", "no-cache")
	// ServeContent answers If-None-Match against the ETag with 304, and
	// HEAD and Range requests; a zero modtime sends no Last-Modified.
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
}
