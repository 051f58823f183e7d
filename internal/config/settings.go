package config

import (
	"os"
	"strings"
	"time"

	"github.com/talonhq/talon/internal/cluster"
)

// kind is how a setting's value is parsed.
type kind int

const (
	kindString kind = iota
	kindDuration
	kindInt
	kindBool
	kindList  // comma-separated or repeated; YAML sequence in files
	kindBytes // 4MiB, 10GB, or a plain byte count
	kindMap   // key=value pairs; YAML mapping in files
)

func (k kind) String() string {
	return [...]string{"string", "duration", "int", "bool", "strings", "bytes", "key=value"}[k]
}

// roles a setting applies to.
const (
	forCoordinator = 1 << iota
	forWorker
	forBoth = forCoordinator | forWorker
)

// setting is one row of the settings table.
type setting struct {
	name  string // flag name and file key
	kind  kind
	roles int
	usage string
	// def returns the default value in its string form for a role.
	def func(role cluster.Role) string
	// secret settings come only from the environment (env) and are never
	// accepted from a file or a flag.
	secret bool
	// alias is an older flag name still accepted, with a deprecation
	// warning (--label for --labels).
	alias string
	// helpDefault is shown in help instead of def when the default depends
	// on the machine (so generated man pages are reproducible).
	helpDefault string
	// set stores the parsed value.
	set func(c *Config, v any)
}

func constant(s string) func(cluster.Role) string { return func(cluster.Role) string { return s } }

func byRole(coordinator, worker string) func(cluster.Role) string {
	return func(r cluster.Role) string {
		if r == cluster.RoleWorker {
			return worker
		}
		return coordinator
	}
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil || cluster.ValidateID("node-id", h) != nil {
		return "talon"
	}
	return h
}

// envName is the environment variable of a setting.
func envName(name string) string {
	return "TALON_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// settings is the one table of every setting, its default and its help.
var settings = []setting{
	{name: "cluster-id", kind: kindString, roles: forBoth, def: constant("default"),
		usage: "cluster ID shared by every process of one cluster",
		set:   func(c *Config, v any) { c.ClusterID = v.(string) }},
	{name: "node-id", kind: kindString, roles: forBoth, def: func(cluster.Role) string { return hostname() }, helpDefault: "$(hostname)",
		usage: "stable node ID of this process (default: the host name)",
		set:   func(c *Config, v any) { c.NodeID = v.(string) }},
	{name: "labels", alias: "label", kind: kindMap, roles: forBoth, def: constant(""),
		usage: "deployment label key=value (repeatable; at most 16)",
		set:   func(c *Config, v any) { c.Labels = v.(map[string]string) }},
	{name: "listen", kind: kindString, roles: forBoth, def: byRole(":7400", ":7500"),
		usage: "control listener (coordinator) or data listener (worker) address",
		set:   func(c *Config, v any) { c.Listen = v.(string) }},
	{name: "advertise", kind: kindString, roles: forBoth, def: constant(""),
		usage: "address other processes use to reach --listen (default: derived from the bound address)",
		set:   func(c *Config, v any) { c.Advertise = v.(string) }},
	{name: "admin-listen", kind: kindString, roles: forBoth, def: byRole(":7401", ":7501"),
		usage: "administration listener address (health, readiness, metrics, API, UI); empty disables it",
		set:   func(c *Config, v any) { c.AdminListen = v.(string) }},
	{name: "admin-advertise", kind: kindString, roles: forBoth, def: constant(""),
		usage: "advertised administration address (default: derived from the bound address)",
		set:   func(c *Config, v any) { c.AdminAdvertise = v.(string) }},
	{name: "coordinators", kind: kindList, roles: forWorker, def: constant("127.0.0.1:7400"),
		usage: "coordinator control addresses host:port[,host:port...], tried in order with failover",
		set:   func(c *Config, v any) { c.Coordinators = v.([]string) }},
	{name: "state-backend", kind: kindString, roles: forCoordinator, def: constant(BackendMemory),
		usage: "shared cluster-state backend: memory (development, single coordinator), etcd or kubernetes",
		set:   func(c *Config, v any) { c.StateBackend = v.(string) }},
	{name: "ha", kind: kindBool, roles: forCoordinator, def: constant("false"),
		usage: "high-availability mode: several coordinators share one store (memory is refused)",
		set:   func(c *Config, v any) { c.HA = v.(bool) }},
	{name: "coordinator-replicas", kind: kindInt, roles: forCoordinator, def: constant("1"),
		usage: "number of coordinator replicas deployed (more than 1 requires etcd or kubernetes)",
		set:   func(c *Config, v any) { c.CoordinatorReplicas = v.(int) }},
	{name: "etcd-endpoints", kind: kindList, roles: forCoordinator, def: constant("127.0.0.1:2379"),
		usage: "etcd endpoints host:port or URLs, comma separated",
		set:   func(c *Config, v any) { c.Etcd.Endpoints = v.([]string) }},
	{name: "etcd-username", kind: kindString, roles: forCoordinator, def: constant(""),
		usage: "etcd user name (the password comes from TALON_ETCD_PASSWORD or --etcd-password-file)",
		set:   func(c *Config, v any) { c.Etcd.Username = v.(string) }},
	{name: "etcd-password", kind: kindString, roles: forCoordinator, def: constant(""), secret: true,
		usage: "etcd password (environment only)",
		set:   func(c *Config, v any) { c.Etcd.Password = Secret(v.(string)) }},
	{name: "etcd-password-file", kind: kindString, roles: forCoordinator, def: constant(""),
		usage: "file holding the etcd password",
		set:   func(c *Config, v any) { c.Etcd.PasswordFile = v.(string) }},
	{name: "etcd-ca-file", kind: kindString, roles: forCoordinator, def: constant(""),
		usage: "CA bundle to verify etcd's TLS certificate",
		set:   func(c *Config, v any) { c.Etcd.CAFile = v.(string) }},
	{name: "etcd-cert-file", kind: kindString, roles: forCoordinator, def: constant(""),
		usage: "client certificate for etcd TLS",
		set:   func(c *Config, v any) { c.Etcd.CertFile = v.(string) }},
	{name: "etcd-key-file", kind: kindString, roles: forCoordinator, def: constant(""),
		usage: "client key for etcd TLS",
		set:   func(c *Config, v any) { c.Etcd.KeyFile = v.(string) }},
	{name: "etcd-dial-timeout", kind: kindDuration, roles: forCoordinator, def: constant("5s"),
		usage: "etcd connection timeout",
		set:   func(c *Config, v any) { c.Etcd.DialTimeout = v.(time.Duration) }},
	{name: "etcd-prefix", kind: kindString, roles: forCoordinator, def: constant("/talon"),
		usage: "etcd key prefix",
		set:   func(c *Config, v any) { c.Etcd.Prefix = v.(string) }},
	{name: "etcd-compaction-interval", kind: kindDuration, roles: forCoordinator, def: constant("5m"),
		usage: "coordinators compact etcd's history once per interval between them, keeping at least one interval of it; 0 turns it off (etcd runs --auto-compaction-retention, or is shared with other tenants: compaction is global to its keyspace); compaction needs the etcd root role",
		set:   func(c *Config, v any) { c.Etcd.CompactionInterval = v.(time.Duration) }},
	{name: "kubeconfig", kind: kindString, roles: forCoordinator, def: constant(""),
		usage: "kubeconfig file (default: in-cluster configuration)",
		set:   func(c *Config, v any) { c.Kube.Kubeconfig = v.(string) }},
	{name: "kube-namespace", kind: kindString, roles: forCoordinator, def: constant("talon"),
		usage: "namespace of Talon's Lease objects (deploy/kubernetes/rbac.yaml uses talon)",
		set:   func(c *Config, v any) { c.Kube.Namespace = v.(string) }},
	{name: "kube-qps", kind: kindInt, roles: forCoordinator, def: constant("400"),
		usage: "Kubernetes client queries per second: one heartbeat is about one request (client-go's default of 5 is far too low)",
		set:   func(c *Config, v any) { c.Kube.QPS = v.(int) }},
	{name: "kube-burst", kind: kindInt, roles: forCoordinator, def: constant("800"),
		usage: "Kubernetes client burst",
		set:   func(c *Config, v any) { c.Kube.Burst = v.(int) }},
	{name: "kube-max-inflight-writes", kind: kindInt, roles: forCoordinator, def: constant("16"),
		usage: "Lease writes (registrations, heartbeats, removals) at the Kubernetes API server at once; more wait kube-admission-wait, then are refused with the retryable unavailable code, so the writes admitted stay fast under saturation",
		set:   func(c *Config, v any) { c.Kube.MaxInflightWrites = v.(int) }},
	{name: "kube-admission-wait", kind: kindDuration, roles: forCoordinator, def: constant("50ms"),
		usage: "how long a Lease write waits for a free kube-max-inflight-writes slot before it is refused (workers retry after a backoff)",
		set:   func(c *Config, v any) { c.Kube.AdmissionWait = v.(time.Duration) }},
	{name: "heartbeat-interval", kind: kindDuration, roles: forBoth, def: constant("5s"),
		usage: "interval between heartbeats (a worker follows the interval its coordinators send in every Ack)",
		set:   func(c *Config, v any) { c.HeartbeatInterval = v.(time.Duration) }},
	{name: "unhealthy-after", kind: kindDuration, roles: forBoth, def: constant("15s"),
		usage: "a node whose record a coordinator saw unchanged for this long is marked late (unhealthy) in the store; at least 2 x heartbeat-interval + request-timeout",
		set:   func(c *Config, v any) { c.UnhealthyAfter = v.(time.Duration) }},
	{name: "lease-ttl", kind: kindDuration, roles: forBoth, def: constant("30s"),
		usage: "a node whose record went unchanged for this long expires (etcd lease; a coordinator's delete on Kubernetes)",
		set:   func(c *Config, v any) { c.LeaseTTL = v.(time.Duration) }},
	{name: "status-interval", kind: kindDuration, roles: forCoordinator, def: constant("1m"),
		usage: "how often a heartbeat that changes nothing placement or health depends on still writes the whole record (to refresh its counters); heartbeats in between only renew its lease, which on etcd writes nothing to the store's history; 0 writes the record on every heartbeat",
		set:   func(c *Config, v any) { c.StatusInterval = v.(time.Duration) }},
	{name: "request-timeout", kind: kindDuration, roles: forBoth, def: constant("2s"),
		usage: "timeout of one state-store or coordinator request; a coordinator whose store reads have not succeeded for this long turns unready",
		set:   func(c *Config, v any) { c.RequestTimeout = v.(time.Duration) }},
	{name: "drain-delay", kind: kindDuration, roles: forBoth, def: constant("5s"),
		usage: "on shutdown, time to keep serving while unready so load balancers stop routing here; then a coordinator tells connected clients and workers to go elsewhere",
		set:   func(c *Config, v any) { c.DrainDelay = v.(time.Duration) }},
	{name: "shutdown-timeout", kind: kindDuration, roles: forBoth, def: constant("20s"),
		usage: "on shutdown, time allowed for in-flight requests to finish after the drain delay",
		set:   func(c *Config, v any) { c.ShutdownTimeout = v.(time.Duration) }},
	{name: "max-connections", kind: kindInt, roles: forBoth, def: constant("4096"),
		usage: "concurrent connections the control (coordinator) or data (worker) listener accepts; more are closed at once",
		set:   func(c *Config, v any) { c.Limits.MaxConnections = v.(int) }},
	{name: "idle-timeout", kind: kindDuration, roles: forBoth, def: constant("2m"),
		usage: "close a control or data connection that sends nothing for this long",
		set:   func(c *Config, v any) { c.Limits.IdleTimeout = v.(time.Duration) }},
	{name: "frame-timeout", kind: kindDuration, roles: forBoth, def: constant("10s"),
		usage: "time to receive a whole control frame (coordinator) or request header (worker) once it started",
		set:   func(c *Config, v any) { c.Limits.FrameTimeout = v.(time.Duration) }},
	{name: "write-timeout", kind: kindDuration, roles: forWorker, def: constant("2m"),
		usage: "time allowed to write one data response to a client",
		set:   func(c *Config, v any) { c.Limits.WriteTimeout = v.(time.Duration) }},
	{name: "store-reads-per-client", kind: kindInt, roles: forWorker, def: constant("256"),
		usage: "data requests per second, for each client, that make the worker ask its blob store (fresh=1, a version= it does not know, an object it has not looked up, a missing one), burst twice that; more are answered 429 resource_exhausted",
		set:   func(c *Config, v any) { c.Limits.StoreReadsPerClient = v.(int) }},
	{name: "max-records", kind: kindInt, roles: forCoordinator, def: constant("10000"),
		usage: "records a cluster accepts; a registration of a new node past it is refused",
		set:   func(c *Config, v any) { c.Limits.MaxRecords = v.(int) }},
	{name: "max-events", kind: kindInt, roles: forCoordinator, def: constant("1000"),
		usage: "events /api/v1/events lists and the coordinator keeps: its own and the cluster's node events from the store's shared event log (a bounded, leased ring of at most 1000)",
		set:   func(c *Config, v any) { c.Limits.MaxEvents = v.(int) }},
	{name: "max-event-age", kind: kindDuration, roles: forCoordinator, def: constant("1h"),
		usage: "how long /api/v1/events lists an event; the store's shared event log keeps node events about an hour",
		set:   func(c *Config, v any) { c.Limits.MaxEventAge = v.(time.Duration) }},
	{name: "placement-replicas", kind: kindInt, roles: forBoth, def: constant("2"),
		usage: "replica count clients read with (talon get --replicas); talon_placement_under_replicated is 1 while fewer workers are eligible; on a worker, the owners of a block it caches (set it alike on coordinators and workers)",
		set:   func(c *Config, v any) { c.PlacementReplicas = v.(int) }},
	{name: "max-inflight-writes", kind: kindInt, roles: forCoordinator, def: constant("512"),
		usage: "registrations and heartbeats at the store at once; more wait 100ms, then are refused with the retryable unavailable code (load shedding)",
		set:   func(c *Config, v any) { c.Limits.MaxInflightWrites = v.(int) }},
	{name: "max-node-writes-per-interval", kind: kindInt, roles: forCoordinator, def: constant("10"),
		usage: "registrations and heartbeats one node may make per heartbeat interval (past a burst of 6 intervals' worth); more are refused with a retryable resource_exhausted naming the wait; 0 turns the limit off (write benchmarks)",
		set:   func(c *Config, v any) { c.Limits.NodeWritesPerInterval = v.(int) }},
	{name: "tls-ca-file", kind: kindString, roles: forBoth, def: constant(""),
		usage: "CA bundle (PEM) that peers' certificates must chain to: mutual TLS on the control and data ports",
		set:   func(c *Config, v any) { c.TLS.CAFile = v.(string) }},
	{name: "tls-cert-file", kind: kindString, roles: forBoth, def: constant(""),
		usage: "this process's certificate (PEM; CN is the node ID, OU the role), served and presented when dialling; reloaded on change",
		set:   func(c *Config, v any) { c.TLS.CertFile = v.(string) }},
	{name: "tls-key-file", kind: kindString, roles: forBoth, def: constant(""),
		usage: "key of tls-cert-file (PEM); reloaded on change",
		set:   func(c *Config, v any) { c.TLS.KeyFile = v.(string) }},
	{name: "tls-deny-file", kind: kindString, roles: forBoth, def: constant(""),
		usage: "deny list of revoked credentials, one per line: serial:<hex>, node:<node-id> or <role>/<node-id>; peers on it are refused on every port, established connections at their next request; reloaded on change (within a second)",
		set:   func(c *Config, v any) { c.TLS.DenyFile = v.(string) }},
	{name: "worker-attestation", kind: kindString, roles: forCoordinator, def: constant("off"),
		usage: "platform attestation of workers: off, or kubernetes (a worker's writes are accepted only on a connection attested by a projected service account token whose pod name is the worker's node ID, verified with TokenReview; needs tokenreviews create, e.g. system:auth-delegator)",
		set:   func(c *Config, v any) { c.Attestation.Mode = v.(string) }},
	{name: "worker-attestation-service-accounts", kind: kindList, roles: forCoordinator, def: constant(""),
		usage: "service accounts (namespace/name) whose pod-bound tokens attest workers (default: <kube-namespace>/talon-worker)",
		set:   func(c *Config, v any) { c.Attestation.ServiceAccounts = v.([]string) }},
	{name: "worker-attestation-audience", kind: kindString, roles: forCoordinator, def: constant("talon"),
		usage: "audience a worker's projected service account token must be issued for",
		set:   func(c *Config, v any) { c.Attestation.Audience = v.(string) }},
	{name: "attestation-token-file", kind: kindString, roles: forWorker, def: constant(""),
		usage: "projected service account token (audience talon) that attests each connection to a coordinator; re-read for every connection, so the kubelet's rotation is picked up",
		set:   func(c *Config, v any) { c.Attestation.TokenFile = v.(string) }},
	{name: "dev-dir", kind: kindString, roles: forWorker, def: constant(""),
		usage: "join a `talon dev` cluster: issue this worker a certificate from the dev CA in this directory (development only; replaces the tls-* settings)",
		set:   func(c *Config, v any) { c.DevDir = v.(string) }},
	{name: "insecure-control-plane", kind: kindBool, roles: forBoth, def: constant("false"),
		usage: "run the control and data ports without TLS or identities: anyone who reaches them can forge records (not for production)",
		set:   func(c *Config, v any) { c.InsecureControlPlane = v.(bool) }},
	{name: "admin-tls-cert-file", kind: kindString, roles: forBoth, def: constant(""),
		usage: "TLS certificate of the administration listener",
		set:   func(c *Config, v any) { c.Admin.TLSCertFile = v.(string) }},
	{name: "admin-tls-key-file", kind: kindString, roles: forBoth, def: constant(""),
		usage: "TLS key of the administration listener",
		set:   func(c *Config, v any) { c.Admin.TLSKeyFile = v.(string) }},
	{name: "admin-token", kind: kindString, roles: forBoth, def: constant(""), secret: true,
		usage: "bearer token of the administration listener, as a line of admin-token-file (name:scopes:token, or a bare token: read and metrics) (environment only)",
		set:   func(c *Config, v any) { c.Admin.EnvToken = Secret(v.(string)) }},
	{name: "admin-token-file", kind: kindString, roles: forBoth, def: constant(""),
		usage: "file of accepted bearer tokens, one a line as name:scope[,scope]:token (scopes read, operate, metrics, debug; a bare token gets read and metrics); reloaded on change",
		set:   func(c *Config, v any) { c.Admin.TokenFile = v.(string) }},
	{name: "admin-expose-health", kind: kindBool, roles: forBoth, def: constant("true"),
		usage: "serve /healthz and /readyz on the administration listener",
		set:   func(c *Config, v any) { c.Admin.ExposeHealth = v.(bool) }},
	{name: "admin-expose-metrics", kind: kindBool, roles: forBoth, def: constant("true"),
		usage: "serve /metrics on the administration listener",
		set:   func(c *Config, v any) { c.Admin.ExposeMetrics = v.(bool) }},
	{name: "admin-expose-api", kind: kindBool, roles: forBoth, def: constant("true"),
		usage: "serve /api/v1 on the administration listener",
		set:   func(c *Config, v any) { c.Admin.ExposeAPI = v.(bool) }},
	{name: "admin-expose-ui", kind: kindBool, roles: forCoordinator, def: constant("true"),
		usage: "serve the web UI on the administration listener",
		set:   func(c *Config, v any) { c.Admin.ExposeUI = v.(bool) }},
	{name: "admin-ui-dashboard-url", kind: kindString, roles: forCoordinator, def: constant(""),
		usage: "http(s) URL of the deployment's dashboards, linked from the web UI's header; empty for no link",
		set:   func(c *Config, v any) { c.Admin.UIDashboardURL = v.(string) }},
	{name: "admin-trusted-proxies", kind: kindList, roles: forBoth, def: constant(""),
		usage: "CIDRs of reverse proxies whose X-Forwarded-For/-Proto and Forwarded headers the administration listener honours (ignored from anyone else)",
		set:   func(c *Config, v any) { c.Admin.TrustedProxies = v.([]string) }},
	{name: "admin-rate-limit", kind: kindInt, roles: forBoth, def: constant("100"),
		usage: "requests per second each client may make to the administration listener (burst twice that); 0 disables",
		set:   func(c *Config, v any) { c.Admin.RateLimit = v.(int) }},
	{name: "blob-store", kind: kindString, roles: forWorker, def: constant("file:///var/lib/talon/blobs"),
		usage: "blob store URL: file:///path, http(s)://host/prefix, s3://bucket/prefix[?region=R&endpoint=URL&use_path_style=true&profile=P&ca_file=F&request_timeout=D&max_attempts=N] (S3 credentials from the AWS environment, shared config or web identity), gs://bucket/prefix[?endpoint=URL&anonymous=true&request_timeout=D&max_attempts=N] (Application Default Credentials) or az://account/container/prefix[?endpoint=URL&anonymous=true&request_timeout=D&max_attempts=N] (AZURE_STORAGE_CONNECTION_STRING or DefaultAzureCredential)",
		set:   func(c *Config, v any) { c.BlobStore = v.(string) }},
	{name: "cache-dir", kind: kindString, roles: forWorker, def: constant("/var/cache/talon"),
		usage: "directory of the worker's block cache",
		set:   func(c *Config, v any) { c.CacheDir = v.(string) }},
	{name: "cache-capacity", kind: kindBytes, roles: forWorker, def: constant("10GiB"),
		usage: "maximum bytes of cached blocks",
		set:   func(c *Config, v any) { c.CacheCapacity = v.(int64) }},
	{name: "block-size", kind: kindBytes, roles: forWorker, def: constant("4MiB"),
		usage: "size of a cached block",
		set:   func(c *Config, v any) { c.BlockSize = v.(int64) }},
	{name: "read-ahead", kind: kindInt, roles: forWorker, def: constant("4"),
		usage: "blocks after a sequential read's last one that the worker starts loading from the blob store, of those it owns (0 turns read-ahead off)",
		set:   func(c *Config, v any) { c.ReadAhead = v.(int) }},
	{name: "read-ahead-loads", kind: kindInt, roles: forWorker, def: constant("8"),
		usage: "read-ahead loads a worker runs at once; past it, read-ahead waits for the reads themselves",
		set:   func(c *Config, v any) { c.ReadAheadLoads = v.(int) }},
	{name: "warmup-rate", kind: kindInt, roles: forWorker, def: constant("64"),
		usage: "block loads a second a worker makes from its blob store during warmup-period after it starts (0: no bound); with placement-replicas 2 or more a read past it is answered 503 warming_up and the client reads the block from its next owner, which held it before this worker joined",
		set:   func(c *Config, v any) { c.WarmupRate = v.(int) }},
	{name: "warmup-period", kind: kindDuration, roles: forWorker, def: constant("5m"),
		usage: "how long after start a worker's store loads are bounded by warmup-rate",
		set:   func(c *Config, v any) { c.WarmupPeriod = v.(time.Duration) }},
	{name: "log-level", kind: kindString, roles: forBoth, def: constant("info"),
		usage: "log level: debug, info, warn or error",
		set:   func(c *Config, v any) { c.LogLevel = v.(string) }},
	{name: "log-format", kind: kindString, roles: forBoth, def: constant("text"),
		usage: "log format: text or json",
		set:   func(c *Config, v any) { c.LogFormat = v.(string) }},
}

// lookup returns the setting called name (file key or flag name).
func lookup(name string) *setting {
	for i := range settings {
		if settings[i].name == name || settings[i].alias != "" && settings[i].alias == name {
			return &settings[i]
		}
	}
	return nil
}

func (s *setting) flagName() string { return s.name }

func (s *setting) appliesTo(r cluster.Role) bool {
	if r == cluster.RoleWorker {
		return s.roles&forWorker != 0
	}
	return s.roles&forCoordinator != 0
}
