// Package remote is what the cloud blob stores (packages blob/s3,
// blob/gcs, blob/azure) share and the contract (package blob) does not
// need: the one parser of their URLs (the common parameters, and each
// scheme's own as extras), the key prefix of a URL path, and the HTTP
// client rule that follows redirects to the same host only. It imports
// no SDK.
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

// Settings are what the parameters every cloud store takes say.
type Settings struct {
	// Endpoint replaces the service's (an emulator, a private endpoint),
	// without a trailing slash; "" for the service's own.
	Endpoint string
	// Anonymous: send no credentials (only where Scheme.Anonymous).
	Anonymous bool
	// Timeout bounds one request, body included.
	Timeout time.Duration
	// Attempts is how many times one request is tried.
	Attempts int
}

// Param is a parameter one scheme takes beyond the common ones: its name
// and how to read it (an error is the text after "name=value: ").
type Param struct {
	Name  string
	Parse func(v string) error
}

// Scheme is the shape of one cloud store's URLs:
// <Name>://<Host>/<Segments...>/<prefix>?<parameters>.
type Scheme struct {
	// Name is the URL scheme ("s3").
	Name string
	// Host names what the URL's host is ("bucket", "account").
	Host string
	// Segments name the path segments before the key prefix, each
	// required ("container" for az://).
	Segments []string
	// Shape is an example URL for errors ("s3://bucket/prefix").
	Shape string
	// Credentials says where the store's credentials come from, for the
	// error that refuses them in the URL.
	Credentials string
	// Anonymous: the scheme takes anonymous=true (no credentials).
	Anonymous bool
	// Params are the scheme's own parameters.
	Params []Param
}

// URL is a parsed cloud store URL.
type URL struct {
	// Host is the URL's host: the bucket or the account.
	Host string
	// Segments are the path segments before the key prefix.
	Segments []string
	// Prefix is the key prefix, "" or ending in "/".
	Prefix string
	// Settings are what the common parameters say.
	Settings Settings
	// Bad builds an error that names the URL without its query (a
	// parameter could carry a password) and wraps blob.ErrInvalidURL.
	Bad func(format string, args ...any) error
}

// ParseURL checks rawURL against s and reads its parameters: endpoint,
// request_timeout, max_attempts, anonymous where s takes it, and s.Params.
// Each may be given once.
func ParseURL(rawURL string, s Scheme) (*URL, error) {
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
	case u.Scheme != s.Name:
		return nil, c.Bad("scheme %q is not %s", u.Scheme, s.Name)
	case u.User != nil:
		return nil, c.Bad("must not carry credentials (user info): %s", s.Credentials)
	case u.Host == "":
		return nil, c.Bad("no %s: write %s", s.Host, s.Shape)
	case u.Fragment != "":
		return nil, c.Bad("must not have a fragment")
	}
	path := strings.TrimPrefix(u.Path, "/")
	for _, name := range s.Segments {
		seg, rest, _ := strings.Cut(path, "/")
		if seg == "" {
			return nil, c.Bad("no %s: write %s", name, s.Shape)
		}
		c.Segments, path = append(c.Segments, seg), rest
	}
	if c.Prefix, err = Prefix(path); err != nil {
		return nil, c.Bad("prefix: %v", err)
	}
	if err := c.readQuery(u.RawQuery, s.params(&c.Settings)); err != nil {
		return nil, err
	}
	return c, nil
}

// params are the parameters of s in the order errors list them: endpoint,
// anonymous, the scheme's own, request_timeout, max_attempts; the common
// ones read into st.
func (s Scheme) params(st *Settings) []Param {
	ps := []Param{{"endpoint", func(v string) error {
		eu, err := url.Parse(v)
		if err != nil || (eu.Scheme != "http" && eu.Scheme != "https") || eu.Host == "" || eu.User != nil || eu.RawQuery != "" {
			return errors.New("must be an http:// or https:// URL without credentials or query")
		}
		st.Endpoint = strings.TrimSuffix(v, "/")
		return nil
	}}}
	if s.Anonymous {
		ps = append(ps, Param{"anonymous", func(v string) (err error) {
			if st.Anonymous, err = strconv.ParseBool(v); err != nil {
				return errors.New("must be true or false")
			}
			return nil
		}})
	}
	return append(append(ps, s.Params...),
		Param{"request_timeout", func(v string) (err error) {
			if st.Timeout, err = time.ParseDuration(v); err != nil || st.Timeout < 100*time.Millisecond || st.Timeout > time.Hour {
				return errors.New("must be a duration from 100ms to 1h")
			}
			return nil
		}},
		Param{"max_attempts", func(v string) (err error) {
			if st.Attempts, err = strconv.Atoi(v); err != nil || st.Attempts < 1 || st.Attempts > MaxAttempts {
				return fmt.Errorf("must be an integer from 1 to %d", MaxAttempts)
			}
			return nil
		}})
}

// readQuery reads the URL parameters, each at most once.
func (c *URL) readQuery(raw string, params []Param) error {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return c.Bad("query does not parse")
	}
	for _, k := range slices.Sorted(maps.Keys(q)) {
		v := q[k]
		i := slices.IndexFunc(params, func(p Param) bool { return p.Name == k })
		switch {
		case i < 0:
			names := make([]string, len(params))
			for j, p := range params {
				names[j] = p.Name
			}
			return c.Bad("unknown parameter %q: the parameters are %s", k, strings.Join(names, ", "))
		case len(v) != 1:
			return c.Bad("parameter %s is given %d times: give it once", k, len(v))
		}
		if err := params[i].Parse(v[0]); err != nil {
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
