// Package admin is the administration HTTP listener every Talon process
// runs (ADR 0001 sections 8 to 11): liveness, readiness, Prometheus
// metrics, the /api/v1 management API (reads, and on coordinators the operator
// actions cordon and uncordon; wire types in
// internal/apiv1) and, on coordinators, a hook for the embedded UI.
//
// Routes (GET and HEAD only, but for the operator actions, POST only; any
// other method is 405 with Allow), and the scope a token needs for each:
//
//	/healthz              both roles   group health   no token
//	/readyz               both roles   group health   no token; reasons only with scope read
//	/metrics              both roles   group metrics  metrics
//	/api/v1/status        workers      group api      read
//	/api/v1/cluster       coordinators group api      read
//	/api/v1/nodes         coordinators group api      read
//	/api/v1/nodes/{id}    coordinators group api      read
//	/api/v1/nodes/{id}/cordon    coordinators group api  operate (POST; persist=true)
//	/api/v1/nodes/{id}/uncordon  coordinators group api  operate (POST)
//	/api/v1/placement     coordinators group api      read
//	/api/v1/events        coordinators group api      read
//	/api/v1/openapi.json  both roles   group api      read
//	/api/v1/auth/whoami   both roles   group api      any valid token (no scope)
//	/api/v1/debug/pprof/{goroutine,heap}  both roles  group api  debug
//	/api/v1/debug/config  both roles   group api      debug (the effective configuration, redacted)
//	/ and below           coordinators group ui       no token; static assets only (Options.UI)
//
// Invariants:
//
//   - Exposure: each group is served only when its AdminConfig.Expose*
//     toggle is on; otherwise, and for a route of the other role, the
//     answer is 404 as for an unknown path.
//   - Authentication fails closed: when tokens are configured
//     (AdminConfig.Tokens, or a TokenFile), a "token" route answers a
//     request without a valid bearer token with 401, WWW-Authenticate and
//     a JSON error that carries no data, and one whose token lacks the
//     route's scope (config.AdminScope) with 403 permission_denied naming
//     the route and the scope. Tokens are compared in constant time
//     against every configured token. /healthz and /readyz stay open so
//     orchestrator probes work without secrets, and /readyz then gives
//     the status word only: its reasons can name store endpoints and
//     error text, so they go to callers with scope read only. The UI's
//     static assets stay open too, so that a browser can load the page
//     that asks for the token; they carry no cluster data. With no tokens
//     configured every read is open (the deployment is then expected to
//     bind a trusted interface or sit behind an authenticating proxy, ADR
//     section 11), and every write is refused: a write always needs a
//     token with scope operate. Proxy identity headers are never trusted.
//     Tokens never appear in responses, errors, logs or metrics; their
//     names do. The listener has no client certificates: tokens are its
//     only credentials.
//   - Token reload: the token file is read again when it changes (size
//     or modification time), checked at most once a second on a request,
//     as pki.Source does with TLS files: a removed token is refused within
//     a second. A file that no longer parses keeps the previous tokens,
//     with a warning. A changed file whose last line has no newline may be
//     a write in progress (its last token a prefix of the one being
//     written): it keeps the previous tokens, with one warning, until it
//     has kept its size and modification time for tokenFileSettle (2 s);
//     a file read while it changed is read again. A complete file (every
//     line ends with a newline, as a rename into place or a Kubernetes
//     Secret volume gives) is taken at once. At start the file is taken
//     as it is.
//   - Writes (any method but GET and HEAD, on any path) are refused with
//     403 when another site's page could have sent them: without the
//     X-Talon-Request header (or Content-Type: application/json), which a
//     form or a simple fetch cannot send and this listener grants no CORS
//     preflight for, or with an Origin or Sec-Fetch-Site naming another
//     site. This check comes first, before the route and the token.
//   - Audit: every write of a token holder that is served logs one line
//     at warn ("audit: <action> <outcome>") naming the principal (the
//     token's name), the action, the node and the outcome. A refused
//     write of a token holder logs that line for the principal's first
//     refusal in a minute; the rest are counted, and one line at the
//     minute's end says "N refusals from principal X in the last 1m0s"
//     with the last operation and status. Writes of no one (401, 429, 403
//     cross-site or without tokens) are refusals, logged the same way per
//     client address. The counts are kept in one bounded netlimit.Keyed
//     (maxRefusalKeys, the idlest dropped and their counts summed into a
//     line of their own), and all refusal lines share one budget (60, then
//     one a second; at most 20 summaries a minute, the rest summed), so
//     that refusals from many addresses cannot flood the log either. What
//     comes from the request (the path's node, the method) reaches a line
//     only through loggable: as it is when short and plain, else
//     %q-quoted and cut to 256 bytes with its length noted.
//   - Fail closed (ADR section 8): every /api/v1 answer of a coordinator is
//     built from a View read after the request arrived. When none can be
//     had the answer is 503 with Retry-After and a retryable not_ready
//     error; the last good view is served only with allowStale=true, and
//     then marked "stale": true with its observedAtUnixMs. /healthz stays
//     200 while the process serves; /readyz follows the role's readiness.
//   - Event watches: at most MaxWatches open, MaxWatchesPerClient per
//     client address and MaxWatchesPerPrincipal per token (from any
//     number of addresses; a listener without tokens counts none); past a
//     limit a watch is refused at once with 429 naming it. The gauge
//     talon_admin_event_watches shows how many are open.
//   - Errors: one table (errorTable) maps internal errors to HTTP status and
//     API code; a 400 names the query parameter. On endpoints that take
//     parameters, unknown and repeated single-valued ones are rejected, so a
//     mistyped filter never silently widens an answer; endpoints without
//     parameters (probes, status, openapi.json) ignore the query. Request
//     bodies are refused (413).
//   - Order and pagination: nodes are listed by (role, node ID); the
//     continue token is an opaque keyset position (the last role and node
//     ID returned), so it stays valid across snapshots: nodes added or
//     removed before it neither shift nor repeat the next page. Expired
//     records (older than the lease TTL at the snapshot's observation
//     time) are never listed, even if a store still returns them.
//   - Metrics: talon_admin_requests_total{operation,outcome} and
//     talon_admin_request_duration_seconds{operation}, with operation the
//     route name and outcome "ok" or the API error code; the open
//     connections gauge uses listener="admin".
//
// Concurrency: a Server is safe for concurrent use; Serve runs once. The
// Server holds no lock: it reads its dependencies through their own
// concurrency-safe methods. The Server is the listener (routing, exposure,
// access, audit, errors, the probes, metrics, debug and worker routes); a
// clusterAPI serves the coordinator's cluster routes (cluster, nodes,
// placement, events, cordon, jobs), with the coordinator, the totals and
// the watch slots, each of which guards its own state.
package admin

//go:generate go run ../tools/recordgen -pkg admin
