package apiv1

import "net/url"

// SchemaVersion is the schemaVersion of every /api/v1 response. Additive
// changes keep it; it exists so a client can tell a response shape it was
// not built for.
const SchemaVersion = 1

// Paths of the administration listener.
const (
	PathHealthz   = "/healthz"
	PathReadyz    = "/readyz"
	PathMetrics   = "/metrics"
	PathStatus    = "/api/v1/status"
	PathCluster   = "/api/v1/cluster"
	PathNodes     = "/api/v1/nodes"
	PathPlacement = "/api/v1/placement"
	PathOpenAPI   = "/api/v1/openapi.json"
	// PathEvents is a coordinator's list (and watch) of what it observed.
	PathEvents = "/api/v1/events"
	// PathWhoAmI answers who a bearer token authenticates as and what it
	// may do (WhoAmI); any valid token may ask.
	PathWhoAmI = "/api/v1/auth/whoami"
	// PathDebugProfile/{profile} serves a runtime profile (ProfileGoroutine,
	// ProfileHeap) in pprof's gzipped protocol-buffer form; PathDebugConfig
	// the process's configuration, secrets redacted, as text. Both need the
	// debug scope.
	PathDebugProfile = "/api/v1/debug/pprof"
	PathDebugConfig  = "/api/v1/debug/config"
	// SuffixCordon and SuffixUncordon follow PathNodes/{nodeId}: a
	// coordinator's operator actions on a worker, POST only (NodeActionPath).
	SuffixCordon   = "/cordon"
	SuffixUncordon = "/uncordon"
)

// NodeActionPath is the path of an operator action (SuffixCordon or
// SuffixUncordon) on node nodeID at a coordinator.
func NodeActionPath(nodeID, suffix string) string {
	return PathNodes + "/" + url.PathEscape(nodeID) + suffix
}

// Pagination of GET /api/v1/nodes.
const (
	// DefaultLimit is the page size when the request gives no limit.
	DefaultLimit = 100
	// MaxLimit is the largest limit a request may give.
	MaxLimit = 1000
)

// Limits of GET /api/v1/placement. They equal the control protocol's
// PlacementLookup limits (a test in admin checks that), and live here so a
// client of the API need not link the protocol.
const (
	// MaxPlacementKeyBytes is the longest key a placement explanation takes.
	MaxPlacementKeyBytes = 1024
	// MaxPlacementReplicas is the most owners a placement explanation asks for.
	MaxPlacementReplicas = 16
	// MaxLabelSelectorBytes is the longest labelSelector a node list takes.
	MaxLabelSelectorBytes = 4096
)

// Query parameters.
const (
	ParamRole   = "role"
	ParamHealth = "health"
	ParamReady  = "ready"
	ParamLabel  = "label"
	// ParamLabelSelector takes a Kubernetes label selector
	// (k8s.io/apimachinery/pkg/labels syntax).
	ParamLabelSelector = "labelSelector"
	ParamLimit         = "limit"
	ParamContinue      = "continue"
	ParamKey           = "key"
	ParamReplicas      = "replicas"
	ParamAllowStale    = "allowStale"
	// Events.
	ParamNode    = "node"
	ParamType    = "type"
	ParamAfter   = "after"
	ParamSince   = "sinceUnixMs"
	ParamWatch   = "watch"
	ParamTimeout = "timeoutSeconds"
	// Cordon.
	ParamPersist = "persist"
)

// HeaderRequest must be sent, with any non-empty value ("1"), on every
// state-changing request (or Content-Type: application/json): another
// site's page cannot send it without a CORS preflight, which the admin
// listener never grants, so a browser cannot be made to send a write.
const HeaderRequest = "X-Talon-Request"

// Limits of GET /api/v1/events.
const (
	// DefaultEventLimit is the page size of an events request without limit.
	DefaultEventLimit = 100
	// MaxEventLimit is the largest limit an events request may give.
	MaxEventLimit = 1000
	// DefaultWatchSeconds is how long a watch waits for an event when the
	// request gives no timeoutSeconds.
	DefaultWatchSeconds = 30
	// MaxWatchSeconds is the longest a watch waits (within the admin
	// listener's write timeout).
	MaxWatchSeconds = 50
	// MaxEventTypes bounds how many type parameters a request gives.
	MaxEventTypes = 16
	// MaxEventSeq bounds the after and continue parameters: sequence
	// numbers count from 1 in a uint64, and no coordinator reaches 2^63.
	MaxEventSeq = 1<<63 - 1
)

// EventList is the body of GET /api/v1/events: the matching events kept
// after the `after` sequence number, oldest first.
type EventList struct {
	Meta
	// Coordinator is the node ID of the coordinator whose events these are.
	Coordinator string `json:"coordinator"`
	// Incarnation is its incarnation: after a restart sequence numbers
	// start again at 1.
	Incarnation string  `json:"incarnation"`
	Items       []Event `json:"items"`
	// LastSeq is the newest event kept; pass it as after to watch.
	LastSeq uint64 `json:"lastSeq"`
	// OldestSeq is the oldest event kept (older ones were dropped to bound
	// memory); 0 when none is kept.
	OldestSeq uint64 `json:"oldestSeq"`
	// Continue is the `after` value of the next page; empty when this
	// page holds every matching event kept.
	Continue string `json:"continue"`
}

// Cordon is a coordinator's answer to POST
// /api/v1/nodes/{nodeId}/cordon and /uncordon.
type Cordon struct {
	NodeID   string `json:"nodeId"`
	Cordoned bool   `json:"cordoned"`
	// Persisted is whether the worker keeps the cordon across restarts.
	Persisted bool `json:"persisted"`
	// Changed is false when the worker already was in the state asked
	// for (nothing was written).
	Changed bool `json:"changed"`
	// Cordon is who cordoned the worker and when; null after an uncordon.
	Cordon *NodeCordon `json:"cordon"`
}

// Meta is carried by every successful /api/v1 response, inlined at the top
// level of the JSON object.
type Meta struct {
	// SchemaVersion is SchemaVersion.
	SchemaVersion int `json:"schemaVersion"`
	// GeneratedAtUnixMs is when the server built the response (its clock).
	GeneratedAtUnixMs int64 `json:"generatedAtUnixMs"`
	// Revision is the store revision of the snapshot the response was
	// built from (on a worker: of its last accepted heartbeat; empty before
	// the first). Opaque: compare with ==, never parse or order.
	Revision string `json:"revision"`
	// ObservedAtUnixMs is when the data was observed, on the server's
	// clock: the completion of the snapshot read on a coordinator, the
	// generation time on a worker.
	ObservedAtUnixMs int64 `json:"observedAtUnixMs"`
	// Stale is true only for answers from a coordinator's last good
	// snapshot, served because the request said allowStale=true and no
	// current snapshot could be had. Such data is for diagnostics: it may
	// not describe the cluster as it is now.
	Stale bool `json:"stale"`
}

// Health is the body of /healthz and /readyz.
type Health struct {
	// Status is "ok" (healthz), "ready" or "not_ready" (readyz).
	Status string `json:"status"`
	// Reasons says why a process is not ready ("store unreachable: ...",
	// "warming up: ...", "draining: ..."). When the listener requires a
	// token, reasons are given only to requests that carry a valid one.
	Reasons []string `json:"reasons,omitempty"`
}

// Ready reports whether h is a ready /readyz answer.
func (h *Health) Ready() bool { return h.Status == StatusReady }

// Health status words.
const (
	StatusOK       = "ok"
	StatusReady    = "ready"
	StatusNotReady = "not_ready"
)

// Node is one process's status record as readers see it.
type Node struct {
	NodeID        string `json:"nodeId"`
	Role          string `json:"role"` // coordinator or worker
	ClusterID     string `json:"clusterId"`
	IncarnationID string `json:"incarnationId"`
	// Version is the process's build version.
	Version string `json:"version"`
	// FeatureLevel is the protocol feature level the process's build
	// speaks; 0 for builds before feature levels (and while an older
	// coordinator last wrote the record). The cluster's level is the
	// lowest among live processes (cluster.upgrade.featureLevel).
	FeatureLevel int64 `json:"featureLevel"`
	// Address is a coordinator's control address or a worker's data address.
	Address string `json:"address"`
	// AdminAddress is the advertised administration address; empty when
	// the process has none.
	AdminAddress    string `json:"adminAddress"`
	StartTimeUnixMs int64  `json:"startTimeUnixMs"`
	HeartbeatSeq    uint64 `json:"heartbeatSeq"`
	// UpdatedAtUnixMs is when the store accepted the last write of the
	// record (store clock): a heartbeat's, or a mark's (late, cordon,
	// revocation).
	UpdatedAtUnixMs int64 `json:"updatedAtUnixMs"`
	// HeartbeatAtUnixMs is when the last heartbeat of the process was
	// accepted, as far as the answering coordinator knows: the record's
	// heartbeat time, which no mark moves, or a later heartbeat that only
	// renewed the lease (the answering coordinator accepted it, or the
	// store reported the renewal). On etcd a renewal another coordinator
	// accepted is known within unhealthy-after; the time is never later
	// than the true last heartbeat, so the age never understates a
	// silence.
	HeartbeatAtUnixMs int64 `json:"heartbeatAtUnixMs"`
	// HeartbeatAgeMs is how long the process has not been heard of when
	// the snapshot was read: the observation time minus
	// HeartbeatAtUnixMs, never negative.
	HeartbeatAgeMs int64 `json:"heartbeatAgeMs"`
	// StatusAtUnixMs is when the record's status (capacity, counters,
	// readiness) was last written in full. Heartbeats that change nothing
	// placement or health depends on renew the record's lease without
	// writing it, so the status is at most the cluster's status interval
	// old (timing.statusIntervalMs) while the heartbeats go on: counters,
	// resident bytes and rates are as of this time. 0 when unknown.
	StatusAtUnixMs int64 `json:"statusAtUnixMs"`
	// PlacementVersion and EligibleWorkers are, on a coordinator, the
	// placement its record says it answers with (its last view); absent
	// on workers and on coordinators of older versions.
	PlacementVersion string `json:"placementVersion,omitempty"`
	EligibleWorkers  int64  `json:"eligibleWorkers,omitempty"`
	// Agree is, on a coordinator, whether its published placement is the
	// answering coordinator's: "yes"; "no" when they differ although both
	// have held theirs for longer than a coordinator takes to publish a
	// new one (a bug or a mixed-version cluster); "-" while one of them
	// is still changing or the coordinator publishes none.
	Agree string `json:"agree,omitempty"`
	// StatusAgeMs is the status's age when the snapshot was read (the
	// observation time minus StatusAtUnixMs, never negative); equal to
	// heartbeatAgeMs when StatusAtUnixMs is unknown.
	StatusAgeMs int64 `json:"statusAgeMs"`
	// Health is the effective health: the reported health, overridden to
	// unhealthy once no update was accepted for the unhealthy-after time.
	// One of healthy, degraded, unhealthy, unknown.
	Health string `json:"health"`
	// ReportedHealth is the health the process last reported itself.
	ReportedHealth string `json:"reportedHealth"`
	// Ready is the readiness the process last reported.
	Ready bool `json:"ready"`
	// NotReadyReason is why the process reported itself not ready
	// ("cordoned", "draining: shutting down", ...); empty when ready or
	// when the process gave no reason.
	NotReadyReason string `json:"notReadyReason"`
	// Labels are the deployment labels (never null).
	Labels   map[string]string `json:"labels"`
	Capacity Capacity          `json:"capacity"`
	Counters Counters          `json:"counters"`
	// Cordon is the operator's cordon (talonctl nodes cordon, through a
	// coordinator); null when the node is not cordoned.
	Cordon *NodeCordon `json:"cordon"`
	// Drained is whether a cordoned worker reported serving no data
	// request and loading no block (talonctl nodes drain waits for it).
	Drained bool `json:"drained"`
	// Revocation is set when a coordinator found this incarnation's
	// credential on its deny list: the worker is out of placement on
	// every coordinator. Null otherwise.
	Revocation *NodeRevocation `json:"revocation"`
}

// NodeCordon is who cordoned a node and when.
type NodeCordon struct {
	// By is the operator's principal (token name or certificate
	// identity) as the coordinator that took the request saw it.
	By string `json:"by"`
	// AtUnixMs is when the cordon was set (that coordinator's clock).
	AtUnixMs int64 `json:"atUnixMs"`
	// Persist is whether the worker keeps the cordon across restarts.
	Persist bool `json:"persist"`
}

// NodeRevocation is which coordinator revoked an incarnation, and why.
type NodeRevocation struct {
	By     string `json:"by"`
	Reason string `json:"reason"`
}

// NodeList is the body of GET /api/v1/nodes: one page of nodes ordered by
// role, then node ID.
type NodeList struct {
	Meta
	Items []Node `json:"items"`
	// Continue is the token for the next page, empty on the last one.
	Continue string `json:"continue"`
}

// NodeResponse is the body of GET /api/v1/nodes/{nodeId}.
type NodeResponse struct {
	Meta
	Node Node `json:"node"`
}

// Placement is the body of GET /api/v1/placement: the answer a
// PlacementLookup over the control protocol would give for the same
// snapshot, with the full ranking and the excluded workers.
type Placement struct {
	Meta
	Key      string `json:"key"`
	Replicas int    `json:"replicas"`
	// PlacementVersion is the version the lookup answers with, 16 hex digits.
	PlacementVersion string `json:"placementVersion"`
	// Outcome is "ok" when the lookup would return owners, or the control
	// protocol error code it would return instead ("no_workers").
	Outcome string `json:"outcome"`
	// Owners are the first min(replicas, eligible) candidates, best first:
	// exactly the lookup's owners.
	Owners []Owner `json:"owners"`
	// Candidates ranks every eligible worker for the key, best first.
	Candidates []Candidate `json:"candidates"`
	// Excluded lists the workers left out of placement, by node ID.
	Excluded []Exclusion `json:"excluded"`
}

// Placement outcomes.
const (
	OutcomeOK        = "ok"
	OutcomeNoWorkers = "no_workers"
)

// Owner is one node chosen for a key, in its JSON form (placement.Owner is
// the domain type; the admin server converts).
type Owner struct {
	NodeID string `json:"nodeId"`
	// Address is the worker's data address.
	Address string `json:"address"`
}

// Candidate is one eligible worker's standing for a key.
type Candidate struct {
	NodeID  string `json:"nodeId"`
	Address string `json:"address"`
	// Score is the HRW weight, 16 hex digits; higher ranks first, ties go
	// to the lower node ID.
	Score string `json:"score"`
	// Rank is the 1-based position: rank 1 is the first owner.
	Rank int `json:"rank"`
}

// Exclusion is a worker left out of placement.
type Exclusion struct {
	NodeID string `json:"nodeId"`
	// Reason is unhealthy (reported so, or marked late by the store) or
	// not_ready. (expired is kept in the enum for clients of older
	// coordinators; an expired record is no longer in the store at all.)
	Reason string `json:"reason"`
	// Health is the worker's effective health when the snapshot was read.
	Health string `json:"health"`
}

// Exclusion reasons.
const (
	ReasonUnhealthy = "unhealthy"
	ReasonNotReady  = "not_ready"
	// ReasonCordoned: an operator's cordon in the store (nodes cordon).
	ReasonCordoned = "cordoned"
	// ReasonRevoked: the worker's credential is on a coordinator's deny
	// list; out of placement on every coordinator.
	ReasonRevoked = "revoked"
	// ReasonExpired is no longer produced: expiry removes the record.
	ReasonExpired = "expired"
)

// Status is the body of a worker's GET /api/v1/status.
type Status struct {
	Meta
	NodeID        string `json:"nodeId"`
	Role          string `json:"role"`
	IncarnationID string `json:"incarnationId"`
	// DataAddress is the advertised data address.
	DataAddress string `json:"dataAddress"`
	// Registered is whether a coordinator has accepted a record from this
	// incarnation.
	Registered bool `json:"registered"`
	Ready      bool `json:"ready"`
	// Reasons says why the worker is not ready (never null).
	Reasons []string `json:"reasons"`
	// Cordoned is whether an operator took the worker out of service
	// (talonctl nodes cordon); it is then not ready with reason cordoned.
	Cordoned bool `json:"cordoned"`
	// InflightRequests is how many data requests the worker is serving
	// now; a drain waits for it to reach zero.
	InflightRequests int64 `json:"inflightRequests"`
	// Node is the last record a coordinator accepted, with heartbeatAgeMs
	// measured at generation time; null before the first acceptance.
	Node *Node `json:"node"`
	// Current is the capacity and counters read when the response was
	// generated; null when the process does not expose them live, in which
	// case Node carries them as of the last accepted heartbeat.
	Current *Usage `json:"current"`
}

// Usage is a live capacity and counter reading.
type Usage struct {
	Capacity Capacity `json:"capacity"`
	Counters Counters `json:"counters"`
}

// ErrorResponse is the body of every error answer.
type ErrorResponse struct {
	Error ErrorBody `json:"error"`
}

// ErrorBody describes a failed request.
type ErrorBody struct {
	// Code is one of the Code constants; a newer server may send codes
	// this client does not know, so rely on Retryable for those.
	Code    string `json:"code"`
	Message string `json:"message"`
	// Parameter names the offending query parameter of a 400.
	Parameter string `json:"parameter,omitempty"`
	// Retryable is whether the same request may succeed later unchanged.
	Retryable bool `json:"retryable"`
}

// Error codes and their HTTP statuses.
const (
	CodeInvalidArgument  = "invalid_argument"   // 400: a query parameter breaks a rule
	CodeUnauthenticated  = "unauthenticated"    // 401: missing or wrong bearer token
	CodeNotFound         = "not_found"          // 404: no such resource, node or endpoint (or not exposed)
	CodeMethodNotAllowed = "method_not_allowed" // 405: the resource does not take this method
	CodeTooLarge         = "too_large"          // 413: a request with a body (none is accepted)
	CodeNotReady         = "not_ready"          // 503, retryable: no current snapshot (fail closed)
	CodeRateLimited      = "rate_limited"       // 429, retryable: this client sent more than admin-rate-limit requests per second
	CodePermissionDenied = "permission_denied"  // 403: the token lacks the route's scope, or a cross-site write
	CodeInternal         = "internal"           // 500: a bug
	// CodeFeatureLevel is a 409, retryable once the upgrade is done: the
	// write needs a cluster feature level that a live process of an older
	// build holds back (mid-upgrade).
	CodeFeatureLevel = "feature_level"
	// CodeConflict is a 409, retryable later: the cluster cannot take the
	// request now (a job past the running jobs' bound, a cluster without
	// live workers, a job changed by many writers at once).
	CodeConflict = "conflict"
)

// Profiles of PathDebugProfile.
const (
	ProfileGoroutine = "goroutine"
	ProfileHeap      = "heap"
)

// Verbs of WhoAmI: what `talonctl auth can-i` asks about.
const (
	// VerbDebug reads the debug routes (profiles, configuration).
	VerbDebug = "debug"
	// VerbRead reads /api/v1 (cluster, nodes, placement, events; a
	// worker's status).
	VerbRead = "read"
	// VerbMetrics scrapes /metrics.
	VerbMetrics = "metrics"
	// VerbCordon, VerbUncordon and VerbDrain are the operator actions on a
	// worker (coordinators only); drain cordons, then reads the worker.
	VerbCordon   = "cordon"
	VerbUncordon = "uncordon"
	VerbDrain    = "drain"
	// VerbWarm and VerbFree start cache jobs; VerbJobs lists, reads and
	// cancels them (cancel is a write).
	VerbWarm = "warm"
	VerbFree = "free"
)

// WhoAmI is the body of GET /api/v1/auth/whoami: the principal a bearer
// token authenticated as on the answering listener, its scopes, and for
// each verb whether that listener would serve it.
type WhoAmI struct {
	// Principal is the token's name, or "(anonymous)" on a listener
	// without tokens.
	Principal string `json:"principal"`
	// Authenticated is whether the listener requires tokens; false: every
	// caller is anonymous and may read, and writes are refused.
	Authenticated bool `json:"authenticated"`
	// Scopes are the principal's scopes (read, operate, metrics, debug).
	Scopes []string `json:"scopes"`
	// NodeID, Role and ClusterID name the process that answered
	// (ClusterID on coordinators only).
	NodeID    string `json:"nodeId"`
	Role      string `json:"role"`
	ClusterID string `json:"clusterId,omitempty"`
	// Verbs say, for every verb this role serves, whether the principal
	// may use it here.
	Verbs []VerbAccess `json:"verbs"`
}

// VerbAccess is whether a principal may use a verb on one listener.
type VerbAccess struct {
	Verb string `json:"verb"`
	// Scopes are the scopes the verb needs.
	Scopes  []string `json:"scopes"`
	Allowed bool     `json:"allowed"`
	// Reason says why not (a missing scope, a route not exposed, a
	// listener without tokens); empty when allowed.
	Reason string `json:"reason,omitempty"`
}

// Access returns the answer for verb, and false when the server named no
// such verb.
func (w *WhoAmI) Access(verb string) (VerbAccess, bool) {
	for _, v := range w.Verbs {
		if v.Verb == verb {
			return v, true
		}
	}
	return VerbAccess{}, false
}
