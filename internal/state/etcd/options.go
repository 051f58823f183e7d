package etcd

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/talonhq/talon/internal/redact"
	"github.com/talonhq/talon/internal/state/etcd/etcdrules"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	"google.golang.org/grpc"
)

// Defaults applied by New to zero fields.
const (
	DefaultPrefix         = etcdrules.DefaultPrefix
	DefaultDialTimeout    = 5 * time.Second
	DefaultRequestTimeout = 5 * time.Second
)

// redacted replaces secrets wherever Options is printed or logged.
const redacted = "[redacted]"

// Options configures a Store. The zero value of every field but Endpoints
// and CacheSnapshots means "the default"; start from DefaultOptions to get
// the default snapshot cache too.
type Options struct {
	// Endpoints lists the etcd client URLs (http://host:port or
	// https://host:port) or host:port pairs. At least one is required.
	Endpoints []string
	// Username and Password authenticate to etcd when Username is set. The
	// caller reads the password from a file or the environment; it is never
	// printed: String, GoString, LogValue and JSON redact it.
	Username string
	Password string `json:"-"`
	// TLS configures client TLS. Zero means plain TCP, unless an endpoint is
	// an https URL (then the system roots verify the server).
	TLS TLSOptions
	// DialTimeout bounds establishing the first connection (and
	// authenticating) in New. Default DefaultDialTimeout.
	DialTimeout time.Duration
	// RequestTimeout is the deadline given to an operation whose context has
	// none. Default DefaultRequestTimeout.
	RequestTimeout time.Duration
	// Prefix is the key prefix: records live under
	// <Prefix>/clusters/<cluster-id>/nodes/<role>/<node-id>. It starts with
	// "/" and does not end with one. Default DefaultPrefix.
	Prefix string
	// CacheSnapshots answers Snapshot from a watch-fed cache after
	// confirming the current revision with a cheap linearizable read,
	// instead of reading every record from etcd. DefaultOptions sets it.
	CacheSnapshots bool
	// Clock stamps UpdatedAtUnixMs and ObservedAtUnixMs. Default time.Now.
	Clock func() time.Time `json:"-"`
	// Logger receives the store's diagnostics. Default: discard.
	Logger *slog.Logger `json:"-"`
	// CompactionInterval, when positive, makes the store compact etcd's
	// history once per interval across every store of the prefix (see
	// compactor); coordinators set it (DefaultCompactionInterval). 0: off.
	CompactionInterval time.Duration
	// CapacityInterval, when positive, makes the store poll etcd's database
	// size, quota and alarms (Store.Capacity); coordinators set it
	// (DefaultCapacityInterval). 0: off.
	CapacityInterval time.Duration
	// Registerer, when set, receives the store's counters (Stats) as
	// talon_state_etcd_* metrics; Close unregisters them.
	Registerer prometheus.Registerer `json:"-"`

	// dialOptions are appended to the gRPC dial options; tests use them to
	// count requests.
	dialOptions []grpc.DialOption

	// ringSize is how many recent events the snapshot cache keeps for
	// watchers (state.FanOut); 0 means state.DefaultRingSize. Tests set
	// it small to reach the slow-watcher rule.
	ringSize int

	// pageSize is how many keys one request of a prefix read returns
	// (rangePages); 0 means listPageSize. afterPage, when set, is called
	// after each page but the last. Tests use both to read in several
	// pages and to write between them.
	pageSize  int
	afterPage func()
}

// TLSOptions names the PEM files of a client TLS configuration.
type TLSOptions struct {
	// CAFile verifies the server certificate. Empty means the system roots.
	CAFile string
	// CertFile and KeyFile are the client certificate and key, for etcd
	// servers that require client certificates. Both or neither.
	CertFile string
	KeyFile  string
	// ServerName overrides the name verified in the server certificate.
	ServerName string
}

// Enabled reports whether any TLS setting is present.
func (t TLSOptions) Enabled() bool {
	return t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.ServerName != ""
}

// DefaultOptions returns options with every default set, including the
// snapshot cache; the caller sets Endpoints and credentials.
func DefaultOptions() Options {
	return Options{
		DialTimeout:    DefaultDialTimeout,
		RequestTimeout: DefaultRequestTimeout,
		Prefix:         DefaultPrefix,
		CacheSnapshots: true,
	}
}

// String renders the options with the password redacted.
func (o Options) String() string {
	pw := ""
	if o.Password != "" {
		pw = redacted
	}
	return fmt.Sprintf("etcd.Options{Endpoints:%q Username:%q Password:%q TLS:{CAFile:%q CertFile:%q KeyFile:%q ServerName:%q} DialTimeout:%s RequestTimeout:%s Prefix:%q CacheSnapshots:%t}",
		o.Endpoints, o.Username, pw, o.TLS.CAFile, o.TLS.CertFile, o.TLS.KeyFile, o.TLS.ServerName,
		o.DialTimeout, o.RequestTimeout, o.Prefix, o.CacheSnapshots)
}

// GoString is String, so %#v does not print the password either.
func (o Options) GoString() string { return o.String() }

// LogValue renders the options for slog with the password redacted.
func (o Options) LogValue() slog.Value {
	attrs := []slog.Attr{
		slog.Any("endpoints", o.Endpoints),
		slog.String("username", o.Username),
	}
	if o.Password != "" {
		attrs = append(attrs, slog.String("password", redacted))
	}
	attrs = append(attrs,
		slog.Bool("tls", o.TLS.Enabled()),
		slog.String("caFile", o.TLS.CAFile),
		slog.String("certFile", o.TLS.CertFile),
		slog.String("keyFile", o.TLS.KeyFile),
		slog.Duration("dialTimeout", o.DialTimeout),
		slog.Duration("requestTimeout", o.RequestTimeout),
		slog.String("prefix", o.Prefix),
		slog.Bool("cacheSnapshots", o.CacheSnapshots),
		slog.Duration("compactionInterval", o.CompactionInterval),
		slog.Duration("capacityInterval", o.CapacityInterval),
	)
	return slog.GroupValue(attrs...)
}

// withDefaults returns o with zero fields set to their defaults.
func (o Options) withDefaults() Options {
	if o.DialTimeout == 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Validate checks the options as New would use them (zero fields take
// their defaults), naming the field, the value and the rule of every
// problem. It does not read the files it names; New does.
func (o Options) Validate() error {
	o = o.withDefaults()
	var errs []error
	if len(o.Endpoints) == 0 {
		errs = append(errs, errors.New("endpoints: at least one etcd endpoint is required"))
	}
	for i, ep := range o.Endpoints {
		if err := etcdrules.Endpoint(ep); err != nil {
			errs = append(errs, fmt.Errorf("endpoints[%d] %q: %w", i, redact.URL(ep), err))
		}
	}
	if o.Password != "" && o.Username == "" {
		errs = append(errs, errors.New("username: required when a password is set"))
	}
	if o.Username != "" && o.Password == "" {
		errs = append(errs, fmt.Errorf("password: required for username %q (read it from a file or the environment)", o.Username))
	}
	if (o.TLS.CertFile == "") != (o.TLS.KeyFile == "") {
		errs = append(errs, fmt.Errorf("tls: certFile %q and keyFile %q must be set together", o.TLS.CertFile, o.TLS.KeyFile))
	}
	if o.DialTimeout < 0 {
		errs = append(errs, fmt.Errorf("dialTimeout %s: must be positive", o.DialTimeout))
	}
	if o.RequestTimeout < 0 {
		errs = append(errs, fmt.Errorf("requestTimeout %s: must be positive", o.RequestTimeout))
	}
	if err := etcdrules.Prefix(o.Prefix); err != nil {
		errs = append(errs, fmt.Errorf("prefix %q: %w", o.Prefix, err))
	}
	if o.CompactionInterval < 0 {
		errs = append(errs, fmt.Errorf("compactionInterval %s: must be 0 (off) or positive", o.CompactionInterval))
	}
	if o.CapacityInterval < 0 {
		errs = append(errs, fmt.Errorf("capacityInterval %s: must be 0 (off) or positive", o.CapacityInterval))
	}
	return errors.Join(errs...)
}

// tlsConfig builds the client TLS configuration, or nil when TLS is off.
func (o Options) tlsConfig() (*tls.Config, error) {
	https := false
	for _, ep := range o.Endpoints {
		if strings.HasPrefix(ep, "https://") || strings.HasPrefix(ep, "unixs://") {
			https = true
		}
	}
	if !o.TLS.Enabled() {
		if https {
			return &tls.Config{MinVersion: tls.VersionTLS12}, nil
		}
		return nil, nil
	}
	info := transport.TLSInfo{
		CertFile:      o.TLS.CertFile,
		KeyFile:       o.TLS.KeyFile,
		TrustedCAFile: o.TLS.CAFile,
		ServerName:    o.TLS.ServerName,
	}
	cfg, err := info.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("tls: caFile %q certFile %q keyFile %q: %w", o.TLS.CAFile, o.TLS.CertFile, o.TLS.KeyFile, err)
	}
	if cfg.MinVersion == 0 {
		cfg.MinVersion = tls.VersionTLS12
	}
	if o.TLS.ServerName != "" {
		cfg.ServerName = o.TLS.ServerName
	}
	return cfg, nil
}
