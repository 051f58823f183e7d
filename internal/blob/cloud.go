package blob

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
)

// cloudSettings are what a gs:// or az:// URL's parameters say.
type cloudSettings struct {
	endpoint  string
	anonymous bool
	timeout   time.Duration
	attempts  int
}

// cloudParams are the parameters gs:// and az:// URLs accept.
var cloudParams = []string{"endpoint", "anonymous", "request_timeout", "max_attempts"}

// cloudParamParsers read each parameter; an error is the text after
// "name=value: ".
var cloudParamParsers = map[string]func(st *cloudSettings, v string) error{
	"endpoint": func(st *cloudSettings, v string) error {
		eu, err := url.Parse(v)
		if err != nil || (eu.Scheme != "http" && eu.Scheme != "https") || eu.Host == "" || eu.User != nil || eu.RawQuery != "" {
			return errors.New("must be an http:// or https:// URL without credentials or query")
		}
		st.endpoint = strings.TrimSuffix(v, "/")
		return nil
	},
	"anonymous": func(st *cloudSettings, v string) (err error) {
		if st.anonymous, err = strconv.ParseBool(v); err != nil {
			return errors.New("must be true or false")
		}
		return nil
	},
	"request_timeout": func(st *cloudSettings, v string) (err error) {
		if st.timeout, err = time.ParseDuration(v); err != nil || st.timeout < 100*time.Millisecond || st.timeout > time.Hour {
			return errors.New("must be a duration from 100ms to 1h")
		}
		return nil
	},
	"max_attempts": func(st *cloudSettings, v string) (err error) {
		if st.attempts, err = strconv.Atoi(v); err != nil || st.attempts < 1 || st.attempts > MaxS3MaxAttempts {
			return fmt.Errorf("must be an integer from 1 to %d", MaxS3MaxAttempts)
		}
		return nil
	},
}

// cloudURL is a parsed gs:// or az:// URL: its host, the path segments
// before the key prefix (none for gs://, the container for az://), the
// prefix ("" or ending in "/") and the parameters; bad builds errors
// that name the URL without its query.
type cloudURL struct {
	host     string
	segments []string
	prefix   string
	settings cloudSettings
	bad      func(format string, args ...any) error
}

// parseCloudURL checks rawURL of scheme, whose path starts with the
// segments named in segNames (each required), and reads its parameters.
// credHint says where the scheme's credentials come from.
func parseCloudURL(rawURL, scheme string, segNames []string, shape, credHint string) (*cloudURL, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: blob-store URL does not parse as a URL", ErrInvalidURL)
	}
	shown := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}
	c := &cloudURL{host: u.Host, settings: cloudSettings{timeout: DefaultS3RequestTimeout, attempts: DefaultS3MaxAttempts}}
	c.bad = func(format string, args ...any) error {
		return fmt.Errorf("%w: blob-store %q: %s", ErrInvalidURL, shown.String(), fmt.Sprintf(format, args...))
	}
	switch {
	case u.Scheme != scheme:
		return nil, c.bad("scheme %q is not %s", u.Scheme, scheme)
	case u.User != nil:
		return nil, c.bad("must not carry credentials (user info): %s", credHint)
	case u.Host == "":
		return nil, c.bad("no %s: write %s", segNamesOr(segNames, "bucket"), shape)
	case u.Fragment != "":
		return nil, c.bad("must not have a fragment")
	}
	path := strings.TrimPrefix(u.Path, "/")
	for _, name := range segNames {
		seg, rest, _ := strings.Cut(path, "/")
		if seg == "" {
			return nil, c.bad("no %s: write %s", name, shape)
		}
		c.segments, path = append(c.segments, seg), rest
	}
	if c.prefix, err = s3Prefix(path); err != nil {
		return nil, c.bad("prefix: %v", err)
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
func (c *cloudURL) readQuery(raw string) error {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return c.bad("query does not parse")
	}
	for _, k := range slices.Sorted(maps.Keys(q)) {
		v := q[k]
		parse, ok := cloudParamParsers[k]
		switch {
		case !ok:
			return c.bad("unknown parameter %q: the parameters are %s", k, strings.Join(cloudParams, ", "))
		case len(v) != 1:
			return c.bad("parameter %s is given %d times: give it once", k, len(v))
		}
		if err := parse(&c.settings, v[0]); err != nil {
			shown := v[0]
			if k == "endpoint" {
				shown = redactParam(shown)
			}
			return c.bad("%s=%q: %v", k, shown, err)
		}
	}
	return nil
}

// cloudHTTPClient is the HTTP client of a gs:// or az:// store: the
// caller's Options.HTTPClient, or one whose Timeout is timeout, both
// following redirects to the same host only (checkS3Redirect): a store,
// or whoever answers for it, cannot send a worker's requests to a host
// the operator never named.
func cloudHTTPClient(opts Options, timeout time.Duration) *http.Client {
	c := http.Client{Timeout: timeout}
	if opts.HTTPClient != nil {
		c = *opts.HTTPClient
	}
	if c.Transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 32
		c.Transport = t
	}
	c.CheckRedirect = checkS3Redirect
	return &c
}

// timedBody is a read's body whose ctx (the request timeout) is released
// when it is closed.
type timedBody struct {
	*backendBody
	cancel func()
}

func (b timedBody) Close() error {
	defer b.cancel()
	return b.backendBody.Close()
}
