package kube

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/talonhq/talon/internal/state/kube/kuberules"
)

// Defaults for Options fields left zero.
const (
	// DefaultRequestTimeout bounds each API request (not a watch stream).
	DefaultRequestTimeout = 5 * time.Second
	// DefaultQPS and DefaultBurst replace client-go's 5 and 10. A heartbeat
	// costs one request (a PATCH) while a worker keeps reaching the same
	// coordinator and up to three (PATCH, Conflict, GET, PATCH) when it
	// moves; a coordinator serving W workers with heartbeat interval I
	// makes W/I to 2W/I requests a second, plus snapshots. The defaults let
	// one coordinator carry the ADR's reference load alone (1,000 workers
	// every 5 s: 200 to 400 requests a second) with room for bursts after
	// a failover. The client limit protects the API server from one runaway
	// process; API Priority and Fairness is the server's own protection.
	DefaultQPS   = 400
	DefaultBurst = 800
	// DefaultConflictRetries bounds how many times an update re-reads the
	// Lease and re-applies the ordering rule after losing a race.
	DefaultConflictRetries = 8
	// DefaultListPageSize is the page size of Snapshot's LIST.
	DefaultListPageSize = 500
	// DefaultMaxInflightWrites bounds the Lease writes one store has in
	// flight, and DefaultAdmissionWait how long a write waits for a slot
	// before it is refused as unavailable. Measured on a saturated
	// kube-apiserver (TestKubeHeartbeatBench: 200 closed-loop writers, two
	// coordinators, a 2-core machine at load 4): with no limit admitted
	// heartbeats had p99 about 0.7 s; 32 slots brought p99 to about 0.3 s,
	// 24 to 0.26-0.3 s, 16 to 0.17-0.21 s at 64-69% of the raw Lease update
	// rate. Past a few dozen writes in flight the API server's throughput
	// no longer grows, only its queue and so every write's latency. With
	// 16 slots and writes of 50 ms one coordinator still carries 320
	// heartbeats a second, above the ADR's reference load (1,000 workers
	// every 5 s). Refused writes cost the caller a retry after its backoff.
	DefaultMaxInflightWrites = 16
	DefaultAdmissionWait     = 50 * time.Millisecond
	// userAgent identifies Talon in API server audit logs.
	userAgent = "talon-state-kube"
)

// Options configures a Store. Exactly one source of cluster credentials is
// used: RESTConfig when set, else Kubeconfig when set, else the in-cluster
// service account (rest.InClusterConfig).
type Options struct {
	// RESTConfig is a ready client configuration (tests, embedding). The
	// store copies it and never modifies the caller's value.
	RESTConfig *rest.Config
	// Kubeconfig is the path of a kubeconfig file (--kubeconfig); its
	// current context is used.
	Kubeconfig string
	// Namespace holds the Leases (--kube-namespace). Required: a DNS-1123
	// label.
	Namespace string
	// RequestTimeout bounds each request; zero means DefaultRequestTimeout.
	RequestTimeout time.Duration
	// QPS and Burst configure the client-side rate limiter; zero means
	// DefaultQPS and DefaultBurst. A negative QPS disables the limiter
	// (benchmarks only).
	QPS   float32
	Burst int
	// ConflictRetries bounds conflict retries; zero means
	// DefaultConflictRetries.
	ConflictRetries int
	// ListPageSize is the LIST page size; zero means DefaultListPageSize.
	ListPageSize int64
	// MaxInflightWrites bounds the Lease writes (UpsertNode, RemoveNode,
	// ProposeTransition) in flight at once (--kube-max-inflight-writes);
	// zero means DefaultMaxInflightWrites, negative means no limit. Reads
	// (Snapshot, CheckReady, Watch) are not limited.
	MaxInflightWrites int
	// AdmissionWait is how long UpsertNode and RemoveNode wait for a free
	// slot before they fail with state.ErrUnavailable (--kube-admission-wait);
	// zero means DefaultAdmissionWait.
	AdmissionWait time.Duration
	// CacheSnapshots answers Snapshot from a watch-fed cache of the
	// namespace's Talon Leases after a cheap consistent read of the current
	// resourceVersion, instead of a LIST of every Lease (see the package
	// documentation, "Snapshots and the watch-fed cache"). The coordinator
	// turns it on.
	CacheSnapshots bool
	// Identity names this store's fence Lease (FenceName), which the
	// snapshot cache writes when it must prove it has caught up; the
	// coordinator passes its node ID. Empty means the host name. Stores of
	// one identity share a fence, which is safe, merely less tidy.
	Identity string
	// Registerer receives the store's metrics (write refusals, writes in
	// flight, transitions, snapshots and the cache's counters); nil
	// registers none.
	Registerer prometheus.Registerer
	// Clock returns the time used for renewTime and UpdatedAtUnixMs; nil
	// means time.Now. It decides nothing about liveness.
	Clock func() time.Time
	// Logger receives warnings (malformed Leases, failed deletions); nil
	// discards them.
	Logger *slog.Logger

	// ringSize is how many recent events the snapshot cache keeps for
	// watchers (state.FanOut); 0 means state.DefaultRingSize. Tests set
	// it small to reach the slow-watcher rule.
	ringSize int
}

// withDefaults returns o with zero fields replaced by their defaults, or an
// error naming the first invalid field.
func (o Options) withDefaults() (Options, error) {
	if err := o.validate(); err != nil {
		return o, err
	}
	o.RequestTimeout = cmp.Or(o.RequestTimeout, DefaultRequestTimeout)
	o.QPS = cmp.Or(o.QPS, DefaultQPS)
	o.Burst = cmp.Or(o.Burst, DefaultBurst)
	if o.QPS > 0 && float32(o.Burst) < o.QPS {
		return o, fmt.Errorf("kube burst %d: must be at least qps %v", o.Burst, o.QPS)
	}
	o.ConflictRetries = cmp.Or(o.ConflictRetries, DefaultConflictRetries)
	o.ListPageSize = cmp.Or(o.ListPageSize, DefaultListPageSize)
	o.MaxInflightWrites = cmp.Or(o.MaxInflightWrites, DefaultMaxInflightWrites)
	o.AdmissionWait = cmp.Or(o.AdmissionWait, DefaultAdmissionWait)
	if o.Identity == "" {
		o.Identity = defaultIdentity()
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

// validate checks the fields that have no default to fall back to: the
// namespace, and no negative or non-finite number.
func (o Options) validate() error {
	if err := validateNamespace(o.Namespace); err != nil {
		return err
	}
	switch {
	case o.RequestTimeout < 0:
		return fmt.Errorf("kube request timeout %s: must not be negative", o.RequestTimeout)
	case math.IsNaN(float64(o.QPS)) || math.IsInf(float64(o.QPS), 0):
		return fmt.Errorf("kube qps %v: must be a finite number", o.QPS)
	case o.Burst < 0:
		return fmt.Errorf("kube burst %d: must not be negative", o.Burst)
	case o.ConflictRetries < 0:
		return fmt.Errorf("kube conflict retries %d: must not be negative", o.ConflictRetries)
	case o.ListPageSize < 0:
		return fmt.Errorf("kube list page size %d: must not be negative", o.ListPageSize)
	case o.AdmissionWait < 0:
		return fmt.Errorf("kube admission wait %s: must not be negative", o.AdmissionWait)
	}
	return nil
}

// defaultIdentity is the host name (a pod's name), or "talon".
func defaultIdentity() string {
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "talon"
}

// validateNamespace checks Options.Namespace.
func validateNamespace(ns string) error {
	if ns == "" {
		return fmt.Errorf("kube namespace: must be set")
	}
	if err := kuberules.Namespace(ns); err != nil {
		return fmt.Errorf("kube namespace %q: %w", ns, err)
	}
	return nil
}

// LoadRESTConfig returns the client configuration of a kubeconfig file,
// or the in-cluster configuration (the pod's service account) when
// kubeconfig is empty.
func LoadRESTConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		c, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %q: %w", kubeconfig, err)
		}
		return c, nil
	}
	c, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("kube in-cluster config (set --kubeconfig when running outside a pod): %w", err)
	}
	return c, nil
}

// restConfig returns the client configuration the options select, copied
// and tuned: rate limits, user agent, protobuf, warnings to the logger, and
// a transport owned by this store. It never logs the configuration: a
// rest.Config holds bearer tokens and keys (its String method redacts them,
// and nothing here prints it).
func (o Options) restConfig() (*rest.Config, error) {
	var cfg *rest.Config
	if o.RESTConfig != nil {
		cfg = rest.CopyConfig(o.RESTConfig)
	} else {
		c, err := LoadRESTConfig(o.Kubeconfig)
		if err != nil {
			return nil, err
		}
		cfg = c
	}
	cfg.QPS = o.QPS
	cfg.Burst = o.Burst
	if o.QPS < 0 {
		cfg.QPS = -1 // client-go: a negative QPS means no rate limiter
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = userAgent
	}
	// Leases are built-in types: protobuf halves the bytes of every request.
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	// The per-request deadline comes from RequestTimeout on each call's
	// context. rest.Config.Timeout would also cut watch streams, so it is
	// left as the caller set it.
	cfg.WarningHandler = nil
	cfg.WarningHandlerWithContext = warningLogger{log: o.Logger}
	// A Proxy function makes client-go build a transport for this store
	// instead of sharing a cached one process-wide, so Close can close its
	// idle connections and leave no goroutines behind.
	if cfg.Proxy == nil && cfg.Transport == nil {
		cfg.Proxy = http.ProxyFromEnvironment
	}
	return cfg, nil
}

// warningLogger sends API server warnings to the store's logger.
type warningLogger struct{ log *slog.Logger }

func (w warningLogger) HandleWarningHeaderWithContext(ctx context.Context, code int, agent, text string) {
	w.log.WarnContext(ctx, "kubernetes api warning", "code", code, "agent", agent, "text", text)
}
