package config

import (
	"cmp"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/redact"
	"github.com/talonhq/talon/internal/state/etcd/etcdrules"
	"github.com/talonhq/talon/internal/state/kube/kuberules"
)

// Limits on settings that have no natural bound elsewhere.
const (
	MinBlockSize           = 64 << 10
	MaxBlockSize           = 64 << 20
	MaxCoordinatorReplicas = 64
	// MaxKubeInflightWrites caps kube-max-inflight-writes: far past what
	// one API server serves at once, it only catches typos.
	MaxKubeInflightWrites = 100_000
)

// Validate checks every setting of c and returns the first error, naming
// the setting, its value and the rule.
func (c *Config) Validate() error {
	for _, check := range []func() error{c.validateIdentity, c.validateAddresses, c.validateTimeouts, c.validateLogAndTLS, c.validateReadAhead} {
		if err := check(); err != nil {
			return err
		}
	}
	var err error
	switch c.Role {
	case cluster.RoleCoordinator:
		err = c.validateCoordinator()
	case cluster.RoleWorker:
		err = c.validateWorker()
	default:
		err = fmt.Errorf("role %q: must be coordinator or worker", c.Role)
	}
	if err != nil {
		return err
	}
	// Last, so that a configuration's other mistakes are named first.
	return c.validatePlaneTLS()
}

// problems is Validate that goes on past the first error: the first error
// of each group of checks.
func (c *Config) problems() []error {
	var out []error
	for _, check := range []func() error{c.validateIdentity, c.validateAddresses, c.validateTimeouts, c.validateLogAndTLS} {
		if err := check(); err != nil {
			out = append(out, err)
		}
	}
	switch c.Role {
	case cluster.RoleCoordinator:
		if err := c.validateCoordinator(); err != nil {
			out = append(out, err)
		}
	case cluster.RoleWorker:
		if err := c.validateWorker(); err != nil {
			out = append(out, err)
		}
	default:
		out = append(out, fmt.Errorf("role %q: must be coordinator or worker", c.Role))
	}
	if err := c.validatePlaneTLS(); err != nil {
		out = append(out, err)
	}
	return out
}

// validateDashboardURL checks admin-ui-dashboard-url: empty, or an
// absolute http(s) URL without credentials (the page links it; a
// password in it would be shown to every visitor).
func validateDashboardURL(s string) error {
	if s == "" {
		return nil
	}
	const name = "admin-ui-dashboard-url"
	u, err := url.Parse(s)
	switch {
	case len(s) > 2048:
		return fmt.Errorf("%s of %d bytes: must be at most 2048 bytes", name, len(s))
	case err != nil:
		return fmt.Errorf("%s %q: must be a URL", name, RedactURL(s))
	case u.User != nil:
		return fmt.Errorf("%s %q: must not carry credentials (every visitor of the UI would see them)", name, u.Redacted())
	case u.Scheme != "http" && u.Scheme != "https", u.Host == "":
		return fmt.Errorf("%s %q: must be an absolute http:// or https:// URL", name, s)
	}
	return nil
}

func (c *Config) validateIdentity() error {
	if err := cluster.ValidateID("cluster-id", c.ClusterID); err != nil {
		return err
	}
	if err := cluster.ValidateID("node-id", c.NodeID); err != nil {
		return err
	}
	if err := cluster.ValidateLabels(c.Labels); err != nil {
		return fmt.Errorf("label: %w", err)
	}
	return nil
}

func (c *Config) validateAddresses() error {
	if err := validateListen("listen", c.Listen, true); err != nil {
		return err
	}
	if err := validateListen("admin-listen", c.AdminListen, false); err != nil {
		return err
	}
	if c.Advertise != "" {
		if err := cluster.ValidateAddress("advertise", c.Advertise, true); err != nil {
			return err
		}
	}
	if c.AdminAdvertise != "" {
		if err := cluster.ValidateAddress("admin-advertise", c.AdminAdvertise, true); err != nil {
			return err
		}
	}
	return nil
}

// durationRanges bound every duration setting: beyond them a value is a
// typo (9999999h) or a load no store should take (a 1 ns heartbeat
// interval wrote 17,000 records a second), and the message says so rather
// than a rule between two settings.
var durationRanges = []struct {
	name     string
	min, max time.Duration
	get      func(*Config) time.Duration
}{
	{"heartbeat-interval", 100 * time.Millisecond, 10 * time.Minute, func(c *Config) time.Duration { return c.HeartbeatInterval }},
	{"unhealthy-after", 100 * time.Millisecond, time.Hour, func(c *Config) time.Duration { return c.UnhealthyAfter }},
	{"lease-ttl", time.Second, 24 * time.Hour, func(c *Config) time.Duration { return c.LeaseTTL }},
	{"status-interval", 0, time.Hour, func(c *Config) time.Duration { return c.StatusInterval }},
	{"request-timeout", time.Millisecond, 5 * time.Minute, func(c *Config) time.Duration { return c.RequestTimeout }},
	{"shutdown-timeout", time.Millisecond, time.Hour, func(c *Config) time.Duration { return c.ShutdownTimeout }},
	{"drain-delay", 0, 10 * time.Minute, func(c *Config) time.Duration { return c.DrainDelay }},
}

func (c *Config) validateTimeouts() error {
	for _, r := range durationRanges {
		if v := r.get(c); v < r.min || v > r.max {
			return fmt.Errorf("%s %s: must be from %s to %s", r.name, v, r.min, r.max)
		}
	}
	if err := c.Timing().Validate(); err != nil {
		return err
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"request-timeout", c.RequestTimeout}, {"shutdown-timeout", c.ShutdownTimeout}} {
		if d.v <= 0 {
			return fmt.Errorf("%s %s: must be positive", d.name, d.v)
		}
	}
	if c.RequestTimeout >= c.LeaseTTL {
		return fmt.Errorf("request-timeout %s must be less than lease-ttl %s", c.RequestTimeout, c.LeaseTTL)
	}
	if err := c.Timing().ValidateTolerance(c.RequestTimeout); err != nil {
		return err
	}
	return c.validateLimits()
}

// validateLimits checks the listener limits. The settings that do not
// apply to the role are zero and skipped.
func (c *Config) validateLimits() error {
	l := c.Limits
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"idle-timeout", l.IdleTimeout}, {"frame-timeout", l.FrameTimeout}} {
		if d.v <= 0 || d.v > 24*time.Hour {
			return fmt.Errorf("%s %s: must be from 1ns to 24h0m0s", d.name, d.v)
		}
	}
	if l.MaxConnections < 1 || l.MaxConnections > 1<<20 {
		return fmt.Errorf("max-connections %d: must be from 1 to %d", l.MaxConnections, 1<<20)
	}
	if l.FrameTimeout > l.IdleTimeout {
		return fmt.Errorf("frame-timeout %s must not exceed idle-timeout %s", l.FrameTimeout, l.IdleTimeout)
	}
	if c.Role == cluster.RoleWorker && (l.WriteTimeout <= 0 || l.WriteTimeout > 24*time.Hour) {
		return fmt.Errorf("write-timeout %s: must be from 1ns to 24h0m0s", l.WriteTimeout)
	}
	if c.Role == cluster.RoleWorker && (l.StoreReadsPerClient < 1 || l.StoreReadsPerClient > 1_000_000) {
		return fmt.Errorf("store-reads-per-client %d: must be from 1 to 1000000 a second", l.StoreReadsPerClient)
	}
	if c.Role == cluster.RoleCoordinator && (l.MaxRecords < 1 || l.MaxRecords > 1_000_000) {
		return fmt.Errorf("max-records %d: must be from 1 to 1000000", l.MaxRecords)
	}
	return nil
}

func (c *Config) validateLogAndTLS() error {
	if !oneOf(c.LogLevel, "debug", "info", "warn", "error") {
		return fmt.Errorf("log-level %q: must be debug, info, warn or error", c.LogLevel)
	}
	if !oneOf(c.LogFormat, "text", "json") {
		return fmt.Errorf("log-format %q: must be text or json", c.LogFormat)
	}
	if _, err := ParsePrefixes("admin-trusted-proxies", c.Admin.TrustedProxies); err != nil {
		return err
	}
	if c.Admin.RateLimit < 0 || c.Admin.RateLimit > 1_000_000 {
		return fmt.Errorf("admin-rate-limit %d: must be from 0 (off) to 1000000 requests per second", c.Admin.RateLimit)
	}
	if (c.Admin.TLSCertFile == "") != (c.Admin.TLSKeyFile == "") {
		return fmt.Errorf("admin-tls-cert-file %q and admin-tls-key-file %q: set both or neither", c.Admin.TLSCertFile, c.Admin.TLSKeyFile)
	}
	return nil
}

// validatePlaneTLS requires the control and data planes' TLS files, all
// three, unless insecure-control-plane was chosen.
func (c *Config) validatePlaneTLS() error {
	t := c.TLS
	switch {
	case c.DevDir != "" && (t.Enabled() || c.InsecureControlPlane):
		return fmt.Errorf("dev-dir %q: give it alone, without tls-* files or insecure-control-plane", c.DevDir)
	case c.DevDir != "":
		return nil
	case t.Enabled() && c.InsecureControlPlane:
		return fmt.Errorf("insecure-control-plane is true but tls-ca-file %q, tls-cert-file %q, tls-key-file %q are set: choose one", t.CAFile, t.CertFile, t.KeyFile)
	case t.Enabled() && (t.CAFile == "" || t.CertFile == "" || t.KeyFile == ""):
		return fmt.Errorf("tls-ca-file %q, tls-cert-file %q, tls-key-file %q: set all three (mutual TLS) or none", t.CAFile, t.CertFile, t.KeyFile)
	case !t.Enabled() && !c.InsecureControlPlane:
		return fmt.Errorf("tls-ca-file, tls-cert-file and tls-key-file are not set: the control and data ports need mutual TLS; set them (see `talon pki`), or set insecure-control-plane=true to run without (anyone who reaches the ports can forge records; not for production)")
	}
	return nil
}

func (c *Config) validateCoordinator() error {
	if err := validateDashboardURL(c.Admin.UIDashboardURL); err != nil {
		return err
	}
	if c.PlacementReplicas < 1 || c.PlacementReplicas > 16 {
		return fmt.Errorf("placement-replicas %d: must be from 1 to 16", c.PlacementReplicas)
	}
	if n := c.Limits.NodeWritesPerInterval; n < 0 || n > 10_000 {
		return fmt.Errorf("max-node-writes-per-interval %d: must be from 0 (off) to 10000", n)
	}
	if c.Limits.MaxInflightWrites < 1 || c.Limits.MaxInflightWrites > 1_000_000 {
		return fmt.Errorf("max-inflight-writes %d: must be from 1 to 1000000", c.Limits.MaxInflightWrites)
	}
	if err := c.validateEvents(); err != nil {
		return err
	}
	if err := c.validateAttestation(); err != nil {
		return err
	}
	if c.CoordinatorReplicas < 1 || c.CoordinatorReplicas > MaxCoordinatorReplicas {
		return fmt.Errorf("coordinator-replicas %d: must be from 1 to %d", c.CoordinatorReplicas, MaxCoordinatorReplicas)
	}
	switch c.StateBackend {
	case BackendMemory:
		return c.validateMemory()
	case BackendEtcd:
		return c.validateEtcd()
	case BackendKubernetes:
		return c.validateKube()
	}
	return fmt.Errorf("state-backend %q: must be memory, etcd or kubernetes", c.StateBackend)
}

// validateAttestation checks the coordinator's attestation settings.
func (c *Config) validateAttestation() error {
	a := c.Attestation
	switch a.Mode {
	case AttestationOff:
		return nil
	case AttestationKubernetes:
	default:
		return fmt.Errorf("worker-attestation %q: must be off or kubernetes", a.Mode)
	}
	if a.Audience == "" || len(a.Audience) > 253 {
		return fmt.Errorf("worker-attestation-audience %q: must be 1 to 253 bytes", a.Audience)
	}
	for _, sa := range c.WorkerServiceAccounts() {
		ns, name, ok := strings.Cut(sa, "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") || len(ns) > 63 || len(name) > 253 {
			return fmt.Errorf("worker-attestation-service-accounts %q: want namespace/name, e.g. talon/talon-worker", sa)
		}
	}
	return nil
}

// validateMemory refuses the memory backend where several coordinators
// would each keep their own state.
func (c *Config) validateMemory() error {
	if c.HA {
		return fmt.Errorf("state-backend memory cannot be used with ha true: the memory backend is for development and single-coordinator mode; use etcd or kubernetes")
	}
	if c.CoordinatorReplicas > 1 {
		return fmt.Errorf("state-backend memory cannot be used with coordinator-replicas %d: the memory backend serves a single coordinator; use etcd or kubernetes", c.CoordinatorReplicas)
	}
	return nil
}

func (c *Config) validateEtcd() error {
	if len(c.Etcd.Endpoints) == 0 {
		return fmt.Errorf("etcd-endpoints is empty: state-backend etcd needs at least one endpoint")
	}
	for _, e := range c.Etcd.Endpoints {
		if err := validateEndpoint(e); err != nil {
			return err
		}
	}
	if (c.Etcd.CertFile == "") != (c.Etcd.KeyFile == "") {
		return fmt.Errorf("etcd-cert-file %q and etcd-key-file %q: set both or neither", c.Etcd.CertFile, c.Etcd.KeyFile)
	}
	if c.Etcd.Password.IsSet() && c.Etcd.Username == "" {
		return fmt.Errorf("etcd-username is empty but an etcd password is set: set etcd-username")
	}
	if c.Etcd.DialTimeout <= 0 {
		return fmt.Errorf("etcd-dial-timeout %s: must be positive", c.Etcd.DialTimeout)
	}
	if err := etcdrules.Prefix(cmp.Or(c.Etcd.Prefix, etcdrules.DefaultPrefix)); err != nil { // empty: the default, as the store takes it
		return fmt.Errorf("etcd-prefix %q: %w", c.Etcd.Prefix, err)
	}
	if err := ValidateCompactionInterval(c.Etcd.CompactionInterval); err != nil {
		return err
	}
	return wholeSeconds(c.LeaseTTL)
}

func (c *Config) validateKube() error {
	if err := kuberules.Namespace(c.Kube.Namespace); err != nil {
		return fmt.Errorf("kube-namespace %q: %w", c.Kube.Namespace, err)
	}
	if c.Kube.QPS < 1 || c.Kube.Burst < c.Kube.QPS {
		return fmt.Errorf("kube-qps %d and kube-burst %d: qps must be at least 1 and burst at least qps", c.Kube.QPS, c.Kube.Burst)
	}
	if c.Kube.MaxInflightWrites < 1 || c.Kube.MaxInflightWrites > MaxKubeInflightWrites {
		return fmt.Errorf("kube-max-inflight-writes %d: must be from 1 to %d", c.Kube.MaxInflightWrites, MaxKubeInflightWrites)
	}
	if c.Kube.AdmissionWait < time.Millisecond || c.Kube.AdmissionWait > c.RequestTimeout {
		return fmt.Errorf("kube-admission-wait %s: must be from 1ms to request-timeout %s", c.Kube.AdmissionWait, c.RequestTimeout)
	}
	return wholeSeconds(c.LeaseTTL)
}

func (c *Config) validateWorker() error {
	if c.PlacementReplicas < 1 || c.PlacementReplicas > 16 {
		return fmt.Errorf("placement-replicas %d: must be from 1 to 16", c.PlacementReplicas)
	}
	if len(c.Coordinators) == 0 {
		return fmt.Errorf("coordinators is empty: a worker needs at least one coordinator address")
	}
	for _, a := range c.Coordinators {
		if err := cluster.ValidateAddress("coordinators", a, true); err != nil {
			return err
		}
	}
	if c.BlobStore == "" {
		return fmt.Errorf("blob-store is empty: set a file://, http(s)://, s3://, gs:// or az:// URL")
	}
	u, err := url.Parse(c.BlobStore)
	if err != nil || !oneOf(u.Scheme, "file", "http", "https", "s3", "gs", "az") {
		return fmt.Errorf("blob-store %q: must be a file://, http://, https://, s3://, gs:// or az:// URL", RedactURL(c.BlobStore))
	}
	if u.User != nil {
		return fmt.Errorf("blob-store %q: must not carry credentials (user info): the blob store is read without them", RedactURL(u.String()))
	}
	if c.CacheDir == "" {
		return fmt.Errorf("cache-dir is empty: set a directory for the block cache")
	}
	if c.BlockSize < MinBlockSize || c.BlockSize > MaxBlockSize {
		return fmt.Errorf("block-size %d: must be from %d (64KiB) to %d (64MiB) bytes", c.BlockSize, MinBlockSize, MaxBlockSize)
	}
	if c.CacheCapacity < 2*c.BlockSize {
		return fmt.Errorf("cache-capacity %d: must be at least twice block-size %d (%d bytes)", c.CacheCapacity, c.BlockSize, 2*c.BlockSize)
	}
	return nil
}

func validateListen(name, addr string, required bool) error {
	if addr == "" {
		if required {
			return fmt.Errorf("%s is empty: must be host:port (host may be empty to listen on every interface)", name)
		}
		return nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s %q: must be host:port", name, addr)
	}
	if host != "" && !cluster.ValidHost(host) {
		return fmt.Errorf("%s %q: host must be empty (every interface), an IP address or a DNS name", name, addr)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("%s %q: port must be a number from 0 to 65535", name, addr)
	}
	return nil
}

// validateEndpoint applies the etcd store's own rule (etcdrules) to
// one endpoint.
func validateEndpoint(e string) error {
	if err := etcdrules.Endpoint(e); err != nil {
		return fmt.Errorf("etcd-endpoints %q: %w", RedactURL(e), err)
	}
	return nil
}

// RedactURL returns s with its credentials hidden (package redact: the
// userinfo password and every query value not known to be harmless).
func RedactURL(s string) string { return redact.URL(s) }

func wholeSeconds(ttl time.Duration) error {
	if ttl%time.Second != 0 {
		return fmt.Errorf("lease-ttl %s: must be a whole number of seconds for the etcd and kubernetes backends", ttl)
	}
	return nil
}

func oneOf(s string, options ...string) bool {
	for _, o := range options {
		if s == o {
			return true
		}
	}
	return false
}

// Bounds of etcd-compaction-interval (when not 0).
const (
	MinCompactionInterval = time.Second
	MaxCompactionInterval = 24 * time.Hour
)

// ValidateCompactionInterval checks etcd-compaction-interval: 0 (off) or
// from MinCompactionInterval to MaxCompactionInterval.
func ValidateCompactionInterval(d time.Duration) error {
	if d == 0 || (d >= MinCompactionInterval && d <= MaxCompactionInterval) {
		return nil
	}
	return fmt.Errorf("etcd-compaction-interval %s: must be 0 (off) or from %s to %s", d, MinCompactionInterval, MaxCompactionInterval)
}

// validateEvents checks max-events and max-event-age against the shared
// event log's bounds (state.DefaultEventMax, state.DefaultEventMaxAge):
// more could not be listed after a restart.
func (c *Config) validateEvents() error {
	if n := c.Limits.MaxEvents; n < 1 || n > MaxEvents {
		return fmt.Errorf("max-events %d: must be from 1 to %d", n, MaxEvents)
	}
	if d := c.Limits.MaxEventAge; d < time.Minute || d > MaxEventAge {
		return fmt.Errorf("max-event-age %v: must be from 1m0s to %v", d, MaxEventAge)
	}
	return nil
}

// The largest max-events and max-event-age: the shared event log's
// bounds.
const (
	MaxEvents   = 1000
	MaxEventAge = time.Hour
)

// validateReadAhead checks a worker's read-ahead settings.
func (c *Config) validateReadAhead() error {
	if c.Role != cluster.RoleWorker {
		return nil
	}
	if c.ReadAhead < 0 || c.ReadAhead > 64 {
		return fmt.Errorf("read-ahead %d: must be from 0 (off) to 64 blocks", c.ReadAhead)
	}
	if c.ReadAheadLoads < 1 || c.ReadAheadLoads > 1024 {
		return fmt.Errorf("read-ahead-loads %d: must be from 1 to 1024", c.ReadAheadLoads)
	}
	if c.WarmupRate < 0 || c.WarmupRate > 100_000 {
		return fmt.Errorf("warmup-rate %d: must be from 0 (no bound) to 100000 loads a second", c.WarmupRate)
	}
	if c.WarmupPeriod < 0 || c.WarmupPeriod > 24*time.Hour {
		return fmt.Errorf("warmup-period %s: must be from 0s to 24h0m0s", c.WarmupPeriod)
	}
	return nil
}
