package admin

import (
	"bytes"
	"net/http"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/config"
)

// The debug routes have their own scope (config.ScopeDebug): stacks, heap
// contents and the configuration say more than the API does.
var (
	routeDebugProfile = &route{name: "debug_profile", group: groupAPI, auth: authRequired, scope: config.ScopeDebug, api: true, serve: (*Server).debugProfile}
	routeDebugConfig  = &route{name: "debug_config", group: groupAPI, auth: authRequired, scope: config.ScopeDebug, api: true, serve: (*Server).debugConfig}
)

// debugProfiles are the runtime profiles the debug route serves: what a
// maintainer asks for first. CPU and trace profiles are left out: they
// take seconds of the process's time and a route that blocks.
var debugProfiles = []string{apiv1.ProfileGoroutine, apiv1.ProfileHeap}

// debugProfile answers GET /api/v1/debug/pprof/{profile}: the profile in
// pprof's gzipped protocol-buffer form (go tool pprof reads it).
func (s *Server) debugProfile(w http.ResponseWriter, r *http.Request, _ bool) error {
	if _, err := parseQuery(r.URL.RawQuery, nil, nil); err != nil {
		return err
	}
	name := strings.TrimPrefix(r.URL.Path, apiv1.PathDebugProfile+"/")
	prof := pprof.Lookup(name)
	if !slices.Contains(debugProfiles, name) || prof == nil {
		return notFound("no profile %s: the debug route serves %s", quoteShort(name), strings.Join(debugProfiles, " and "))
	}
	var b bytes.Buffer
	if err := prof.WriteTo(&b, 0); err != nil {
		return err
	}
	writeBody(w, "application/octet-stream", b.Bytes())
	return nil
}

// debugConfig answers GET /api/v1/debug/config: the configuration as this
// process runs with it, one setting a line with its source, secrets
// redacted (config.Loaded.Print).
func (s *Server) debugConfig(w http.ResponseWriter, r *http.Request, _ bool) error {
	if _, err := parseQuery(r.URL.RawQuery, nil, nil); err != nil {
		return err
	}
	if s.opts.EffectiveConfig == nil {
		return notFound("this %s was not started from a loaded configuration", s.role())
	}
	var b bytes.Buffer
	if err := s.opts.EffectiveConfig(&b); err != nil {
		return err
	}
	writeBody(w, "text/plain; charset=utf-8", b.Bytes())
	return nil
}

// writeBody writes a 200 answer of content type ct.
func writeBody(w http.ResponseWriter, ct string, body []byte) {
	h := w.Header()
	h.Set("Content-Type", ct)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}
