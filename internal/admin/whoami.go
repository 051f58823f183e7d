package admin

import (
	"net/http"
	"strings"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/config"
)

// routeWhoAmI needs a valid token but no scope: any principal may ask what
// it may do.
var routeWhoAmI = &route{name: "whoami", group: groupAPI, auth: authRequired, api: true, serve: (*Server).whoami}

// verb is one thing an operator asks `talonctl auth can-i` about: the
// routes it uses. Its scope is derived from them (a write needs
// config.ScopeOperate, a read the route's scope), so the answer cannot
// drift from what the routes enforce.
type verb struct {
	name   string
	routes []*route
	writes bool // its first route is used with POST
}

// verbs are the answers of GET /api/v1/auth/whoami on a coordinator, in
// that order. drain cordons, then reads the worker until it is idle.
var verbs = []verb{
	{name: apiv1.VerbRead, routes: []*route{routeCluster, routeNodes, routeNode, routePlacement, routeEvents}},
	{name: apiv1.VerbMetrics, routes: []*route{routeMetrics}},
	{name: apiv1.VerbCordon, routes: []*route{routeCordon}, writes: true},
	{name: apiv1.VerbUncordon, routes: []*route{routeUncordon}, writes: true},
	{name: apiv1.VerbDrain, routes: []*route{routeCordon, routeNode}, writes: true},
	{name: apiv1.VerbWarm, routes: []*route{routeJobs, routeJob}, writes: true},
	{name: apiv1.VerbFree, routes: []*route{routeJobs, routeJob}, writes: true},
	{name: apiv1.VerbDebug, routes: []*route{routeDebugProfile, routeDebugConfig}},
}

// workerVerbs are those of a worker's listener.
var workerVerbs = []verb{
	{name: apiv1.VerbRead, routes: []*route{routeStatus}},
	{name: apiv1.VerbMetrics, routes: []*route{routeMetrics}},
	{name: apiv1.VerbDebug, routes: []*route{routeDebugProfile, routeDebugConfig}},
}

// scope is what a token needs for every route of v.
func (v verb) scope() config.AdminScope {
	var need config.AdminScope
	for i, rt := range v.routes {
		if i == 0 && v.writes {
			need |= config.ScopeOperate
			continue
		}
		need |= rt.scope
	}
	return need
}

// whoami answers GET /api/v1/auth/whoami: who the request authenticated
// as, its scopes, and for each verb whether this listener would serve it.
// It needs a valid token but no scope (a metrics-only token may ask), and
// no snapshot: it answers while the store is down.
func (s *Server) whoami(w http.ResponseWriter, r *http.Request, _ bool) error {
	if _, err := parseQuery(r.URL.RawQuery, nil, nil); err != nil {
		return err
	}
	p, _ := s.auth.check(r)
	out := apiv1.WhoAmI{
		Principal:     p.name,
		Authenticated: s.auth.enabled(),
		Scopes:        scopeList(p.scopes),
		NodeID:        s.nodeID(),
		Role:          string(s.role()),
		Verbs:         []apiv1.VerbAccess{},
	}
	vs := workerVerbs
	if s.opts.Coordinator != nil {
		out.ClusterID = s.opts.Coordinator.ClusterID()
		vs = verbs
	}
	for _, v := range vs {
		out.Verbs = append(out.Verbs, s.access(v, p))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// access answers whether p may use v on this listener, and why not.
func (s *Server) access(v verb, p principal) apiv1.VerbAccess {
	need := v.scope()
	a := apiv1.VerbAccess{Verb: v.name, Scopes: scopeList(need), Allowed: true}
	for _, rt := range v.routes {
		if !s.exposed(rt.group) {
			a.Allowed, a.Reason = false, "route "+rt.name+" is not exposed on this listener"
			return a
		}
	}
	switch {
	case v.writes && !s.auth.enabled():
		a.Allowed, a.Reason = false, "this listener has no tokens and refuses every write"
	case !p.scopes.Has(need):
		a.Allowed, a.Reason = false, "needs scope "+need.String()+"; the principal has "+p.scopes.String()
	}
	return a
}

// scopeList spells s as a list (never null).
func scopeList(s config.AdminScope) []string {
	if s == 0 {
		return []string{}
	}
	return strings.Split(s.String(), ",")
}
