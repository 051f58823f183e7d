package admin

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/state"
)

const (
	tokenA = "tok-A-7c1f0e9d2b"
	tokenB = "tok-B-51aa03e6"
)

func withTokens(c config.AdminConfig) config.AdminConfig {
	c.Tokens = scoped(allScopes, tokenA, tokenB)
	return c
}

func TestAuthentication(t *testing.T) {
	e := startCoordinator(t, envOptions{admin: withTokens(exposeAll()), ui: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "<html>ui coord-a</html>")
	})})
	putMixedWorkers(t, e)
	protected := []string{"/metrics", apiv1.PathCluster, apiv1.PathNodes, apiv1.PathNodes + "/w1",
		apiv1.PathPlacement + "?key=k", apiv1.PathOpenAPI}
	// Data a 401 must not carry: cluster, node and metric names.
	secrets := []string{clusterID + `"`, "coord-a", "w1", "talon_", "openapi", tokenA, tokenB}

	for _, path := range protected {
		t.Run("no token "+path, func(t *testing.T) {
			r := e.get(t, path)
			check401(t, r, false, secrets)
		})
		t.Run("wrong token "+path, func(t *testing.T) {
			r := e.do(t, http.MethodGet, path, tokenA+"x")
			check401(t, r, true, secrets)
		})
		for _, tok := range []string{tokenA, tokenB} {
			t.Run("valid token "+path, func(t *testing.T) {
				if r := e.do(t, http.MethodGet, path, tok); r.status != http.StatusOK {
					t.Fatalf("status %d: %s", r.status, r.body)
				}
			})
		}
	}
	t.Run("other schemes", func(t *testing.T) {
		for _, h := range []string{"Basic " + tokenA, tokenA, "Bearer", "Bearer  ", "bearer " + tokenA[:5]} {
			req, _ := http.NewRequest(http.MethodGet, e.url+apiv1.PathCluster, nil)
			req.Header.Set("Authorization", h)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("Authorization %q: status %d", h, resp.StatusCode)
			}
		}
		// The scheme is case-insensitive (RFC 7235).
		req, _ := http.NewRequest(http.MethodGet, e.url+apiv1.PathCluster, nil)
		req.Header.Set("Authorization", "bearer "+tokenB)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("lower-case scheme: status %d", resp.StatusCode)
		}
	})
	t.Run("UI assets stay open", func(t *testing.T) {
		// A browser cannot attach a bearer token to a page load: the page
		// must load so that it can ask for the token.
		for _, p := range []string{"/", "/index.html", "/app.js", "/api-docs"} {
			r := e.get(t, p)
			if r.status != http.StatusOK || r.header.Get("Content-Security-Policy") == "" {
				t.Fatalf("%s without token: %d CSP %q %s", p, r.status, r.header.Get("Content-Security-Policy"), r.body)
			}
		}
		// Nothing under /api falls through to the open UI route.
		for _, p := range []string{"/api", "/api/", "/api/v1", "/api/v1/", "/api/v1/nodes/", "/api/v2/cluster"} {
			if r := e.get(t, p); r.status != http.StatusUnauthorized && r.status != http.StatusNotFound {
				t.Fatalf("%s without token: %d %s", p, r.status, r.body)
			}
		}
	})
	t.Run("probes stay open", func(t *testing.T) {
		for _, p := range []string{apiv1.PathHealthz, apiv1.PathReadyz} {
			if r := e.get(t, p); r.status != http.StatusOK {
				t.Fatalf("%s without token: %d %s", p, r.status, r.body)
			}
		}
	})
	t.Run("readyz reasons only with a token", func(t *testing.T) {
		e.store.SetFault(fmt.Errorf("test outage of etcd-7.internal: %w", state.ErrUnavailable))
		defer func() {
			// After the outage the coordinator answers not_ready for its
			// recovery hold; the subtests below need it ready.
			e.store.ClearFault()
			waitFor(t, "ready again", func() bool { return e.coord.Readiness().Ready })
		}()
		waitFor(t, "unready", func() bool { return !e.coord.Readiness().Ready })
		r := e.get(t, apiv1.PathReadyz)
		var h apiv1.Health
		r.decode(t, &h)
		if r.status != 503 || h.Status != apiv1.StatusNotReady || len(h.Reasons) != 0 || strings.Contains(string(r.body), "etcd-7") {
			t.Fatalf("anonymous readyz: %d %s", r.status, r.body)
		}
		r = e.do(t, http.MethodGet, apiv1.PathReadyz, tokenA+"x")
		if r.status != 503 || strings.Contains(string(r.body), "etcd-7") {
			t.Fatalf("wrong-token readyz: %d %s", r.status, r.body)
		}
		r = e.do(t, http.MethodGet, apiv1.PathReadyz, tokenA)
		h = apiv1.Health{}
		r.decode(t, &h)
		if r.status != 503 || len(h.Reasons) == 0 || !strings.Contains(strings.Join(h.Reasons, ";"), "store unreachable") {
			t.Fatalf("authenticated readyz: %d %s", r.status, r.body)
		}
	})
	t.Run("client with token", func(t *testing.T) {
		c, err := apiv1.NewClient([]string{e.url}, apiv1.ClientOptions{Token: tokenB})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Cluster(context.Background()); err != nil {
			t.Fatal(err)
		}
		c, _ = apiv1.NewClient([]string{e.url}, apiv1.ClientOptions{})
		if _, err := c.Cluster(context.Background()); !errors.Is(err, apiv1.ErrUnauthorized) {
			t.Fatalf("err = %v, want ErrUnauthorized", err)
		}
	})
	// Tokens never reach logs or metrics.
	if s := mentions([]byte(e.logs.String()), tokenA, tokenB); s != "" {
		t.Fatalf("logs contain token %q", s)
	}
	if s := mentions(e.do(t, http.MethodGet, "/metrics", tokenA).body, tokenA, tokenB); s != "" {
		t.Fatalf("metrics contain token %q", s)
	}
}

func check401(t *testing.T, r *response, presented bool, secrets []string) {
	t.Helper()
	if r.status != http.StatusUnauthorized {
		t.Fatalf("status %d, want 401: %s", r.status, r.body)
	}
	wa := r.header.Get("WWW-Authenticate")
	if !strings.HasPrefix(wa, "Bearer ") || strings.Contains(wa, "invalid_token") != presented {
		t.Fatalf("WWW-Authenticate %q (token presented: %v)", wa, presented)
	}
	er := r.apiError(t)
	if er.Code != apiv1.CodeUnauthenticated || er.Retryable {
		t.Fatalf("error %+v", er)
	}
	if s := mentions(r.body, secrets...); s != "" {
		t.Fatalf("401 body carries %q: %s", s, r.body)
	}
	if r.header.Get("Content-Security-Policy") != "" {
		t.Fatal("401 carries the UI's CSP")
	}
}

func TestExposureToggles(t *testing.T) {
	ui := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ui") })
	e := startCoordinator(t, envOptions{admin: exposeAll(), ui: ui})
	groups := map[string][]string{
		"health":  {apiv1.PathHealthz, apiv1.PathReadyz},
		"metrics": {"/metrics"},
		"api":     {apiv1.PathCluster, apiv1.PathNodes, apiv1.PathNodes + "/coord-a", apiv1.PathPlacement + "?key=k", apiv1.PathOpenAPI},
		"ui":      {"/", "/index.html", "/assets/app.js"},
	}
	for off := range groups {
		t.Run(off+" off", func(t *testing.T) {
			cfg := exposeAll()
			switch off {
			case "health":
				cfg.ExposeHealth = false
			case "metrics":
				cfg.ExposeMetrics = false
			case "api":
				cfg.ExposeAPI = false
			case "ui":
				cfg.ExposeUI = false
			}
			e.serve(t, Options{Config: cfg, Coordinator: e.coord, UI: ui})
			for g, paths := range groups {
				for _, p := range paths {
					r := e.get(t, p)
					if g == off && r.status != http.StatusNotFound {
						t.Errorf("%s with %s off: %d", p, off, r.status)
					}
					if g != off && r.status != http.StatusOK {
						t.Errorf("%s with %s off: %d %s", p, off, r.status, r.body)
					}
				}
			}
		})
	}
}

func TestMethodsHeadersAndUI(t *testing.T) {
	ui := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<html>%s</html>", r.URL.Path)
	})
	e := startCoordinator(t, envOptions{admin: exposeAll(), ui: ui})
	paths := []string{apiv1.PathHealthz, apiv1.PathReadyz, "/metrics", apiv1.PathCluster, apiv1.PathNodes, apiv1.PathOpenAPI, "/"}
	t.Run("only GET and HEAD", func(t *testing.T) {
		for _, p := range paths {
			for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodOptions} {
				r := e.do(t, m, p, "")
				if r.status != http.StatusMethodNotAllowed || r.header.Get("Allow") != "GET, HEAD" || r.apiError(t).Code != apiv1.CodeMethodNotAllowed {
					t.Fatalf("%s %s: %d Allow %q %s", m, p, r.status, r.header.Get("Allow"), r.body)
				}
			}
			r := e.do(t, http.MethodHead, p, "")
			if r.status != http.StatusOK || len(r.body) != 0 {
				t.Fatalf("HEAD %s: %d with %d body bytes", p, r.status, len(r.body))
			}
		}
	})
	t.Run("request bodies refused", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, e.url+apiv1.PathCluster, strings.NewReader(strings.Repeat("x", 100)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("GET with a body: %d", resp.StatusCode)
		}
	})
	t.Run("security headers", func(t *testing.T) {
		for _, p := range append(paths, "/api/v1/nope") {
			r := e.get(t, p)
			h := r.header
			if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("X-Frame-Options") != "DENY" || h.Get("Referrer-Policy") != "no-referrer" {
				t.Errorf("%s: headers %v", p, h)
			}
			isUI := p == "/"
			if (h.Get("Cache-Control") == "no-store") == isUI {
				t.Errorf("%s: Cache-Control %q", p, h.Get("Cache-Control"))
			}
			if (h.Get("Content-Security-Policy") != "") != isUI {
				t.Errorf("%s: CSP %q", p, h.Get("Content-Security-Policy"))
			}
		}
		csp := e.get(t, "/").header.Get("Content-Security-Policy")
		for _, d := range []string{"default-src 'self'", "frame-ancestors 'none'", "object-src 'none'", "connect-src 'self'"} {
			if !strings.Contains(csp, d) {
				t.Errorf("UI CSP %q lacks %q", csp, d)
			}
		}
	})
	t.Run("UI hook serves every non-API path", func(t *testing.T) {
		for _, p := range []string{"/", "/nodes/w1", "/assets/app.js"} {
			r := e.get(t, p)
			if r.status != 200 || string(r.body) != "<html>"+p+"</html>" {
				t.Fatalf("%s: %d %s", p, r.status, r.body)
			}
		}
		// API paths never fall through to the UI.
		if r := e.get(t, "/api/v2/cluster"); r.status != 404 || r.apiError(t).Code != apiv1.CodeNotFound {
			t.Fatalf("/api/v2: %d %s", r.status, r.body)
		}
	})
}

func TestNewRejects(t *testing.T) {
	e := startCoordinator(t, envOptions{admin: exposeAll()})
	certFile, keyFile, _ := writeCert(t, t.TempDir())
	base := func() Options {
		return Options{Coordinator: e.coord, Gatherer: e.reg, Registerer: e.reg, Process: e.proc, Logger: e.log, Clock: time.Now}
	}
	tests := []struct {
		name string
		mod  func(*Options)
		want string
	}{
		{"no role", func(o *Options) { o.Coordinator = nil }, "exactly one of Coordinator and Worker"},
		{"no gatherer", func(o *Options) { o.Gatherer = nil }, "Gatherer"},
		{"no clock", func(o *Options) { o.Clock = nil }, "Clock"},
		{"cert without key", func(o *Options) { o.Config.TLSCertFile = certFile }, "admin-tls-cert-file"},
		{"key without cert", func(o *Options) { o.Config.TLSKeyFile = keyFile }, "admin-tls-key-file"},
		{"missing files", func(o *Options) { o.Config.TLSCertFile, o.Config.TLSKeyFile = "/nonexistent/c", "/nonexistent/k" }, "/nonexistent/c"},
		{"swapped files", func(o *Options) { o.Config.TLSCertFile, o.Config.TLSKeyFile = keyFile, certFile }, "admin-tls-cert-file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := base()
			tt.mod(&o)
			if _, err := New(o); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: %v, want an error mentioning %q", err, tt.want)
			}
		})
	}
}

// TestServeTLS serves a coordinator's admin listener over TLS with tokens:
// the client verifies the certificate, plain HTTP gets nothing, and Serve
// returns after ctx ends.
func TestServeTLS(t *testing.T) {
	e := startCoordinator(t, envOptions{admin: exposeAll()})
	certFile, keyFile, pool := writeCert(t, t.TempDir())
	cfg := withTokens(exposeAll())
	cfg.TLSCertFile, cfg.TLSKeyFile = certFile, keyFile
	srv, err := New(Options{Config: cfg, Coordinator: e.coord, Gatherer: e.reg, Registerer: e.reg, Process: e.proc, Logger: e.log, Clock: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	if !srv.TLS() || !srv.AuthRequired() {
		t.Fatalf("TLS %v auth %v", srv.TLS(), srv.AuthRequired())
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	base := "https://" + ln.Addr().String()

	c, err := apiv1.NewClient([]string{base}, apiv1.ClientOptions{Token: tokenA, TLS: &tls.Config{RootCAs: pool}})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := c.Cluster(context.Background())
	if err != nil || cl.ClusterID != clusterID {
		t.Fatalf("cluster over TLS: %+v, %v", cl, err)
	}
	h, err := c.Readyz(context.Background())
	if err != nil || !h.Ready() {
		t.Fatalf("readyz over TLS: %+v, %v", h, err)
	}

	// An untrusted certificate is refused by the client.
	c2, _ := apiv1.NewClient([]string{base}, apiv1.ClientOptions{Token: tokenA, TLS: &tls.Config{}})
	if _, err := c2.Cluster(context.Background()); !errors.Is(err, apiv1.ErrUnavailable) {
		t.Fatalf("untrusted certificate: err = %v, want ErrUnavailable", err)
	}
	// Plain HTTP to the TLS port gets no data.
	resp, err := http.Get("http://" + ln.Addr().String() + apiv1.PathCluster)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("plain HTTP got 200 from the TLS listener")
		}
	}
	// TLS but no token: 401.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer hc.CloseIdleConnections()
	r := doURL(t, hc, http.MethodGet, base+apiv1.PathNodes, "")
	if r.status != http.StatusUnauthorized {
		t.Fatalf("TLS without token: %d", r.status)
	}
}
