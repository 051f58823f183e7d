package apiv1

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"
)

// Client defaults.
const (
	// DefaultTimeout bounds one attempt against one base URL.
	DefaultTimeout = 10 * time.Second
	// DefaultAttemptTimeout bounds an attempt until the server's response
	// headers arrive (connect, TLS, request, headers), so that a server
	// that accepts connections and never answers (a stopped process, a
	// partition) costs this long before the next base URL is tried, not
	// the whole Timeout.
	DefaultAttemptTimeout = 3 * time.Second
	// MaxResponseBytes bounds a response body the client reads. A full page
	// of 1000 nodes at the 16 KiB record limit fits.
	MaxResponseBytes = 64 << 20
	// maxPages bounds AllNodes against a server that never ends a listing.
	maxPages = 100_000
)

// ClientOptions configures a Client. The zero value is valid: no token,
// plain HTTP, DefaultTimeout.
type ClientOptions struct {
	// Token is the bearer token sent with every request; empty sends none.
	// It never appears in errors.
	Token string
	// HTTPClient is the HTTP client to use; default a new one with TLS.
	// Its redirect policy is replaced: the API never redirects, and
	// following one could hand the token to another server.
	HTTPClient *http.Client
	// TLS configures HTTPS when HTTPClient is nil (CA pool, server name).
	TLS *tls.Config
	// Timeout bounds each attempt against one base URL (connect, request
	// and the whole response); default DefaultTimeout. The ctx passed to a
	// method bounds the call as a whole.
	Timeout time.Duration
	// AttemptTimeout bounds each attempt until the response headers
	// arrive; default DefaultAttemptTimeout, at most Timeout. A watch's
	// wait is added to it (its server answers when something happens).
	AttemptTimeout time.Duration
	// UserAgent is sent as User-Agent; default "talon-apiv1".
	UserAgent string
	// Clock is used to interpret an HTTP-date Retry-After; default time.Now.
	Clock func() time.Time
	// Memory, when set, is shared with the other clients of the same run:
	// the base URL that last answered is tried first and one that gave no
	// answer is not asked again (see ServerMemory).
	Memory *ServerMemory
}

// Client calls the /api/v1 API of one or more administration listeners,
// typically the coordinators of one cluster behind or beside a load
// balancer. A call goes to the base URL that last answered and fails over
// to the next when it cannot connect or gets 503 (a coordinator without a
// current snapshot). A Client is safe for concurrent use.
type Client struct {
	bases  []string // validated, without trailing slash
	token  string
	hc     *http.Client
	ua     string
	tmo    time.Duration
	header time.Duration // AttemptTimeout
	now    func() time.Time
	prefer atomic.Int64  // index into bases of the last one that answered
	memory *ServerMemory // nil: none shared
}

// NewClient returns a client for baseURLs, tried in order. A base URL is
// scheme://host:port with an optional path prefix (when the listener sits
// behind a reverse proxy under a path); a bare host:port gets https:// when
// opts.TLS is set and http:// otherwise. Credentials in a URL are refused:
// pass the token in opts.Token.
func NewClient(baseURLs []string, opts ClientOptions) (*Client, error) {
	if len(baseURLs) == 0 {
		return nil, errors.New("apiv1 client: at least one base URL is required")
	}
	c := &Client{token: opts.Token, ua: opts.UserAgent, tmo: opts.Timeout, now: opts.Clock, memory: opts.Memory}
	for i, raw := range baseURLs {
		b, err := normalizeBase(raw, opts.TLS != nil)
		if err != nil {
			return nil, fmt.Errorf("server URL %d of %d: %w", i+1, len(baseURLs), err)
		}
		c.bases = append(c.bases, b)
	}
	if c.ua == "" {
		c.ua = "talon-apiv1"
	}
	if c.tmo <= 0 {
		c.tmo = DefaultTimeout
	}
	c.header = min(cmp.Or(max(opts.AttemptTimeout, 0), DefaultAttemptTimeout), c.tmo)
	if c.now == nil {
		c.now = time.Now
	}
	var hc http.Client
	if opts.HTTPClient != nil {
		hc = *opts.HTTPClient
	} else {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.Proxy = nil // admin listeners are internal; never route through an environment proxy
		if opts.TLS != nil {
			tr.TLSClientConfig = opts.TLS.Clone()
		}
		hc.Transport = tr
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c.hc = &hc
	return c, nil
}

func normalizeBase(raw string, tls bool) (string, error) {
	s := strings.TrimSpace(raw)
	if s == "" {
		return "", errors.New(`"": must not be empty`)
	}
	if !strings.Contains(s, "://") {
		if tls {
			s = "https://" + s
		} else {
			s = "http://" + s
		}
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "", fmt.Errorf("%q: %v", RedactUserInfo(raw), RedactUserInfo(fmt.Sprint(errors.Unwrap(err))))
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("%q: scheme must be http or https", redactURL(u))
	case u.Host == "":
		return "", fmt.Errorf("%q: must name a host", redactURL(u))
	case u.User != nil:
		return "", fmt.Errorf("%q: must not carry credentials (a user name or password): send a bearer token instead", redactURL(u))
	case u.RawQuery != "" || u.Fragment != "":
		return "", fmt.Errorf("%q: must not have a query or fragment", redactURL(u))
	}
	return strings.TrimRight(u.Scheme+"://"+u.Host+u.EscapedPath(), "/"), nil
}

// redactURL is u without its user information, for messages: a URL
// with credentials is refused without repeating them.
func redactURL(u *url.URL) string {
	r := *u
	r.User = nil
	return r.Scheme + "://" + r.Host + r.EscapedPath()
}

// RedactUserInfo removes what looks like user information (user:password@)
// from the authority of every URL in s, for messages that quote what a
// user typed, which may not parse.
func RedactUserInfo(s string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "://")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i+3])
		s = s[i+3:]
		end := strings.IndexAny(s, "/?# \t\"'")
		if end < 0 {
			end = len(s)
		}
		if at := strings.LastIndex(s[:end], "@"); at >= 0 {
			b.WriteString("REDACTED@")
			s = s[at+1:]
		}
	}
}

// BaseURLs returns the normalized base URLs in failover order.
func (c *Client) BaseURLs() []string { return slices.Clone(c.bases) }

// CallOption modifies one call.
type CallOption func(*callOptions)

type callOptions struct {
	allowStale bool
	role       string
	raw        func([]byte)
}

// RawBody hands f the body of every 200 answer of the call, byte for byte,
// before it is decoded: one body per page for AllNodes. A caller that
// prints the API's objects prints these, so that fields a newer server
// added, which the decoded types do not know, are kept. The slice is not
// reused; f may keep it.
func RawBody(f func(body []byte)) CallOption { return func(o *callOptions) { o.raw = f } }

// AllowStale asks a coordinator that cannot read the store to answer from
// its last good snapshot instead of 503. Such answers have Meta.Stale set
// and Meta.ObservedAtUnixMs tell how old they are; show them as stale. With
// a current snapshot the answer is fresh as usual.
func AllowStale() CallOption { return func(o *callOptions) { o.allowStale = true } }

// applyOptions returns q with the options' query parameters, and the
// RawBody function (nil when none).
func applyOptions(q url.Values, opts []CallOption) (url.Values, func([]byte)) {
	var o callOptions
	for _, f := range opts {
		f(&o)
	}
	if q == nil && (o.allowStale || o.role != "") {
		q = url.Values{}
	}
	if o.allowStale {
		q.Set(ParamAllowStale, "true")
	}
	if o.role != "" {
		q.Set(ParamRole, o.role)
	}
	return q, o.raw
}

// NodeFilter selects nodes in Nodes and AllNodes. Zero fields do not filter.
type NodeFilter struct {
	Role   string // coordinator or worker
	Health string // effective health: healthy, degraded, unhealthy or unknown
	Ready  *bool
	// Labels must all match (label key=value, exact).
	Labels map[string]string
	// LabelSelector is a Kubernetes label selector ("zone in (a,b),!spot");
	// empty selects everything. The server parses it.
	LabelSelector string
}

func (f NodeFilter) query() url.Values {
	q := url.Values{}
	if f.Role != "" {
		q.Set(ParamRole, f.Role)
	}
	if f.Health != "" {
		q.Set(ParamHealth, f.Health)
	}
	if f.Ready != nil {
		q.Set(ParamReady, strconv.FormatBool(*f.Ready))
	}
	for _, k := range slices.Sorted(maps.Keys(f.Labels)) {
		q.Add(ParamLabel, k+"="+f.Labels[k])
	}
	if f.LabelSelector != "" {
		q.Set(ParamLabelSelector, f.LabelSelector)
	}
	return q
}

// Cluster returns the cluster summary (coordinators only).
func (c *Client) Cluster(ctx context.Context, opts ...CallOption) (*Cluster, error) {
	var out Cluster
	q, raw := applyOptions(nil, opts)
	if err := c.getJSON(ctx, PathCluster, q, raw, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Nodes returns one page of nodes matching filter, ordered by role then
// node ID. limit 0 means the server's DefaultLimit; cont is the previous
// page's Continue, empty for the first page. Pages are read at different
// snapshots: a node that changes role or appears between pages may be
// missed or seen twice, never reordered.
func (c *Client) Nodes(ctx context.Context, filter NodeFilter, limit int, cont string, opts ...CallOption) (*NodeList, error) {
	q := filter.query()
	if limit != 0 {
		q.Set(ParamLimit, strconv.Itoa(limit))
	}
	if cont != "" {
		q.Set(ParamContinue, cont)
	}
	var out NodeList
	q, raw := applyOptions(q, opts)
	if err := c.getJSON(ctx, PathNodes, q, raw, &out); err != nil {
		return nil, err
	}
	if out.Items == nil {
		out.Items = []Node{}
	}
	return &out, nil
}

// AllNodes follows the pagination of Nodes with MaxLimit pages and returns
// every matching node in one list, whose Meta is the last page's.
func (c *Client) AllNodes(ctx context.Context, filter NodeFilter, opts ...CallOption) (*NodeList, error) {
	all := &NodeList{Items: []Node{}}
	cont := ""
	for range maxPages {
		page, err := c.Nodes(ctx, filter, MaxLimit, cont, opts...)
		if err != nil {
			return nil, err
		}
		all.Items = append(all.Items, page.Items...)
		all.Meta = page.Meta
		if page.Continue == "" {
			return all, nil
		}
		if page.Continue == cont {
			return nil, fmt.Errorf("admin api: listing nodes: the server returned continue token %q twice", cont)
		}
		cont = page.Continue
	}
	return nil, fmt.Errorf("admin api: listing nodes: more than %d pages", maxPages)
}

// Node returns one node. A node that is absent or whose lease expired is
// an *APIError matching ErrNotFound.
func (c *Client) Node(ctx context.Context, nodeID string, opts ...CallOption) (*NodeResponse, error) {
	if nodeID == "" {
		return nil, errors.New("admin api: node ID must not be empty")
	}
	var out NodeResponse
	q, raw := applyOptions(nil, opts)
	if err := c.getJSON(ctx, PathNodes+"/"+url.PathEscape(nodeID), q, raw, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Placement explains the placement of key for replicas owners (1 to 16).
func (c *Client) Placement(ctx context.Context, key string, replicas int, opts ...CallOption) (*Placement, error) {
	q := url.Values{ParamKey: {key}}
	if replicas > 0 { // 0: the replicas the cluster's clients read with
		q.Set(ParamReplicas, strconv.Itoa(replicas))
	}
	var out Placement
	q, raw := applyOptions(q, opts)
	if err := c.getJSON(ctx, PathPlacement, q, raw, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Status returns a worker's own status (workers only).
func (c *Client) Status(ctx context.Context) (*Status, error) {
	var out Status
	if err := c.getJSON(ctx, PathStatus, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// OpenAPIDocument fetches the server's OpenAPI document, byte for byte.
func (c *Client) OpenAPIDocument(ctx context.Context) ([]byte, error) {
	var out []byte
	err := c.do(ctx, PathOpenAPI, nil, true, func(resp *http.Response, base string) error {
		body, err := readBody(resp)
		if err != nil {
			return fmt.Errorf("admin api %s: reading %s: %w", base, PathOpenAPI, err)
		}
		if resp.StatusCode != http.StatusOK {
			return c.apiError(resp, body, base)
		}
		if !json.Valid(body) {
			return fmt.Errorf("admin api %s: decoding %s: not JSON", base, PathOpenAPI)
		}
		out = body
		return nil
	})
	return out, err
}

// Healthz probes liveness of the first reachable server. Probes fail over
// only when a server cannot be reached; to probe one process, use a client
// with its URL alone.
func (c *Client) Healthz(ctx context.Context) (*Health, error) {
	return c.probe(ctx, PathHealthz)
}

// Readyz probes readiness of the first reachable server. A not-ready
// answer (503 with a readiness body) is returned as a Health whose Ready
// is false and a nil error; Reasons are present when the server gives
// them.
func (c *Client) Readyz(ctx context.Context) (*Health, error) {
	return c.probe(ctx, PathReadyz)
}

func (c *Client) probe(ctx context.Context, path string) (*Health, error) {
	var out Health
	err := c.do(ctx, path, nil, false, func(resp *http.Response, base string) error {
		if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusServiceUnavailable {
			body, err := readBody(resp)
			if err == nil && json.Unmarshal(body, &out) == nil && out.Status != "" {
				return nil
			}
			return c.apiError(resp, body, base)
		}
		body, _ := readBody(resp)
		return c.apiError(resp, body, base)
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// getJSON GETs path?q and decodes a 200 answer into out, after handing
// its body to raw (when not nil).
func (c *Client) getJSON(ctx context.Context, path string, q url.Values, raw func([]byte), out any) error {
	return c.do(ctx, path, q, true, func(resp *http.Response, base string) error {
		body, err := readBody(resp)
		if err != nil {
			return fmt.Errorf("admin api %s: reading %s: %w", base, path, err)
		}
		if resp.StatusCode != http.StatusOK {
			return c.apiError(resp, body, base)
		}
		if err := json.Unmarshal(body, out); err != nil {
			return fmt.Errorf("admin api %s: decoding %s: %w", base, path, err)
		}
		if raw != nil {
			raw(body)
		}
		return nil
	})
}

// do runs one GET with failover. handle reads the response of a server
// that answered; it is not called for the 503s that fail over.
func (c *Client) do(ctx context.Context, path string, q url.Values, failover503 bool, handle func(*http.Response, string) error) error {
	return c.doMethod(ctx, http.MethodGet, path, q, failover503, handle)
}

// doMethod is do for any method without a body.
func (c *Client) doMethod(ctx context.Context, method, path string, q url.Values, failover503 bool, handle func(*http.Response, string) error) error {
	n := len(c.bases)
	first := int(c.prefer.Load())
	order := make([]int, n)
	for i := range n {
		order[i] = (first + i) % n
	}
	if c.memory != nil {
		order = c.memory.order(c.bases, first)
	}
	var errs []error
	for i, idx := range order {
		base := c.bases[idx]
		if c.memory != nil {
			if err := c.memory.skip(base); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		resp, cancel, err := c.attempt(ctx, method, base, path, q)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("admin api: %s %s: %w", method, path, ctx.Err())
			}
			if c.memory != nil {
				c.memory.noteSilent(base, err)
			}
			errs = append(errs, err)
			continue
		}
		if failover503 && resp.StatusCode == http.StatusServiceUnavailable && i < n-1 {
			body, _ := readBody(resp)
			cancel()
			errs = append(errs, c.apiError(resp, body, base))
			continue
		}
		c.prefer.Store(int64(idx))
		if c.memory != nil {
			c.memory.noteAnswer(base)
		}
		err = handle(resp, base)
		cancel()
		return err
	}
	return fmt.Errorf("%w: %s %s: %w", ErrUnavailable, method, path, errors.Join(errs...))
}

// attempt sends one request to base. On success the caller closes the body
// by calling cancel after reading it.
func (c *Client) attempt(ctx context.Context, method, base, path string, q url.Values) (*http.Response, context.CancelFunc, error) {
	u := base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	tmo, header := c.tmo, c.header
	if c.memory != nil && c.memory.probing(base) {
		header = min(header, ProbeAttemptTimeout)
	}
	if w, ok := ctx.Value(watchKey{}).(time.Duration); ok {
		tmo, header = tmo+w, header+w // a watch waits up to w before it answers
	}
	actx, cancel := context.WithTimeout(ctx, tmo)
	// Until the headers arrive the attempt has the shorter deadline: a
	// server that never answers costs that long, then the next is tried.
	var headerLate atomic.Bool
	headerTimer := time.AfterFunc(header, func() { headerLate.Store(true); cancel() })
	req, err := http.NewRequestWithContext(actx, method, u, nil)
	if err != nil {
		cancel()
		return nil, nil, fmt.Errorf("%s: %w", base, err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.ua)
	if method != http.MethodGet && method != http.MethodHead {
		req.Header.Set(HeaderRequest, "1") // a write: proves it is no other site's page
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	headerTimer.Stop()
	if headerLate.Load() {
		// The header deadline fired (as the answer arrived, at the
		// latest): the server did not answer in time.
		if err == nil {
			_ = resp.Body.Close()
			err = context.DeadlineExceeded
		}
		err = fmt.Errorf("%s: no response headers within the attempt deadline %s: %w", base, header, err)
	}
	if err != nil {
		cancel()
		return nil, nil, err // *url.Error: method, URL and cause, never headers
	}
	return resp, func() { _ = resp.Body.Close(); cancel() }, nil
}

func readBody(resp *http.Response) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxResponseBytes {
		return nil, fmt.Errorf("response body exceeds %d bytes", MaxResponseBytes)
	}
	return b, nil
}

// plainLine returns body when it is one short line of printable text
// (not JSON, not HTML), trimmed; else "".
func plainLine(body []byte) string {
	t := strings.TrimSpace(string(body))
	if t == "" || len(t) > 200 || strings.ContainsAny(t, "\n<{") || !utf8.ValidString(t) {
		return ""
	}
	for _, r := range t {
		if !unicode.IsPrint(r) {
			return ""
		}
	}
	return t
}

// apiError builds the *APIError of a non-200 answer.
func (c *Client) apiError(resp *http.Response, body []byte, base string) *APIError {
	e := &APIError{
		Server:     base,
		HTTPStatus: resp.StatusCode,
		RetryAfter: ParseRetryAfter(resp.Header.Get("Retry-After"), c.now()),
	}
	var er ErrorResponse
	if json.Unmarshal(body, &er) == nil && er.Error.Code != "" {
		e.Code, e.Message, e.Parameter, e.Retryable = er.Error.Code, er.Error.Message, er.Error.Parameter, er.Error.Retryable
		return e
	}
	e.Code = codeForStatus(resp.StatusCode)
	e.Message = http.StatusText(resp.StatusCode)
	if t := plainLine(body); t != "" {
		// A short plain-text answer says more than the status: Go's TLS
		// server's "Client sent an HTTP request to an HTTPS server.", a
		// proxy's one-line error.
		e.Message += ": " + t
	}
	e.Retryable = resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusBadGateway || resp.StatusCode == http.StatusGatewayTimeout
	return e
}
