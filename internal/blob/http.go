package blob

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/talonhq/talon/internal/redact"
)

// DefaultHTTPTimeout bounds each request of the default HTTP client,
// body included.
const DefaultHTTPTimeout = 60 * time.Second

// HTTP is the http(s):// backend: object k is GET <base>/<k>, each path
// segment escaped, read with Range requests. Safe for concurrent use.
type HTTP struct {
	base       string // scheme://host/path without a trailing slash
	client     *http.Client
	maxDiscard int64
}

// NewHTTP returns the store of the objects below rawURL, an http or https
// URL without credentials, query or fragment. It does no I/O.
func NewHTTP(rawURL string, opts Options) (*HTTP, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: blob-store URL does not parse as a URL", ErrInvalidURL)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%w: blob-store %q: scheme %q is not http or https", ErrInvalidURL, redact.URL(u.String()), u.Scheme)
	case u.Host == "":
		return nil, fmt.Errorf("%w: blob-store %q: no host", ErrInvalidURL, redact.URL(u.String()))
	case u.User != nil:
		// Credentials in the URL would end up in logs and config dumps.
		return nil, fmt.Errorf("%w: blob-store %q: must not carry credentials (user info)", ErrInvalidURL, redact.URL(u.String()))
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, fmt.Errorf("%w: blob-store %q: must not have a query or fragment", ErrInvalidURL, redact.URL(u.String()))
	}
	client := opts.HTTPClient
	if client == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		// Loads of different blocks run concurrently against one host.
		t.MaxIdleConnsPerHost = 32
		client = &http.Client{Transport: t, Timeout: DefaultHTTPTimeout}
	}
	maxDiscard := opts.MaxDiscardBytes
	switch {
	case maxDiscard == 0:
		maxDiscard = DefaultMaxDiscardBytes
	case maxDiscard < 0:
		maxDiscard = 0
	}
	base := u.Scheme + "://" + u.Host + strings.TrimRight(u.EscapedPath(), "/")
	return &HTTP{base: base, client: client, maxDiscard: maxDiscard}, nil
}

// String describes the store for logs.
func (s *HTTP) String() string { return s.base }

// URL returns the URL of object: the base, a slash, and each segment of
// the key path-escaped. The key must be valid.
func (s *HTTP) URL(object string) string {
	var b strings.Builder
	b.Grow(len(s.base) + 1 + len(object) + 16)
	b.WriteString(s.base)
	for seg := range strings.SplitSeq(object, "/") {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(seg))
	}
	return b.String()
}

func (s *HTTP) do(ctx context.Context, method, object, rng string, hdr ...string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, s.URL(object), nil)
	if err != nil {
		return nil, fmt.Errorf("%w: object %q: build request: %w", ErrBackend, object, err)
	}
	if rng != "" {
		req.Header.Set("Range", rng)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := s.client.Do(req)
	if err != nil {
		if cerr := ContextErr(ctx, err); cerr != nil {
			return nil, fmt.Errorf("%s object %q: %w", method, object, cerr)
		}
		return nil, fmt.Errorf("%w: %s object %q: %w", ErrBackend, method, object, err)
	}
	return resp, nil
}

// statusErr maps an unexpected status to ErrNotFound or ErrBackend and
// closes the body.
func (s *HTTP) statusErr(resp *http.Response, method, object string) error {
	drainClose(resp.Body)
	if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone {
		return fmt.Errorf("%w: object %q at %s (HTTP %d)", ErrNotFound, object, s, resp.StatusCode)
	}
	return fmt.Errorf("%w: %s object %q at %s: unexpected HTTP status %s", ErrBackend, method, object, s, resp.Status)
}

// drainClose reads a little of the body so the connection can be reused
// for short error bodies, then closes it.
func drainClose(body io.ReadCloser) {
	_, _ = io.CopyN(io.Discard, body, 4<<10)
	body.Close()
}

// Size asks with HEAD; when the server refuses HEAD or omits
// Content-Length it asks for the first byte and reads the total from
// Content-Range.
func (s *HTTP) Size(ctx context.Context, object string) (int64, error) {
	info, err := s.Stat(ctx, object)
	return info.Size, err
}

// Stat is Size, with the version from the answer's strong ETag (a weak
// one names no exact bytes) or, without one, its Last-Modified. HTTP
// servers keep no checksum Talon can trust.
func (s *HTTP) Stat(ctx context.Context, object string) (Info, error) {
	if err := ValidateKey(object); err != nil {
		return Info{}, err
	}
	resp, err := s.do(ctx, http.MethodHead, object, "")
	if err != nil {
		return Info{}, err
	}
	switch {
	case resp.StatusCode == http.StatusOK && resp.ContentLength >= 0:
		resp.Body.Close()
		return Info{Size: resp.ContentLength, Version: httpVersion(resp.Header)}, nil
	case resp.StatusCode == http.StatusOK, resp.StatusCode == http.StatusMethodNotAllowed, resp.StatusCode == http.StatusNotImplemented:
		resp.Body.Close()
		return s.statByRange(ctx, object)
	default:
		return Info{}, s.statusErr(resp, http.MethodHead, object)
	}
}

// httpVersion is the version an answer names: "etag:" and a strong ETag,
// "lm:" and Last-Modified, or "".
func httpVersion(h http.Header) string {
	if et := h.Get("ETag"); et != "" && !strings.HasPrefix(et, "W/") {
		return NormVersion("etag:" + et)
	}
	if lm := h.Get("Last-Modified"); lm != "" {
		if _, err := http.ParseTime(lm); err == nil {
			return NormVersion("lm:" + lm)
		}
	}
	return ""
}

// conditions are the request headers that make a read answer 412 unless
// the object is still at version.
func conditions(version string) []string {
	if et, ok := strings.CutPrefix(version, "etag:"); ok {
		return []string{"If-Match", et}
	}
	if lm, ok := strings.CutPrefix(version, "lm:"); ok {
		return []string{"If-Unmodified-Since", lm}
	}
	return nil
}

func (s *HTTP) statByRange(ctx context.Context, object string) (Info, error) {
	resp, err := s.do(ctx, http.MethodGet, object, "bytes=0-0")
	if err != nil {
		return Info{}, err
	}
	switch resp.StatusCode {
	case http.StatusPartialContent, http.StatusRequestedRangeNotSatisfiable:
		drainClose(resp.Body)
		_, _, total, err := parseContentRange(resp.Header.Get("Content-Range"))
		if err != nil || total < 0 {
			return Info{}, fmt.Errorf("%w: GET object %q at %s: no object size in Content-Range %q", ErrBackend, object, s, resp.Header.Get("Content-Range"))
		}
		return Info{Size: total, Version: httpVersion(resp.Header)}, nil
	case http.StatusOK:
		// The server ignored Range and is sending the whole object: its
		// length is what we want; do not read the body.
		resp.Body.Close()
		if resp.ContentLength < 0 {
			return Info{}, fmt.Errorf("%w: GET object %q at %s: no Content-Length and no range support", ErrBackend, object, s)
		}
		return Info{Size: resp.ContentLength, Version: httpVersion(resp.Header)}, nil
	default:
		return Info{}, s.statusErr(resp, http.MethodGet, object)
	}
}

// ReadRange streams [off, off+length) with one Range request.
func (s *HTTP) ReadRange(ctx context.Context, object string, off, length int64) (io.ReadCloser, error) {
	return s.ReadVersion(ctx, object, "", off, length)
}

// ReadVersion is ReadRange made conditional on version (If-Match for an
// ETag, If-Unmodified-Since for a Last-Modified): a 412 answer, or an
// answer naming another version, is ErrVersionChanged.
func (s *HTTP) ReadVersion(ctx context.Context, object, version string, off, length int64) (io.ReadCloser, error) {
	if r, err := RemoteRead(object, off, length); r != nil || err != nil {
		return r, err
	}
	last := off + length - 1
	resp, err := s.do(ctx, http.MethodGet, object, "bytes="+strconv.FormatInt(off, 10)+"-"+strconv.FormatInt(last, 10), conditions(version)...)
	if err != nil {
		return nil, err
	}
	if version != "" && resp.StatusCode != http.StatusPreconditionFailed && resp.StatusCode/100 == 2 {
		if got := httpVersion(resp.Header); got != "" && got != version {
			drainClose(resp.Body)
			return nil, fmt.Errorf("%w: object %q at %s is at version %s, not %s", ErrVersionChanged, object, s, got, version)
		}
	}
	switch resp.StatusCode {
	case http.StatusPreconditionFailed:
		drainClose(resp.Body)
		return nil, fmt.Errorf("%w: object %q at %s is no longer at version %s", ErrVersionChanged, object, s, version)
	case http.StatusPartialContent:
		first, end, _, err := parseContentRange(resp.Header.Get("Content-Range"))
		if err != nil || first != off || end > last || end < first {
			resp.Body.Close()
			return nil, fmt.Errorf("%w: GET object %q at %s bytes %d-%d: answered with Content-Range %q", ErrBackend, object, s, off, last, resp.Header.Get("Content-Range"))
		}
		return s.body(ctx, resp, object, end-first+1), nil
	case http.StatusOK:
		if off > s.maxDiscard {
			resp.Body.Close()
			return nil, fmt.Errorf("%w: GET object %q at %s: answered 200 to a Range request for offset %d, more than the %d bytes the store may skip", ErrRangeNotSupported, object, s, off, s.maxDiscard)
		}
		b := s.body(ctx, resp, object, -1)
		if _, err := io.CopyN(io.Discard, b, off); err != nil {
			b.Close()
			if err == io.EOF {
				// The object ends before off: an empty range.
				return io.NopCloser(strings.NewReader("")), nil
			}
			return nil, err
		}
		b.r = io.LimitReader(b.r, length)
		return b, nil
	case http.StatusRequestedRangeNotSatisfiable:
		// The range starts at or past the end of the object.
		drainClose(resp.Body)
		return io.NopCloser(strings.NewReader("")), nil
	default:
		return nil, s.statusErr(resp, http.MethodGet, object)
	}
}

func (s *HTTP) body(ctx context.Context, resp *http.Response, object string, n int64) *backendBody {
	return newBody(ctx, resp.Body, n, object, s, nil)
}

// backendBody is a remote store's response body: read errors become
// ErrBackend, or the caller's context error when that ended the read.
type backendBody struct {
	ctx    context.Context
	body   io.ReadCloser
	r      io.Reader
	object string
	store  fmt.Stringer
	// release is called after body is closed.
	release []func()
}

func (b *backendBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		if cerr := ContextErr(b.ctx, err); cerr != nil {
			return n, fmt.Errorf("read object %q: %w", b.object, cerr)
		}
		return n, fmt.Errorf("%w: read object %q at %s: %w", ErrBackend, b.object, b.store, err)
	}
	return n, err
}

func (b *backendBody) Close() error {
	err := b.body.Close()
	for _, f := range b.release {
		f()
	}
	return err
}

// parseContentRange parses "bytes first-last/total" or "bytes */total"
// (first and last -1) where total may be "*" (-1).
func parseContentRange(h string) (first, last, total int64, err error) {
	bad := fmt.Errorf("malformed Content-Range %q", h)
	rest, ok := strings.CutPrefix(h, "bytes ")
	if !ok {
		return 0, 0, 0, bad
	}
	rng, tot, ok := strings.Cut(rest, "/")
	if !ok {
		return 0, 0, 0, bad
	}
	total = -1
	if tot != "*" {
		if total, err = strconv.ParseInt(tot, 10, 64); err != nil || total < 0 {
			return 0, 0, 0, bad
		}
	}
	if rng == "*" {
		return -1, -1, total, nil
	}
	a, b, ok := strings.Cut(rng, "-")
	if !ok {
		return 0, 0, 0, bad
	}
	if first, err = strconv.ParseInt(a, 10, 64); err != nil || first < 0 {
		return 0, 0, 0, bad
	}
	if last, err = strconv.ParseInt(b, 10, 64); err != nil || last < first {
		return 0, 0, 0, bad
	}
	if total >= 0 && last >= total {
		return 0, 0, 0, bad
	}
	return first, last, total, nil
}
