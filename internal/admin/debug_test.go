package admin

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/metrics"
)

const tokDebug = "tok-dbg-5e02a9c4"

// TestDebugRoutes: the profiles and the configuration are served to the
// debug scope only, profiles in pprof's gzipped form, and whoami says so.
func TestDebugRoutes(t *testing.T) {
	cfg := scopedTokens(t)
	cfg.Tokens = append(cfg.Tokens, config.AdminToken{Name: "maintainer", Scopes: config.ScopeDebug, Token: tokDebug})
	e := startCoordinator(t, envOptions{admin: cfg})
	for _, name := range []string{apiv1.ProfileGoroutine, apiv1.ProfileHeap} {
		r := e.do(t, http.MethodGet, apiv1.PathDebugProfile+"/"+name, tokDebug)
		if r.status != http.StatusOK || !bytes.HasPrefix(r.body, []byte{0x1f, 0x8b}) {
			t.Errorf("%s: %d, %d bytes, want a gzipped profile", name, r.status, len(r.body))
		}
		if r := e.do(t, http.MethodGet, apiv1.PathDebugProfile+"/"+name, tokOps); r.status != http.StatusForbidden || !strings.Contains(r.apiError(t).Message, "needs scope debug") {
			t.Errorf("%s with the ops token: %d %s", name, r.status, r.body)
		}
	}
	for _, name := range []string{"profile", "threadcreate", "../metrics"} {
		if r := e.do(t, http.MethodGet, apiv1.PathDebugProfile+"/"+name, tokDebug); r.status != http.StatusNotFound {
			t.Errorf("profile %s: %d %s, want 404", name, r.status, r.body)
		}
	}
	// This environment's server was built without a loaded configuration.
	if r := e.do(t, http.MethodGet, apiv1.PathDebugConfig, tokDebug); r.status != http.StatusNotFound {
		t.Errorf("config without one: %d %s", r.status, r.body)
	}
	r := e.do(t, http.MethodGet, apiv1.PathWhoAmI, tokDebug)
	var w apiv1.WhoAmI
	r.decode(t, &w)
	if allowedVerbs(w) != "debug" {
		t.Errorf("the debug token may %q", allowedVerbs(w))
	}
}

// TestDebugConfig serves the configuration the process was started with.
func TestDebugConfig(t *testing.T) {
	cfg := exposeAll()
	cfg.Tokens = []config.AdminToken{{Name: "maintainer", Scopes: config.ScopeDebug, Token: tokDebug}}
	e := startCoordinator(t, envOptions{admin: exposeAll()})
	// A second server over the same coordinator, on registries of its own.
	e.reg = prometheus.NewRegistry()
	var err error
	if e.proc, err = metrics.NewProcess(e.reg, "coordinator"); err != nil {
		t.Fatal(err)
	}
	e.serve(t, Options{Config: cfg, Coordinator: e.coord, EffectiveConfig: func(w io.Writer) error {
		_, err := io.WriteString(w, "admin-token: \"(redacted)\"  # env\n")
		return err
	}})
	r := e.do(t, http.MethodGet, apiv1.PathDebugConfig, tokDebug)
	if r.status != http.StatusOK || string(r.body) != "admin-token: \"(redacted)\"  # env\n" || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") {
		t.Fatalf("%d %q %s", r.status, r.body, r.header.Get("Content-Type"))
	}
	if r := e.do(t, http.MethodGet, apiv1.PathDebugConfig, ""); r.status != http.StatusUnauthorized {
		t.Errorf("without a token: %d", r.status)
	}
}
