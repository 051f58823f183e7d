package admin

import (
	"net/http"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/config"
)

// group is an exposure toggle.
type group uint8

const (
	groupHealth group = iota + 1
	groupMetrics
	groupAPI
	groupUI
)

// authMode is a route's authentication rule when tokens are configured.
type authMode uint8

const (
	authNone     authMode = iota + 1 // open (probes)
	authOptional                     // open, with more detail for a valid token (/readyz)
	authRequired                     // 401 without a valid token
)

// route is one entry of the route table.
type route struct {
	name  string // the operation label
	group group
	auth  authMode
	// scope is what a token needs for the route's reads (authRequired);
	// every write needs config.ScopeOperate.
	scope config.AdminScope
	api   bool // JSON API: Cache-Control no-store, JSON errors
	// methods are the methods the route takes besides GET and HEAD
	// (which every other route takes alone), and actions the audit name
	// of each.
	methods []string
	actions map[string]string
	// serve serves the request; authed is whether the caller may read
	// (readyz shows its reasons to those only).
	serve func(s *Server, w http.ResponseWriter, r *http.Request, authed bool) error
}

// Routes. Node is matched by prefix; the UI takes what nothing else does.
var (
	routeHealthz   = &route{name: "healthz", group: groupHealth, auth: authNone, serve: (*Server).healthz}
	routeReadyz    = &route{name: "readyz", group: groupHealth, auth: authOptional, serve: (*Server).readyz}
	routeMetrics   = &route{name: "metrics", group: groupMetrics, auth: authRequired, scope: config.ScopeMetrics, serve: (*Server).serveMetrics}
	routeStatus    = &route{name: "status", group: groupAPI, auth: authRequired, scope: config.ScopeRead, api: true, serve: (*Server).status}
	routeCluster   = &route{name: "cluster", group: groupAPI, auth: authRequired, scope: config.ScopeRead, api: true, serve: onCluster((*clusterAPI).cluster)}
	routeNodes     = &route{name: "nodes", group: groupAPI, auth: authRequired, scope: config.ScopeRead, api: true, serve: onCluster((*clusterAPI).nodes)}
	routeNode      = &route{name: "node", group: groupAPI, auth: authRequired, scope: config.ScopeRead, api: true, serve: onCluster((*clusterAPI).node)}
	routePlacement = &route{name: "placement", group: groupAPI, auth: authRequired, scope: config.ScopeRead, api: true, serve: onCluster((*clusterAPI).placement)}
	routeOpenAPI   = &route{name: "openapi", group: groupAPI, auth: authRequired, scope: config.ScopeRead, api: true, serve: (*Server).openAPI}
	routeEvents    = &route{name: "events", group: groupAPI, auth: authRequired, scope: config.ScopeRead, api: true, serve: onCluster((*clusterAPI).events)}
	// The operator actions are the only writes of the admin listener,
	// on coordinators only (ADR 0001 section 9, amended): a mark on the
	// worker's record in the store, which the worker learns over its
	// control connection. A worker's admin listener serves no writes.
	// They take no GET (the node's cordon is in GET /api/v1/nodes/{id});
	// like every write they need a token with the operate scope, always.
	routeCordon = &route{name: "cordon", group: groupAPI, auth: authRequired, scope: config.ScopeOperate, api: true, serve: onCluster((*clusterAPI).nodeAction),
		methods: []string{http.MethodPost}, actions: map[string]string{http.MethodPost: "cordon"}}
	routeUncordon = &route{name: "uncordon", group: groupAPI, auth: authRequired, scope: config.ScopeOperate, api: true, serve: onCluster((*clusterAPI).nodeAction),
		methods: []string{http.MethodPost}, actions: map[string]string{http.MethodPost: "uncordon"}}
	// The UI's assets are static and hold no cluster data; the page asks
	// for a token when /api/v1 answers 401 (see Options.UI).
	routeUI = &route{name: "ui", group: groupUI, auth: authNone, serve: (*Server).ui}
	// routeUnmatched labels requests no route serves.
	routeUnmatched = &route{name: "unmatched", api: true}
)

// ServeHTTP makes a route an http.Handler so the router (a ServeMux) can
// hold it. The mux only finds routes; serveHTTP serves them, so this is
// never called.
func (*route) ServeHTTP(http.ResponseWriter, *http.Request) {}

// newRouter returns the route table of a coordinator's or a worker's admin
// listener as ServeMux patterns (no methods: serveHTTP checks them, to
// answer 405 with Allow). Node is matched as a subtree; /api and /api/
// are reserved (routeUnmatched) so unknown API paths never fall to the UI,
// which takes what nothing else does.
func newRouter(coordinator bool) *http.ServeMux {
	mux := http.NewServeMux()
	routes := map[string]*route{
		apiv1.PathHealthz:            routeHealthz,
		apiv1.PathReadyz:             routeReadyz,
		apiv1.PathMetrics:            routeMetrics,
		apiv1.PathOpenAPI:            routeOpenAPI,
		apiv1.PathWhoAmI:             routeWhoAmI,
		apiv1.PathDebugProfile + "/": routeDebugProfile,
		apiv1.PathDebugConfig:        routeDebugConfig,
		"/api":                       routeUnmatched,
		"/api/":                      routeUnmatched,
	}
	if coordinator {
		routes[apiv1.PathCluster] = routeCluster
		routes[apiv1.PathNodes] = routeNodes
		routes[apiv1.PathNodes+"/"] = routeNode
		routes[apiv1.PathPlacement] = routePlacement
		routes[apiv1.PathEvents] = routeEvents
		routes[apiv1.PathNodes+"/{node}"+apiv1.SuffixCordon] = routeCordon
		routes[apiv1.PathNodes+"/{node}"+apiv1.SuffixUncordon] = routeUncordon
		routes[apiv1.PathJobs] = routeJobs
		routes[apiv1.PathJobs+"/"] = routeJob
		routes["/"] = routeUI
	} else {
		routes[apiv1.PathStatus] = routeStatus
	}
	for pattern, rt := range routes {
		mux.Handle(pattern, rt)
	}
	return mux
}
