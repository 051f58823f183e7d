package config

import (
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/talonhq/talon/internal/cluster"
)

// State backends.
const (
	BackendMemory     = "memory"
	BackendEtcd       = "etcd"
	BackendKubernetes = "kubernetes"
)

// Config is the effective configuration of one talon process.
type Config struct {
	Role cluster.Role

	// Effective writes the configuration as Load built it, one setting a
	// line with its source, secrets redacted (Loaded.Print): what the
	// admin listener's debug route serves. Set by Load; nil in a Config
	// built otherwise.
	Effective func(io.Writer) error

	ClusterID string
	NodeID    string
	Labels    map[string]string

	// Listen is the control listener (coordinator) or data listener (worker).
	Listen string
	// Advertise is the address other processes use to reach Listen; empty
	// means "derive from the bound address".
	Advertise      string
	AdminListen    string
	AdminAdvertise string
	// Coordinators is the list of coordinator control addresses a worker
	// registers with, in failover order.
	Coordinators []string

	StateBackend        string
	HA                  bool
	CoordinatorReplicas int
	// PlacementReplicas is the replica count clients read with (the
	// under-replication gauge).
	PlacementReplicas int

	Etcd EtcdConfig
	Kube KubeConfig

	HeartbeatInterval time.Duration
	UnhealthyAfter    time.Duration
	LeaseTTL          time.Duration
	StatusInterval    time.Duration
	RequestTimeout    time.Duration
	DrainDelay        time.Duration
	ShutdownTimeout   time.Duration

	Admin AdminConfig

	// TLS is the mutual TLS of the control and data ports.
	TLS TLSConfig
	// InsecureControlPlane runs the control and data ports without TLS;
	// it must be chosen explicitly when TLS is not configured.
	InsecureControlPlane bool
	// DevDir is a `talon dev` directory whose CA issues this worker's
	// certificate at start (development only).
	DevDir string

	// Limits bound the control listener (coordinator) or the data
	// listener (worker).
	Limits LimitsConfig

	// Attestation is platform attestation of workers' identities
	// (package attest).
	Attestation AttestationConfig

	BlobStore     string
	CacheDir      string
	CacheCapacity int64
	BlockSize     int64
	// ReadAhead is how many blocks after a sequential read's last one a
	// worker starts loading, of those it owns (0: none); ReadAheadLoads
	// bounds such loads in flight at once.
	ReadAhead      int
	ReadAheadLoads int
	// WarmupRate bounds a worker's block loads from the store a second
	// for WarmupPeriod after it starts (0: no bound).
	WarmupRate   int
	WarmupPeriod time.Duration

	LogLevel  string
	LogFormat string
}

// LimitsConfig bounds what one peer or a flood of them can hold on a
// listener, and how many records a cluster accepts.
type LimitsConfig struct {
	// MaxConnections caps concurrent connections on the listener; more
	// are closed at accept.
	MaxConnections int
	// IdleTimeout closes a connection that sends nothing for this long.
	IdleTimeout time.Duration
	// FrameTimeout bounds receiving one frame (control) or one request's
	// headers (data) once its first byte arrived.
	FrameTimeout time.Duration
	// WriteTimeout bounds writing one data response (worker).
	WriteTimeout time.Duration
	// StoreReadsPerClient bounds, per second for each client, the data
	// requests that make a worker ask its blob store (fresh=1, an unknown
	// version=, an object it has not looked up) (worker).
	StoreReadsPerClient int
	// MaxRecords caps the records of a cluster; a registration past it is
	// refused (coordinator).
	MaxRecords int
	// MaxInflightWrites bounds concurrent store writes (coordinator).
	MaxInflightWrites int
	// MaxEvents and MaxEventAge bound the events a coordinator keeps and
	// lists (coordinator).
	MaxEvents   int
	MaxEventAge time.Duration
	// NodeWritesPerInterval bounds one node's writes per heartbeat
	// interval (coordinator); 0 turns the limit off.
	NodeWritesPerInterval int
}

// Worker attestation modes.
const (
	AttestationOff        = "off"
	AttestationKubernetes = "kubernetes"
)

// AttestationConfig configures platform attestation: a coordinator with
// Mode kubernetes accepts a worker's writes only on a connection attested
// by a projected service account token of that worker's pod; a worker with
// TokenFile attests each connection with the token in it.
type AttestationConfig struct {
	Mode            string   // coordinator: off or kubernetes
	ServiceAccounts []string // coordinator: accepted worker service accounts, namespace/name
	Audience        string   // coordinator: the token audience required
	TokenFile       string   // worker: the projected token, re-read for every connection
}

// WorkerServiceAccounts returns the accepted worker service accounts: the
// setting, or kube-namespace/talon-worker when it is empty.
func (c *Config) WorkerServiceAccounts() []string {
	if len(c.Attestation.ServiceAccounts) > 0 {
		return c.Attestation.ServiceAccounts
	}
	return []string{c.Kube.Namespace + "/talon-worker"}
}

// TLSConfig names the PEM files of the control and data planes' mutual
// TLS (see package pki).
type TLSConfig struct {
	CAFile   string
	CertFile string
	KeyFile  string
	// DenyFile is the deny list of revoked credentials (optional).
	DenyFile string
}

// Enabled reports whether any TLS file is set.
func (t TLSConfig) Enabled() bool { return t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" }

// EtcdConfig configures the etcd state backend.
type EtcdConfig struct {
	Endpoints    []string
	Username     string
	Password     Secret // from TALON_ETCD_PASSWORD or PasswordFile
	PasswordFile string
	CAFile       string
	CertFile     string
	KeyFile      string
	DialTimeout  time.Duration
	Prefix       string
	// CompactionInterval is how often the coordinators compact etcd's
	// history between them; 0: never (the operator's etcd does).
	CompactionInterval time.Duration
}

// KubeConfig configures the Kubernetes Lease state backend.
type KubeConfig struct {
	Kubeconfig string // empty: in-cluster configuration
	Namespace  string
	QPS        int
	Burst      int
	// MaxInflightWrites bounds the Lease writes in flight; AdmissionWait
	// is how long a write waits for a slot before it is refused with the
	// retryable unavailable code.
	MaxInflightWrites int
	AdmissionWait     time.Duration
}

// AdminConfig configures the administration listener.
type AdminConfig struct {
	TLSCertFile string
	TLSKeyFile  string
	// Tokens are the accepted bearer tokens and their scopes that do not
	// come from TokenFile (TALON_ADMIN_TOKEN; see ParseAdminToken). With
	// no token here nor in the file, no token is asked for reads, and
	// every state-changing route is refused: no credential holds
	// ScopeOperate.
	Tokens []AdminToken
	// EnvToken is TALON_ADMIN_TOKEN as given; Load parses it into Tokens.
	EnvToken Secret
	// TokenFile names the token file (see ParseAdminTokens); FileTokens
	// is what Load read from it. The admin listener reads it again
	// whenever it changes, as it does its TLS files.
	TokenFile     string
	FileTokens    []AdminToken
	ExposeHealth  bool
	ExposeMetrics bool
	ExposeAPI     bool
	ExposeUI      bool
	// TrustedProxies are the peers (CIDRs) whose X-Forwarded-For,
	// X-Forwarded-Proto and Forwarded headers are honoured; from anyone
	// else they are ignored.
	TrustedProxies []string
	// RateLimit is the requests per second each client may make (burst
	// twice that); 0 turns the limit off.
	RateLimit int
	// UIDashboardURL, when set, is linked from the web UI's header (the
	// deployment's Grafana, say); an http(s) URL without credentials.
	UIDashboardURL string
}

// Timing returns the heartbeat timing settings.
func (c *Config) Timing() cluster.Timing {
	return cluster.Timing{HeartbeatInterval: c.HeartbeatInterval, UnhealthyAfter: c.UnhealthyAfter, LeaseTTL: c.LeaseTTL, StatusInterval: c.StatusInterval}
}

// ParsePrefixes parses CIDRs; a bare IP address is a one-address prefix.
// The error names the first entry that is neither.
func ParsePrefixes(setting string, items []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(items))
	for _, it := range items {
		p, err := netip.ParsePrefix(it)
		if err != nil {
			a, aerr := netip.ParseAddr(it)
			if aerr != nil {
				return nil, fmt.Errorf("%s %q: not a CIDR or IP address (want e.g. 10.0.0.0/8 or 192.0.2.7)", setting, it)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}
