package datav1

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/talonhq/talon/internal/blob"
	"github.com/talonhq/talon/internal/pki"
	"github.com/talonhq/talon/internal/placement"
)

// Sentinel errors of Fetch; a server's answer is an *Error that wraps one.
var (
	// ErrWrongOwner: 421, the worker does not own a block of the range.
	// Refresh placement (the *Error carries the worker's version).
	ErrWrongOwner = errors.New("wrong owner")
	// ErrNotFound: 404, no such object.
	ErrNotFound = errors.New("object not found")
	// ErrRangeNotSatisfiable: 416, the offset is at or past the end.
	ErrRangeNotSatisfiable = errors.New("range not satisfiable")
	// ErrBadRequest: 400 or 405, the request broke a rule.
	ErrBadRequest = errors.New("bad request")
	// ErrUnavailable: 503, the worker is starting, draining or closing.
	// Try a replica.
	ErrUnavailable = errors.New("worker unavailable")
	// ErrBackend: 502, the worker could not load from the blob store.
	ErrBackend = errors.New("worker's blob store failed")
	// ErrServer: 500 or another unexpected status.
	ErrServer = errors.New("worker error")
	// ErrProtocol: the answer broke the protocol (missing or inconsistent
	// Content-Length or object size, a body shorter than announced).
	ErrProtocol = errors.New("invalid data server response")
	// ErrIdentity: over TLS, the worker's certificate names another node.
	ErrIdentity = errors.New("data server identity")
	// ErrVersionChanged: 412, the store holds another version of the
	// object than the request's (the *Error's ObjectVersion is the current
	// one), or an answer was of another version than the one asked for.
	ErrVersionChanged = errors.New("object version changed")
	// ErrRateLimited: 429, too many digests of blocks the worker does not
	// own (rate_limited), or too many reads that go to its store
	// (resource_exhausted). Ask another worker, or later.
	ErrRateLimited = errors.New("rate limited")
	// ErrForbidden: the worker refuses the credential (403 forbidden: a
	// worker's, a revoked one).
	ErrForbidden = errors.New("credential refused")
)

// Error is a data server's error answer.
type Error struct {
	Addr    string
	Status  int
	Code    string
	Message string
	// Version is the worker's placement version, when it sent one
	// (always with ErrWrongOwner).
	Version    uint64
	HasVersion bool
	// ObjectVersion is the object's current version (with
	// ErrVersionChanged).
	ObjectVersion string
	kind          error
}

func (e *Error) Error() string {
	return fmt.Sprintf("data server %s: HTTP %d %s: %s", e.Addr, e.Status, e.Code, e.Message)
}

// Unwrap returns the sentinel for the status.
func (e *Error) Unwrap() error { return e.kind }

// Request is one range read.
type Request struct {
	// Addr is the worker's data address, host:port.
	Addr   string
	Object string
	// Offset and Length give the range; Length must be positive. The
	// answer is cut at the end of the object.
	Offset, Length int64
	// Replicas is the replica count the placement lookup used; 0 means 1.
	Replicas int
	// Version is the PlacementVersion the placement lookup returned.
	Version uint64
	// ObjectVersion, when set, is the only object version the answer may
	// be of (the version parameter).
	ObjectVersion string
	// Fresh asks the worker to revalidate the object's version with the
	// store first (the fresh parameter).
	Fresh bool
	// Last tells the worker that the client has no other owner of the
	// block left to ask (the last parameter): a worker warming up waits
	// for its rate rather than answer 503 warming_up.
	Last bool
	// TLS selects https (the http.Client's transport carries the mutual
	// TLS configuration). Node, when set with TLS, is the node ID the
	// worker's certificate must name: an answer from any other identity is
	// refused with ErrIdentity before its body is read.
	TLS  bool
	Node string
	// Buffer, when not nil, is the scratch buffer FetchTo copies the body
	// through to a writer that is not a *bytes.Buffer (see CopyBufferSize);
	// a caller that reads many blocks passes the same one each time. Nil
	// allocates one per call.
	Buffer []byte
}

// Result describes a successful read.
type Result struct {
	// Data holds the bytes (Fetch only).
	Data []byte
	// N is the number of bytes read: min(Length, ObjectSize-Offset).
	N int64
	// ObjectSize is the object's size.
	ObjectSize int64
	// Version is the worker's placement version.
	Version uint64
	// ObjectVersion is the object version the bytes are of.
	ObjectVersion string
}

// URL returns the request URL of req.
func (req *Request) URL() string { return req.url(PathPrefix) }

// DigestURL returns the URL of the digest of req's range.
func (req *Request) DigestURL() string { return req.url(DigestPrefix) }

func (req *Request) url(prefix string) string {
	var b strings.Builder
	if req.TLS {
		b.WriteString("https://")
	} else {
		b.WriteString("http://")
	}
	b.WriteString(req.Addr)
	b.WriteString(prefix[:len(prefix)-1])
	for seg := range strings.SplitSeq(req.Object, "/") {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(seg))
	}
	replicas := max(req.Replicas, 1)
	fmt.Fprintf(&b, "?offset=%d&length=%d&replicas=%d", req.Offset, req.Length, replicas)
	if req.ObjectVersion != "" {
		b.WriteString("&version=")
		b.WriteString(url.QueryEscape(req.ObjectVersion))
	}
	if req.Fresh {
		b.WriteString("&fresh=1")
	}
	if req.Last {
		b.WriteString("&last=1")
	}
	return b.String()
}

// Fetch reads the range of req into memory. See FetchTo.
func Fetch(ctx context.Context, hc *http.Client, req Request) (*Result, error) {
	var buf bytes.Buffer
	res, err := fetch(ctx, hc, req, &buf)
	if err != nil {
		return nil, err
	}
	res.Data = buf.Bytes()
	return res, nil
}

// FetchTo reads the range of req and writes it to w, verifying that the
// worker sent exactly the bytes the range holds: Content-Length must equal
// min(Length, ObjectSize-Offset) and the body must be that long. On error
// w may have received a prefix of the range. Connection failures are
// returned as they come (wrapped); answers are *Error.
func FetchTo(ctx context.Context, hc *http.Client, req Request, w io.Writer) (*Result, error) {
	return fetch(ctx, hc, req, w)
}

func (req *Request) check() error {
	if err := blob.ValidateKey(req.Object); err != nil {
		return err
	}
	if req.Offset < 0 || req.Length <= 0 {
		return fmt.Errorf("%w: offset %d length %d: offset must be 0 or more and length positive", ErrBadRequest, req.Offset, req.Length)
	}
	if req.Replicas < 0 || req.Replicas > MaxReplicas {
		return fmt.Errorf("%w: replicas %d: must be from 1 to %d", ErrBadRequest, req.Replicas, MaxReplicas)
	}
	if len(req.ObjectVersion) > MaxVersionBytes {
		return fmt.Errorf("%w: object version of %d bytes: at most %d", ErrBadRequest, len(req.ObjectVersion), MaxVersionBytes)
	}
	return nil
}

// do sends a GET for url and returns a 200 answer from the expected
// identity; other answers are *Error.
func (req *Request) do(ctx context.Context, hc *http.Client, what, url string) (*http.Response, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("%s %q from %s: %w", what, req.Object, req.Addr, err)
	}
	hreq.Header.Set(VersionHeader, placement.Version(req.Version).String())
	resp, err := hc.Do(hreq)
	if err != nil {
		return nil, fmt.Errorf("%s %q from %s: %w", what, req.Object, req.Addr, err)
	}
	if req.TLS && req.Node != "" {
		id, err := pki.PeerIdentity(resp.TLS)
		if err == nil {
			err = pki.Expect{Roles: []pki.Role{pki.RoleWorker}, NodeID: req.Node}.Check(id)
		}
		if err != nil {
			resp.Body.Close()
			return nil, fmt.Errorf("%w: %s %q from %s: %w", ErrIdentity, what, req.Object, req.Addr, err)
		}
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, answerError(req.Addr, resp)
	}
	return resp, nil
}

// FetchDigest asks the worker at req.Addr for the SHA-256 of req's range.
// Any worker answers, owner or not.
func FetchDigest(ctx context.Context, hc *http.Client, req Request) (*Digest, error) {
	if err := req.check(); err != nil {
		return nil, err
	}
	resp, err := req.do(ctx, hc, "digest of", req.DigestURL())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var d Digest
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<10)).Decode(&d); err != nil {
		return nil, protocolErr(req, "digest answer: %v", err)
	}
	if d.Object != req.Object || d.Offset != req.Offset || d.Length != max(min(req.Length, d.ObjectSize-req.Offset), 0) || len(d.SHA256) != 64 {
		return nil, protocolErr(req, "digest answer for %q offset %d length %d (object size %d, sha256 %q) does not match the request", d.Object, d.Offset, d.Length, d.ObjectSize, d.SHA256)
	}
	if req.ObjectVersion != "" && d.Version != req.ObjectVersion {
		return nil, fmt.Errorf("%w: digest of %q from %s is of version %q, not %q", ErrVersionChanged, req.Object, req.Addr, d.Version, req.ObjectVersion)
	}
	return &d, nil
}

func fetch(ctx context.Context, hc *http.Client, req Request, w io.Writer) (*Result, error) {
	if err := req.check(); err != nil {
		return nil, err
	}
	resp, err := req.do(ctx, hc, "fetch", req.URL())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	res := &Result{}
	if v, err := placement.ParseVersion(resp.Header.Get(VersionHeader)); err == nil {
		res.Version = uint64(v)
	}
	res.ObjectSize, err = strconv.ParseInt(resp.Header.Get(ObjectSizeHeader), 10, 64)
	if err != nil || res.ObjectSize < 0 {
		return nil, protocolErr(req, "header %s is %q", ObjectSizeHeader, resp.Header.Get(ObjectSizeHeader))
	}
	res.ObjectVersion = resp.Header.Get(ObjectVersionHeader)
	if req.ObjectVersion != "" && res.ObjectVersion != req.ObjectVersion {
		return nil, fmt.Errorf("%w: %q from %s is of version %q, not %q", ErrVersionChanged, req.Object, req.Addr, res.ObjectVersion, req.ObjectVersion)
	}
	want := max(min(req.Length, res.ObjectSize-req.Offset), 0)
	if resp.ContentLength != want {
		return nil, protocolErr(req, "Content-Length is %d, want %d (offset %d, length %d, object size %d)", resp.ContentLength, want, req.Offset, req.Length, res.ObjectSize)
	}
	n, err := copyBody(w, io.LimitReader(resp.Body, want), want, req.Buffer)
	res.N = n
	if err != nil {
		return nil, fmt.Errorf("%w: fetch %q from %s: body ended after %d of %d bytes: %w", ErrProtocol, req.Object, req.Addr, n, want, err)
	}
	if n != want {
		return nil, protocolErr(req, "body ended after %d of %d bytes", n, want)
	}
	return res, nil
}

// CopyBufferSize is the buffer FetchTo copies a body through when its
// writer has no ReadFrom: each read(2) of the connection takes up to this
// much of what the socket holds, where 32 or 64 KiB would cost several
// system calls (and wake-ups of the writer) per socket buffer's worth.
const CopyBufferSize = 256 << 10

// copyBody copies the n bytes of body to w. A *bytes.Buffer (Fetch, and
// client.ObjectReader) reads straight into its own storage, without a
// buffer in between. Any other writer gets buf, or a new buffer of
// CopyBufferSize (smaller for a shorter body) when buf is nil, even one
// with a ReadFrom: an *os.File's ReadFrom can splice only from a socket
// or a file, and falls back on a 32 KiB buffer for an HTTP body.
func copyBody(w io.Writer, body io.Reader, n int64, buf []byte) (int64, error) {
	if b, ok := w.(*bytes.Buffer); ok {
		// ReadFrom wants MinRead bytes free before each read: with the
		// margin, a last read that returns only EOF (the body's final
		// bytes came without it) cannot reallocate and copy the buffer.
		b.Grow(int(n) + bytes.MinRead)
		return b.ReadFrom(body)
	}
	if len(buf) == 0 {
		buf = make([]byte, max(min(n, CopyBufferSize), 512))
	}
	return io.CopyBuffer(struct{ io.Writer }{w}, body, buf)
}

func protocolErr(req Request, format string, args ...any) error {
	return fmt.Errorf("%w: fetch %q from %s: %s", ErrProtocol, req.Object, req.Addr, fmt.Sprintf(format, args...))
}

// answerError decodes an error answer.
func answerError(addr string, resp *http.Response) *Error {
	e := &Error{Addr: addr, Status: resp.StatusCode}
	var body ErrorBody
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<10)).Decode(&body); err == nil {
		e.Code, e.Message = body.Error.Code, body.Error.Message
	} else {
		e.Message = http.StatusText(resp.StatusCode)
	}
	if v, err := placement.ParseVersion(resp.Header.Get(VersionHeader)); err == nil {
		e.Version, e.HasVersion = uint64(v), true
	}
	switch resp.StatusCode {
	case http.StatusMisdirectedRequest:
		e.kind = ErrWrongOwner
	case http.StatusNotFound:
		e.kind = ErrNotFound
		if e.Code == CodeUnknownPath {
			e.kind = ErrServer
		}
	case http.StatusRequestedRangeNotSatisfiable:
		e.kind = ErrRangeNotSatisfiable
	case http.StatusBadRequest, http.StatusMethodNotAllowed:
		e.kind = ErrBadRequest
	case http.StatusServiceUnavailable:
		e.kind = ErrUnavailable
	case http.StatusBadGateway:
		e.kind = ErrBackend
	case http.StatusPreconditionFailed:
		e.kind = ErrVersionChanged
		e.ObjectVersion = resp.Header.Get(ObjectVersionHeader)
	case http.StatusTooManyRequests:
		e.kind = ErrRateLimited
	case http.StatusForbidden:
		e.kind = ErrForbidden
	default:
		e.kind = ErrServer
	}
	return e
}
