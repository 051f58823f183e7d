package otlp

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/talonhq/talon/internal/pki/capool"
	"github.com/talonhq/talon/internal/redact"
)

// defaultExportTimeout is OTEL_EXPORTER_OTLP_TIMEOUT's default.
const defaultExportTimeout = 10 * time.Second

// maxRedirects bounds the redirects an export follows (net/http's own
// bound).
const maxRedirects = 10

// errCrossOriginRedirect refuses a redirect of an export to another
// origin.
var errCrossOriginRedirect = errors.New("refused: the OTLP endpoint redirected to another origin, and the export carries the exporter's headers (OTEL_EXPORTER_OTLP_HEADERS), which may hold credentials")

// exportClient returns the HTTP client of the OTLP/HTTP exporter: the
// exporter's own settings from the environment (TLS files, timeout, the
// proxy variables) and a CheckRedirect that follows a redirect only to
// the same origin (scheme, host and port). net/http resends every header
// of the first request across a redirect, custom ones such as X-Api-Key
// always and Authorization to any port of the same host: a receiver that
// redirects elsewhere would get the exporter's credentials. Giving the
// exporter a client replaces its TLS and timeout handling
// (otlptracehttp.WithHTTPClient), so they are read here, with the
// exporter's variables and precedence (TRACES_ first).
func exportClient(getenv func(string) string) (*http.Client, error) {
	timeout := defaultExportTimeout
	if name, v := otlpVar(getenv, "TIMEOUT"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms < 0 {
			return nil, fmt.Errorf("%s=%q: must be a whole number of milliseconds", name, v)
		}
		timeout = time.Duration(ms) * time.Millisecond
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = http.ProxyFromEnvironment
	tlsCfg, err := exportTLS(getenv)
	if err != nil {
		return nil, err
	}
	if tlsCfg != nil {
		tr.TLSClientConfig = tlsCfg
	}
	return &http.Client{Transport: tr, Timeout: timeout, CheckRedirect: sameOriginRedirect}, nil
}

// sameOriginRedirect is the exporter client's CheckRedirect.
func sameOriginRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	if from := via[0].URL; !sameOrigin(from, req.URL) {
		return fmt.Errorf("%w (from %s to %s)", errCrossOriginRedirect, redact.URL(origin(from)), redact.URL(origin(req.URL)))
	}
	return nil
}

func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}

func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if strings.EqualFold(u.Scheme, "https") {
		return "443"
	}
	return "80"
}

func origin(u *url.URL) string { return u.Scheme + "://" + u.Host }

// exportTLS builds the TLS configuration from the exporter's certificate
// variables, nil when none is set.
func exportTLS(getenv func(string) string) (*tls.Config, error) {
	caVar, ca := otlpVar(getenv, "CERTIFICATE")
	certVar, cert := otlpVar(getenv, "CLIENT_CERTIFICATE")
	keyVar, key := otlpVar(getenv, "CLIENT_KEY")
	if ca == "" && cert == "" && key == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		pool, err := capool.Load(ca)
		if err != nil {
			return nil, fmt.Errorf("%s=%q: %w", caVar, ca, err)
		}
		cfg.RootCAs = pool
	}
	switch {
	case cert != "" && key != "":
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("%s=%q and %s=%q: %w", certVar, cert, keyVar, key, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	case cert != "" || key != "":
		return nil, fmt.Errorf("%s and %s: set both or neither", certVar, keyVar)
	}
	return cfg, nil
}

// otlpVar returns OTEL_EXPORTER_OTLP_TRACES_<suffix> when set, else
// OTEL_EXPORTER_OTLP_<suffix>, with the name of the one read.
func otlpVar(getenv func(string) string, suffix string) (name, value string) {
	for _, n := range []string{"OTEL_EXPORTER_OTLP_TRACES_" + suffix, "OTEL_EXPORTER_OTLP_" + suffix} {
		if v := strings.TrimSpace(getenv(n)); v != "" {
			return n, v
		}
	}
	return "OTEL_EXPORTER_OTLP_" + suffix, ""
}
