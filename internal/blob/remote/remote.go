// Package remote is what the cloud blob stores (packages blob/s3,
// blob/gcs, blob/azure) share and the contract (package blob) does not
// need: the parameters of gs:// and az:// URLs, the key prefix of a URL
// path, and the HTTP client rule that follows redirects to the same host
// only. It imports no SDK.
package remote

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/talonhq/talon/internal/blob"
	"github.com/talonhq/talon/internal/redact"
)

// Defaults and limits of the URL parameters every cloud store takes.
const (
	// DefaultMaxAttempts is how many times one request is tried (the
	// first attempt and retries with jittered exponential backoff) when
	// the URL has no max_attempts.
	DefaultMaxAttempts = 5
	// MaxAttempts bounds max_attempts.
	MaxAttempts = 20
	// DefaultRequestTimeout bounds one request, body included, when the
	// URL has no request_timeout.
	DefaultRequestTimeout = 60 * time.Second
	// MaxBackoff caps the backoff between two attempts.
	MaxBackoff = 5 * time.Second
)

// Settings are what a gs:// or az:// URL's parameters say.
type Settings struct {
	// Endpoint replaces the service's (an emulator, a private endpoint),
	// without a trailing slash; "" for the service's own.
	Endpoint string
	// Anonymous: send no credentials.
	Anonymous bool
	// Timeout bounds one request, body included.
	Timeout time.Duration
	// Attempts is how many times one request is tried.
	Attempts int
}

// cloudParams are the parameters gs:// and az:// URLs accept.
var cloudParams = []string{"endpoint", "anonymous", "request_timeout", "max_attempts"}

// cloudParamParsers read each parameter; an error is the text after
// "name=value: ".
var cloudParamParsers = map[string]func(st *Settings, v string) error{
	"endpoint": func(st *Settings, v string) error {
		eu, err := url.Parse(v)
		if err != nil || (eu.Scheme != "http" && eu.Scheme != "https") || eu.Host == "" || eu.User != nil || eu.RawQuery != "" {
			return errors.New("must be an http:// or https:// URL without credentials or query")
		}
		st.Endpoint = strings.TrimSuffix(v, "/")
		return nil
	},
	"anonymous": func(st *Settings, v string) (err error) {
		if st.Anonymous, err = strconv.ParseBool(v); err != nil {
			return errors.New("must be true or false")
		}
		return nil
	},
	"request_timeout": func(st *Settings, v string) (err error) {
		if st.Timeout, err = time.ParseDuration(v); err != nil || st.Timeout < 100*time.Millisecond || st.Timeout > time.Hour {
			return errors.New("must be a duration from 100ms to 1h")
		}
		return nil
	},
	"max_attempts": func(st *Settings, v string) (err error) {
		if st.Attempts, err = strconv.Atoi(v); err != nil || st.Attempts < 1 || st.Attempts > MaxAttempts {
			return fmt.Errorf("must be an integer from 1 to %d", MaxAttempts)
		}
		return nil
	},
}

// URL is a parsed gs:// or az:// URL.
type URL struct {
	// Host is the bucket (gs://) or the account (az://).
	Host string
	// Segments are the path segments before the key prefix: none for
	// gs://, the container for az://.
	Segments []string
	// Prefix is the key prefix, "" or ending in "/".
	Prefix string
	// Settings are what the parameters say.
	Settings Settings
	// Bad builds an error that names the URL without its query (a
	// parameter could carry a password) and wraps blob.ErrInvalidURL.
	Bad func(format string, args ...any) error
}

// ParseURL checks rawURL of scheme, whose path starts with the
// segments named in segNames (each required), and reads its parameters.
// credHint says where the scheme's credentials come from.
func ParseURL(rawURL, scheme string, segNames []string, shape, credHint string) (*URL, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: blob-store URL does not parse as a URL", blob.ErrInvalidURL)
	}
	shown := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}
	c := &URL{Host: u.Host, Settings: Settings{Timeout: DefaultRequestTimeout, Attempts: DefaultMaxAttempts}}
	c.Bad = func(format string, args ...any) error {
		return fmt.Errorf("%w: blob-store %q: %s", blob.ErrInvalidURL, shown.String(), fmt.Sprintf(format, args...))
	}
	switch {
	case u.Scheme != scheme:
		return nil, c.Bad("scheme %q is not %s", u.Scheme, scheme)
	case u.User != nil:
		return nil, c.Bad("must not carry credentials (user info): %s", credHint)
	case u.Host == "":
		return nil, c.Bad("no %s: write %s", segNamesOr(segNames, "bucket"), shape)
	case u.Fragment != "":
		return nil, c.Bad("must not have a fragment")
	}
	path := strings.TrimPrefix(u.Path, "/")
	for _, name := range segNames {
		seg, rest, _ := strings.Cut(path, "/")
		if seg == "" {
			return nil, c.Bad("no %s: write %s", name, shape)
		}
		c.Segments, path = append(c.Segments, seg), rest
	}
	if c.Prefix, err = Prefix(path); err != nil {
		return nil, c.Bad("prefix: %v", err)
	}
	if err := c.readQuery(u.RawQuery); err != nil {
		return nil, err
	}
	return c, nil
}

func segNamesOr(names []string, host string) string {
	if len(names) == 0 {
		return host
	}
	return "account"
}

// readQuery reads the URL parameters, each at most once.
func (c *URL) readQuery(raw string) error {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return c.Bad("query does not parse")
	}
	for _, k := range slices.Sorted(maps.Keys(q)) {
		v := q[k]
		parse, ok := cloudParamParsers[k]
		switch {
		case !ok:
			return c.Bad("unknown parameter %q: the parameters are %s", k, strings.Join(cloudParams, ", "))
		case len(v) != 1:
			return c.Bad("parameter %s is given %d times: give it once", k, len(v))
		}
		if err := parse(&c.Settings, v[0]); err != nil {
			shown := v[0]
			if k == "endpoint" {
				shown = RedactParam(shown)
			}
			return c.Bad("%s=%q: %v", k, shown, err)
		}
	}
	return nil
}

// HTTPClient is the HTTP client of a gs:// or az:// store: the
// caller's Options.HTTPClient, or one whose Timeout is timeout, both
// following redirects to the same host only (CheckRedirect): a store,
// or whoever answers for it, cannot send a worker's requests to a host
// the operator never named.
func HTTPClient(opts blob.Options, timeout time.Duration) *http.Client {
	c := http.Client{Timeout: timeout}
	if opts.HTTPClient != nil {
		c = *opts.HTTPClient
	}
	if c.Transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 32
		c.Transport = t
	}
	c.CheckRedirect = CheckRedirect
	return &c
}

// Prefix is a URL path as a key prefix: "" or ending in "/". The prefix
// must be a valid key (blob.ValidateKey).
func Prefix(path string) (string, error) {
	prefix := strings.TrimSuffix(strings.TrimPrefix(path, "/"), "/")
	if prefix == "" {
		return "", nil
	}
	if err := blob.ValidateKey(prefix); err != nil {
		return "", err
	}
	return prefix + "/", nil
}

// CheckRedirect is the CheckRedirect of a cloud store's HTTP client: it
// follows a 307 or 308 to the same host and nothing else.
func CheckRedirect(r *http.Request, via []*http.Request) error {
	if len(via) >= 10 || !strings.EqualFold(r.URL.Host, via[0].URL.Host) || r.URL.Scheme != via[0].URL.Scheme {
		return http.ErrUseLastResponse
	}
	if resp := r.Response; resp == nil || (resp.StatusCode != http.StatusTemporaryRedirect && resp.StatusCode != http.StatusPermanentRedirect) {
		return http.ErrUseLastResponse
	}
	return nil
}

// RedactParam hides a password in a URL given as a parameter.
func RedactParam(s string) string {
	if _, err := url.Parse(s); err == nil {
		return redact.URL(s)
	}
	return "(unparsable)"
}
