package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/config"
)

// errForbidden is a 403: the credential lacks the route's scope, or the
// request looks sent by another site's page.
var errForbidden = errors.New("forbidden")

// forbiddenError is a 403 with a message for the caller.
type forbiddenError struct{ msg string }

func (e *forbiddenError) Error() string { return e.msg }
func (e *forbiddenError) Unwrap() error { return errForbidden }

func forbidden(format string, args ...any) error {
	return &forbiddenError{msg: fmt.Sprintf(format, args...)}
}

// writes reports whether method changes state (anything but GET and HEAD).
func writes(method string) bool {
	return method != http.MethodGet && method != http.MethodHead
}

// admit checks a request to rt: the caller must hold the route's read scope for a read or a method the route
// refuses (so that a caller without it learns nothing more), and the
// operate scope for a write the route serves; and the method must be one
// the route serves (405 with Allow).
func (s *Server) admit(w http.ResponseWriter, r *http.Request, rt *route) (principal, error) {
	p, presented := s.auth.check(r)
	auditOf(r.Context()).principal = p.name
	allowed := []string{http.MethodGet, http.MethodHead}
	if rt.methods != nil {
		allowed = rt.methods
	}
	need := rt.scope
	if writes(r.Method) && contains(allowed, r.Method) {
		need = config.ScopeOperate // every write changes state, whatever the route
	}
	if err := s.authorize(w, r, rt, need, p, presented); err != nil {
		return p, err
	}
	if !contains(allowed, r.Method) {
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		return p, fmt.Errorf("%w: %s; only %s are served", errMethodNotAllowed, quoteShort(r.Method), strings.Join(allowed, " and "))
	}
	return p, nil
}

// authorize checks that p holds need, the scope of rt's reads or, for a
// write it serves, config.ScopeOperate. An unauthenticated
// caller of a listener with tokens gets a 401 (errUnauthenticated, with
// the challenge set on w); anyone else without the scope gets a 403 that
// names the route and the scope.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request, rt *route, need config.AdminScope, p principal, presented bool) error {
	if rt.auth != authRequired || (p.name != "" && p.scopes.Has(need)) {
		return nil // a route that needs no scope (whoami) still needs a valid token
	}
	if p.name == "" {
		w.Header().Set("WWW-Authenticate", challenge(presented))
		return errUnauthenticated
	}
	if p.name == anonymous {
		return forbidden("%s %s needs a bearer token with scope %s, and this listener has no tokens: give a token that scope in admin-token-file (name:%s:token)", r.Method, rt.name, need, need)
	}
	return forbidden("%s %s needs scope %s; token %q has %s", r.Method, rt.name, need, p.name, p.scopes)
}

// crossSite returns a 403 when a state-changing request may have been
// sent by another site's page: it must carry the X-Talon-Request header
// or a JSON content type (neither of which a form, an image or a simple
// fetch can send without a CORS preflight this listener never grants),
// and an Origin or Sec-Fetch-Site, when present, must name this listener.
func crossSite(r *http.Request) error {
	if o := r.Header.Get("Origin"); o != "" && !sameOrigin(o, r.Host) {
		return forbidden("cross-site request refused: Origin %s is not this listener (%s)", quoteShort(o), quoteShort(r.Host))
	}
	if sfs := r.Header.Get("Sec-Fetch-Site"); sfs != "" && sfs != "same-origin" && sfs != "none" {
		return forbidden("cross-site request refused: Sec-Fetch-Site is %s", quoteShort(sfs))
	}
	if r.Header.Get(apiv1.HeaderRequest) == "" && !jsonContent(r.Header.Get("Content-Type")) {
		return forbidden("a state-changing request must carry the header %s: 1 (or Content-Type: application/json), which another site's page cannot send; talonctl sends it", apiv1.HeaderRequest)
	}
	return nil
}

// sameOrigin reports whether the Origin header names host (the request's
// Host). "null" (a sandboxed or file: page) never does.
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && strings.EqualFold(u.Host, host)
}

func jsonContent(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

// audit is the audit record of one state-changing request, filled as the
// request is served and logged once when it is answered.
type audit struct {
	principal string // "" until authentication ran
	action    string
	node      string
	attrs     []any // the action's details (persist, changed)
}

type auditKey struct{}

// withAudit gives a write to rt an audit record in its context.
func (s *Server) withAudit(r *http.Request, rt *route) (*http.Request, *audit) {
	if rt == nil || !writes(r.Method) {
		return r, nil
	}
	a := &audit{action: actionOf(rt, r.Method), node: s.nodeID()}
	if rt == routeCordon || rt == routeUncordon {
		a.node, _ = actionTarget(r.URL.Path) // the worker acted on, refusals included
	}
	return r.WithContext(context.WithValue(r.Context(), auditKey{}, a)), a
}

// auditOf returns r's audit record, or a throwaway one for a request that
// changes nothing.
func auditOf(ctx context.Context) *audit {
	if a, ok := ctx.Value(auditKey{}).(*audit); ok {
		return a
	}
	return &audit{}
}

// actionOf names what a request to rt asks for: the route's name for the
// method ("cordon", "uncordon"), else the route and method.
func actionOf(rt *route, method string) string {
	if a, ok := rt.actions[method]; ok {
		return a
	}
	return rt.name + " " + method
}

// logAudit writes the audit line of a state-changing request of a token
// holder: who (the token's name), what, on which node, and the outcome.
// At warn, so that no log level (log-level=warn, talon dev's quieted
// processes) drops it. A served write is always a line; a refused one
// (any status of 400 or more) is a line when it is the principal's first
// refusal in refusalEvery, and counted into the refusal log's summary
// otherwise: a token without the scope it uses, in a loop, cannot flood
// the log. The action and node come from the request (its method and
// path) and are logged only through loggable.
func (s *Server) logAudit(a *audit, status int, client netip.Addr) {
	outcome := codeOfStatus(status)
	action := loggable(a.action)
	args := append([]any{"audit", true, "principal", a.principal, "action", action, "node", loggable(a.node), "outcome", outcome, "status", status, "client", client}, a.attrs...)
	msg := "audit: " + action + " " + outcome
	if status < 400 {
		s.log.Warn(msg, args...)
		return
	}
	s.refusals.note(refusalKey{principal: a.principal}, slog.LevelWarn, action, status, msg, args...)
}
