package cmdutil

import (
	"cmp"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/buildinfo"
	"github.com/talonhq/talon/internal/cli/cliconfig"
	"github.com/talonhq/talon/internal/pki/capool"
)

// Connection defaults and environment variables.
const (
	// DefaultServer is the coordinator admin listener on this host (the
	// admin listener's default port is 7401).
	DefaultServer = "http://127.0.0.1:7401"
	// DefaultTimeout bounds one request to one server.
	DefaultTimeout = 10 * time.Second

	EnvServer  = "TALONCTL_SERVER"  // comma-separated admin URLs
	EnvToken   = "TALONCTL_TOKEN"   // bearer token
	EnvContext = "TALONCTL_CONTEXT" // context name
	EnvConfig  = "TALONCTL_CONFIG"  // configuration file
)

// Flag names of the connection flags.
const (
	FlagServer    = "server"
	FlagToken     = "token"
	FlagTokenFile = "token-file"
	FlagCAFile    = "ca-file"
	FlagInsecure  = "insecure-skip-tls-verify"
	FlagTimeout   = "timeout"
	// FlagAttemptTimeout bounds an attempt until the server's headers.
	FlagAttemptTimeout = "attempt-timeout"
	FlagContext        = "context"
	FlagConfig         = "talonconfig"
)

// ConnFlags are the values of the global connection flags as parsed.
// Resolve them with Factory.Connection.
type ConnFlags struct {
	Servers   []string
	Token     string
	TokenFile string
	CAFile    string
	Insecure  bool
	Timeout   time.Duration
	// AttemptTimeout is --attempt-timeout (apiv1.ClientOptions).
	AttemptTimeout time.Duration
	Context        string
	// ConfigFile is --talonconfig: the configuration file to use.
	ConfigFile string

	fs *pflag.FlagSet // where the flags live, to tell given from default
}

// AddFlags registers the connection flags on fs (the root's persistent flags).
func (c *ConnFlags) AddFlags(fs *pflag.FlagSet) {
	c.fs = fs
	fs.StringSliceVarP(&c.Servers, FlagServer, "s", nil,
		"admin `URL` of a coordinator; repeat or comma-separate to fail over in order (env "+EnvServer+", default "+DefaultServer+")")
	fs.StringVar(&c.Token, FlagToken, "", "bearer `token` for the admin API (env "+EnvToken+"); prefer --token-file, as arguments are visible to other local users")
	fs.StringVar(&c.TokenFile, FlagTokenFile, "", "read the bearer token from `FILE`")
	fs.StringVar(&c.CAFile, FlagCAFile, "", "verify the servers' TLS certificates with the PEM CA certificates in `FILE`")
	fs.BoolVar(&c.Insecure, FlagInsecure, false, "do not verify the servers' TLS certificates (insecure)")
	fs.DurationVar(&c.Timeout, FlagTimeout, DefaultTimeout, "bound one request to one server")
	fs.DurationVar(&c.AttemptTimeout, FlagAttemptTimeout, apiv1.DefaultAttemptTimeout,
		"give a server this long to start answering (connect, TLS, response headers) before trying the next --server; at most --timeout")
	fs.StringVar(&c.Context, FlagContext, "", "use the context `NAME` of the config file (env "+EnvContext+")")
	fs.StringVar(&c.ConfigFile, FlagConfig, "", "use the configuration `FILE` instead of $XDG_CONFIG_HOME/talon/talonctl.yaml (env "+EnvConfig+")")
}

// ConfigPath returns the configuration file to use: --talonconfig, else
// TALONCTL_CONFIG, else cliconfig.Path.
func (c *ConnFlags) ConfigPath(getenv func(string) string) (string, error) {
	switch {
	case c.ConfigFile != "":
		return c.ConfigFile, nil
	case c.changed(FlagConfig):
		return "", UsageErrorf("--%s: must not be empty", FlagConfig)
	case getenv(EnvConfig) != "":
		return getenv(EnvConfig), nil
	}
	return cliconfig.Path(getenv)
}

func (c *ConnFlags) changed(name string) bool {
	if c.fs == nil {
		return false
	}
	f := c.fs.Lookup(name)
	return f != nil && f.Changed
}

// Connection are resolved connection settings. Each setting comes from the
// first of: its flag, its environment variable, the context, the default.
type Connection struct {
	// ContextName is the context in use; empty when none.
	ContextName string
	// ConfigPath is the configuration file consulted (it may not exist).
	ConfigPath string
	// Servers are the admin base URLs in failover order.
	Servers []string
	// Token is the bearer token; empty for none. Never print it.
	Token string
	// TokenSource says where Token came from ("--token-file /x", "TALONCTL_TOKEN", ...).
	TokenSource string
	CAFile      string
	Insecure    bool
	// Timeout bounds one request to one server.
	Timeout time.Duration
	// AttemptTimeout bounds one request to one server until its response
	// headers arrive, so a hung server costs this long before failover.
	AttemptTimeout time.Duration
	// Memory is shared by the clients built from the connection (and its
	// copies): see apiv1.ServerMemory. nil: none.
	Memory *apiv1.ServerMemory
}

// String describes the connection without the token.
func (c *Connection) String() string {
	s := "servers " + apiv1.RedactUserInfo(strings.Join(c.Servers, ","))
	if c.ContextName != "" {
		s = "context " + c.ContextName + ", " + s
	}
	if c.TokenSource != "" {
		s += ", token from " + c.TokenSource
	}
	return s
}

// splitList splits comma-separated lists and drops empty items.
func splitList(items []string) []string {
	var out []string
	for _, it := range items {
		for _, s := range strings.Split(it, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// contextOverride returns the context named by --context or
// TALONCTL_CONTEXT and the name of the one that named it.
func (c *ConnFlags) contextOverride(getenv func(string) string) (name, source string) {
	switch {
	case c.Context != "":
		return c.Context, "--" + FlagContext
	case getenv(EnvContext) != "":
		return getenv(EnvContext), EnvContext
	}
	return "", ""
}

// resolve computes the connection from flags, the environment and the
// configuration file. Each step resolves one setting, so the first error
// is that of the first setting in the order context, servers, token, TLS,
// timeout.
func (c *ConnFlags) resolve(getenv func(string) string) (*Connection, error) {
	path, perr := c.ConfigPath(getenv)
	var ee *ExitError
	if errors.As(perr, &ee) {
		return nil, perr
	}
	conn := &Connection{ConfigPath: path}
	cctx, err := c.pickContext(getenv, path, perr)
	if err != nil {
		return nil, err
	}
	if cctx != nil {
		conn.ContextName = cctx.Name
	}
	if conn.Servers, err = c.resolveServers(getenv, cctx); err != nil {
		return nil, err
	}
	if conn.Token, conn.TokenSource, err = c.resolveToken(getenv, cctx); err != nil {
		return nil, err
	}
	if conn.CAFile, conn.Insecure, err = c.resolveTLS(cctx); err != nil {
		return nil, err
	}
	if conn.Timeout, err = c.resolveTimeout(cctx); err != nil {
		return nil, err
	}
	if c.changed(FlagAttemptTimeout) && c.AttemptTimeout <= 0 {
		return nil, UsageErrorf("--%s %s: must be positive", FlagAttemptTimeout, c.AttemptTimeout)
	}
	conn.AttemptTimeout = cmp.Or(c.AttemptTimeout, apiv1.DefaultAttemptTimeout)
	return conn, nil
}

// pickContext returns the context in use, or nil for none: the one named
// by --context or TALONCTL_CONTEXT, else the file's current-context. path
// and perr are the config file's path and the error of finding it. A name
// from the command line or the environment that cannot be used is a usage
// error; a wrong current-context is the file's fault, not the command's.
func (c *ConnFlags) pickContext(getenv func(string) string, path string, perr error) (*cliconfig.Context, error) {
	name, source := c.contextOverride(getenv)
	if perr != nil {
		if name != "" {
			return nil, UsageErrorf("%s %q: cannot find the config file: %w", source, name, perr)
		}
		return nil, nil
	}
	file, err := cliconfig.Load(path)
	if err != nil {
		return nil, err
	}
	if name == "" && file.CurrentContext != "" {
		name, source = file.CurrentContext, "current-context"
	}
	if name == "" {
		return nil, nil
	}
	cctx, ok := file.Context(name)
	if !ok {
		err := fmt.Errorf("%s: %w", source, file.UndefinedError(name))
		if source == "current-context" {
			return nil, err
		}
		return nil, UsageError(err)
	}
	return cctx, nil
}

// resolveServers returns the admin URLs from --server, TALONCTL_SERVER,
// the context or the default. A flag or variable that names none is a
// usage error.
func (c *ConnFlags) resolveServers(getenv func(string) string, cctx *cliconfig.Context) ([]string, error) {
	switch {
	case c.changed(FlagServer) || len(c.Servers) > 0:
		return atLeastOneServer("--"+FlagServer, strings.Join(c.Servers, ","), splitList(c.Servers))
	case getenv(EnvServer) != "":
		return atLeastOneServer(EnvServer, getenv(EnvServer), splitList([]string{getenv(EnvServer)}))
	case cctx != nil:
		return append([]string(nil), cctx.Servers...), nil
	}
	return []string{DefaultServer}, nil
}

// atLeastOneServer returns servers, or a usage error naming source and
// its value when there are none.
func atLeastOneServer(source, value string, servers []string) ([]string, error) {
	if len(servers) == 0 {
		return nil, UsageErrorf("%s %q: must name at least one admin URL", source, value)
	}
	return servers, nil
}

// resolveToken returns the bearer token and where it came from: --token,
// --token-file, TALONCTL_TOKEN or the context's token-file; none is no
// token. --token and --token-file together, or an empty --token, are
// usage errors.
func (c *ConnFlags) resolveToken(getenv func(string) string, cctx *cliconfig.Context) (token, source string, err error) {
	switch {
	case c.Token != "" && c.TokenFile != "":
		return "", "", UsageErrorf("--%s and --%s: give at most one", FlagToken, FlagTokenFile)
	case c.Token != "":
		return c.Token, "--" + FlagToken, nil
	case c.changed(FlagToken):
		return "", "", UsageErrorf("--%s: must not be empty", FlagToken)
	case c.TokenFile != "":
		tok, err := readToken(c.TokenFile)
		if err != nil {
			return "", "", UsageErrorf("--%s %q: %w", FlagTokenFile, c.TokenFile, err)
		}
		return tok, "--" + FlagTokenFile + " " + c.TokenFile, nil
	case getenv(EnvToken) != "":
		return strings.TrimSpace(getenv(EnvToken)), EnvToken, nil
	case cctx != nil && cctx.TokenFile != "":
		tok, err := readToken(cctx.TokenFile)
		if err != nil {
			return "", "", fmt.Errorf("context %q: token-file %q: %w", cctx.Name, cctx.TokenFile, err)
		}
		return tok, "context " + cctx.Name + " token-file " + cctx.TokenFile, nil
	}
	return "", "", nil
}

// resolveTLS returns the CA file and insecure mode: the context's,
// overridden by the flags. Setting one flag drops the context's value of
// the other, so that --ca-file replaces a context's insecure mode and the
// reverse; both in the result is a usage error.
func (c *ConnFlags) resolveTLS(cctx *cliconfig.Context) (caFile string, insecure bool, err error) {
	if cctx != nil {
		caFile, insecure = cctx.CAFile, cctx.InsecureSkipTLSVerify
	}
	if c.changed(FlagCAFile) || c.CAFile != "" {
		caFile = c.CAFile
		if !c.changed(FlagInsecure) {
			insecure = false
		}
	}
	if c.changed(FlagInsecure) {
		insecure = c.Insecure
		if c.Insecure && !c.changed(FlagCAFile) {
			caFile = ""
		}
	}
	if insecure && caFile != "" {
		return "", false, UsageErrorf("--%s and --%s: give at most one", FlagCAFile, FlagInsecure)
	}
	return caFile, insecure, nil
}

// resolveTimeout returns the timeout from --timeout, which must be
// positive, the context or the default.
func (c *ConnFlags) resolveTimeout(cctx *cliconfig.Context) (time.Duration, error) {
	switch {
	case c.changed(FlagTimeout):
		if c.Timeout <= 0 {
			return 0, UsageErrorf("--%s %s: must be positive", FlagTimeout, c.Timeout)
		}
		return c.Timeout, nil
	case cctx != nil && cctx.TimeoutDuration > 0:
		return cctx.TimeoutDuration, nil
	}
	return DefaultTimeout, nil
}

// readToken reads a token file: its content without surrounding space,
// which must not be empty.
func readToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", errors.New("the file is empty")
	}
	return tok, nil
}

// TLSConfig returns the TLS configuration of the connection, or nil when
// it sets neither a CA file nor insecure mode (then https:// URLs use the
// system roots and bare host:port means http).
func (c *Connection) TLSConfig() (*tls.Config, error) {
	if c.CAFile == "" && !c.Insecure {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.Insecure {
		cfg.InsecureSkipVerify = true //nolint:gosec // the operator asked for it explicitly
		return cfg, nil
	}
	pool, err := capool.Load(c.CAFile)
	if err != nil {
		return nil, fmt.Errorf("ca-file %q: %w", c.CAFile, err)
	}
	cfg.RootCAs = pool
	return cfg, nil
}

// NewClient builds an /api/v1 client for the connection. Its transport is
// returned too, so that the caller can close idle connections when done.
func (c *Connection) NewClient(timeout time.Duration) (*apiv1.Client, *http.Transport, error) {
	return c.NewClientVia(timeout, c.AttemptTimeout, nil)
}

// NewClientVia is NewClient with the attempt timeout given (0: the
// client's default) and the client's requests sent through wrap's round
// tripper around the transport (nil: the transport itself); `talonctl top`
// records there which server answered.
func (c *Connection) NewClientVia(timeout, attempt time.Duration, wrap func(*http.Transport) http.RoundTripper) (*apiv1.Client, *http.Transport, error) {
	tlsCfg, err := c.TLSConfig()
	if err != nil {
		return nil, nil, UsageError(err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil // admin listeners are internal; never route through an environment proxy
	if tlsCfg != nil {
		tr.TLSClientConfig = tlsCfg
	}
	if timeout <= 0 {
		timeout = c.Timeout
	}
	var rt http.RoundTripper = tr
	if wrap != nil {
		rt = wrap(tr)
	}
	cl, err := apiv1.NewClient(c.Servers, apiv1.ClientOptions{
		Token:          c.Token,
		HTTPClient:     &http.Client{Transport: rt},
		TLS:            tlsCfg,
		Timeout:        timeout,
		AttemptTimeout: attempt,
		UserAgent:      "talonctl/" + buildinfo.Version,
		Memory:         c.Memory,
	})
	if err != nil {
		return nil, nil, UsageErrorf("--server: %w", err)
	}
	return cl, tr, nil
}
