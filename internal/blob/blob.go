package blob

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/talonhq/talon/internal/redact"
)

// MaxKeyBytes is the longest object key, in bytes. It leaves room for the
// block suffix of a placement key ("#" and up to 19 decimal digits) within
// the control protocol's 1024-byte PlacementLookup key.
const MaxKeyBytes = 1000

// Sentinel errors, wrapped with %w and detail; check them with errors.Is.
var (
	// ErrNotFound: the object does not exist in the store.
	ErrNotFound = errors.New("object not found")
	// ErrInvalidKey: the object key breaks a rule of ValidateKey.
	ErrInvalidKey = errors.New("invalid object key")
	// ErrBackend: the store failed to answer (I/O error, unexpected HTTP
	// status, client timeout, malformed response). Usually retryable.
	ErrBackend = errors.New("blob store failure")
	// ErrRangeNotSupported: an HTTP server ignored a Range request for an
	// offset beyond Options.MaxDiscardBytes. It also wraps ErrBackend.
	ErrRangeNotSupported = fmt.Errorf("%w: server ignores range requests", ErrBackend)
	// ErrInvalidURL: Open was given a URL it cannot use.
	ErrInvalidURL = errors.New("invalid blob store url")
	// ErrInvalidRange: a negative offset or length.
	ErrInvalidRange = errors.New("invalid range")
	// ErrVersionChanged: the object is no longer at the version a read
	// asked for (it was rewritten or deleted and recreated). Stat again.
	ErrVersionChanged = errors.New("object version changed")
)

// MaxVersionBytes bounds Info.Version. A store's version token longer than
// this (S3 version IDs may be long) is replaced by its SHA-256 in hex,
// prefixed "sha256:", which names the same version as uniquely.
const MaxVersionBytes = 128

// Info describes an object at one version.
type Info struct {
	// Size is the object's length in bytes.
	Size int64
	// Version names the object's content: the S3 version ID or ETag, the
	// HTTP ETag or Last-Modified, a file's size and modification time. Two
	// contents of one key never share a version (a same-size rewrite of a
	// file within one mtime tick is the exception the file backend cannot
	// see). "" when the store cannot tell.
	Version string
	// Checksum is the store's own checksum of the whole object, when it
	// keeps one; the zero value when it does not.
	Checksum Checksum
}

// Versioned is implemented by every backend of this package; a Store that
// lacks it (a test double) is read without versions (see Stat and
// ReadVersion).
type Versioned interface {
	// Stat returns the object's size, version and checksum.
	Stat(ctx context.Context, object string) (Info, error)
	// ReadVersion is ReadRange of the object at version: when the store
	// holds another version it fails with ErrVersionChanged rather than
	// return bytes of another content. An empty version reads whatever is
	// there.
	ReadVersion(ctx context.Context, object, version string, off, length int64) (io.ReadCloser, error)
}

// Stat returns s's Info for object: Versioned.Stat, or only the size.
func Stat(ctx context.Context, s Store, object string) (Info, error) {
	if v, ok := s.(Versioned); ok {
		return v.Stat(ctx, object)
	}
	n, err := s.Size(ctx, object)
	return Info{Size: n}, err
}

// ReadVersion reads [off, off+length) of object at version from s
// (Versioned.ReadVersion, or ReadRange for a store without versions).
func ReadVersion(ctx context.Context, s Store, object, version string, off, length int64) (io.ReadCloser, error) {
	if v, ok := s.(Versioned); ok {
		return v.ReadVersion(ctx, object, version, off, length)
	}
	return s.ReadRange(ctx, object, off, length)
}

// Store reads objects. Implementations are safe for concurrent use.
type Store interface {
	// Size returns the length of object in bytes.
	Size(ctx context.Context, object string) (int64, error)
	// ReadRange streams bytes [off, off+length) of object. A range past
	// the end of the object is cut at the end, so the reader may yield
	// fewer than length bytes before io.EOF; a range starting at or past
	// the end yields none. The caller must Close the reader; ctx bounds
	// the whole read, not only the call.
	ReadRange(ctx context.Context, object string, off, length int64) (io.ReadCloser, error)
}

// KeyError is the error ValidateKey returns: the key and the rule it broke.
// It wraps ErrInvalidKey.
type KeyError struct {
	Key  string
	Rule string
}

func (e *KeyError) Error() string {
	k := e.Key
	if len(k) > 80 {
		k = k[:80] + "..."
	}
	return fmt.Sprintf("object key %q: %s", k, e.Rule)
}

// Unwrap returns ErrInvalidKey.
func (e *KeyError) Unwrap() error { return ErrInvalidKey }

// ValidateKey checks that key is a valid object key: a slash-separated
// relative path of 1 to MaxKeyBytes bytes of valid UTF-8 whose segments are
// not empty, "." or ".." (so no leading, trailing or doubled slash) and
// which contains no NUL, other ASCII control character or backslash. Errors
// are *KeyError wrapping ErrInvalidKey.
func ValidateKey(key string) error {
	switch {
	case key == "":
		return &KeyError{Key: key, Rule: "must not be empty"}
	case len(key) > MaxKeyBytes:
		return &KeyError{Key: key, Rule: fmt.Sprintf("is %d bytes, longer than the limit of %d", len(key), MaxKeyBytes)}
	case !utf8.ValidString(key):
		return &KeyError{Key: key, Rule: "must be valid UTF-8"}
	case key[0] == '/':
		return &KeyError{Key: key, Rule: "must be a relative path (no leading slash)"}
	}
	for i := 0; i < len(key); i++ {
		switch c := key[i]; {
		case c == 0:
			return &KeyError{Key: key, Rule: fmt.Sprintf("contains NUL at byte %d", i)}
		case c == '\\':
			return &KeyError{Key: key, Rule: fmt.Sprintf("contains a backslash at byte %d; use / to separate segments", i)}
		case c < 0x20 || c == 0x7f:
			return &KeyError{Key: key, Rule: fmt.Sprintf("contains control character 0x%02x at byte %d", c, i)}
		}
	}
	for seg := range strings.SplitSeq(key, "/") {
		switch seg {
		case "":
			return &KeyError{Key: key, Rule: "has an empty segment (leading, trailing or doubled slash)"}
		case ".", "..":
			return &KeyError{Key: key, Rule: fmt.Sprintf("has a %q segment", seg)}
		}
	}
	return nil
}

func checkRange(object string, off, length int64) error {
	if off < 0 || length < 0 {
		return fmt.Errorf("%w: object %q offset %d length %d: must not be negative", ErrInvalidRange, object, off, length)
	}
	return nil
}

// Options configure Open. The zero value is usable.
type Options struct {
	// HTTPClient is used by the http(s) backend; nil means a client with
	// DefaultHTTPTimeout. Its Timeout bounds each request including the
	// body; the caller's ctx bounds it too.
	HTTPClient *http.Client
	// MaxDiscardBytes is how many bytes the http(s) backend may read and
	// discard to reach an offset when the server ignores Range. 0 means
	// DefaultMaxDiscardBytes; negative means never discard (fail instead).
	MaxDiscardBytes int64
}

// DefaultMaxDiscardBytes is the default Options.MaxDiscardBytes.
const DefaultMaxDiscardBytes = 64 << 20

// Opener opens the store of a URL of one scheme; OpenerOf makes one of
// a backend's constructor.
type Opener func(rawURL string, opts Options) (Store, error)

// OpenerOf returns an Opener of newStore, the constructor of a backend
// that returns its concrete type (a nil *T is no Store).
func OpenerOf[S Store](newStore func(rawURL string, opts Options) (S, error)) Opener {
	return func(rawURL string, opts Options) (Store, error) {
		s, err := newStore(rawURL, opts)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
}

// Open returns the Store the URL names: file:///dir, http(s)://host/prefix,
// or a URL of a scheme in remote, opened by its Opener. The cloud stores
// (s3://, gs://, az://: packages blob/s3, blob/gcs and blob/azure) are
// each their own package, so that only the wiring that builds remote
// links their SDKs.
// It does no I/O except checking that a file store's directory exists.
// Errors wrap ErrInvalidURL and name the URL (with any password redacted)
// and the rule.
func Open(rawURL string, opts Options, remote map[string]Opener) (Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		// url.Error repeats the raw URL, which may carry a password: say
		// only that it does not parse.
		return nil, fmt.Errorf("%w: blob-store URL does not parse as a URL", ErrInvalidURL)
	}
	if open, ok := remote[u.Scheme]; ok && u.Scheme != "" {
		return open(rawURL, opts)
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("%w: blob-store %q: file URL host must be empty or localhost, got %q (write file:///abs/dir)", ErrInvalidURL, redact.URL(u.String()), u.Host)
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("%w: blob-store %q: file URL must not have a query or fragment", ErrInvalidURL, redact.URL(u.String()))
		}
		return NewFile(u.Path)
	case "http", "https":
		return NewHTTP(rawURL, opts)
	case "":
		return nil, fmt.Errorf("%w: blob-store %q: no scheme; use file:///dir, http(s)://host/prefix%s", ErrInvalidURL, redact.URL(u.String()), remoteShapes(remote))
	default:
		return nil, fmt.Errorf("%w: blob-store %q: scheme %q is not one of %s", ErrInvalidURL, redact.URL(u.String()), u.Scheme, strings.Join(schemes(remote), ", "))
	}
}

// shapes are the URL shapes of the remote schemes Talon has, for errors.
var shapes = map[string]string{"s3": "s3://bucket/prefix", "gs": "gs://bucket/prefix", "az": "az://account/container/prefix"}

// schemes lists file, http, https and remote's schemes: the ones Open
// takes.
func schemes(remote map[string]Opener) []string {
	return append([]string{"file", "http", "https"}, remoteSchemes(remote)...)
}

// remoteSchemes lists remote's schemes in the order s3, gs, az, then any
// other.
func remoteSchemes(remote map[string]Opener) []string {
	return slices.SortedFunc(maps.Keys(remote), func(a, b string) int { return cmp.Compare(shapeRank(a), shapeRank(b)) })
}

// remoteShapes is ", " and the shape of each scheme of remote.
func remoteShapes(remote map[string]Opener) string {
	var b strings.Builder
	for _, s := range remoteSchemes(remote) {
		b.WriteString(", " + cmp.Or(shapes[s], s+"://..."))
	}
	return b.String()
}

func shapeRank(scheme string) string {
	switch scheme {
	case "s3":
		return "0"
	case "gs":
		return "1"
	case "az":
		return "2"
	}
	return "3" + scheme
}

// Lister is implemented by stores that list their keys (s3://, gs://,
// az://, file://; not http://):
// an operator's warm of a prefix needs it.
type Lister interface {
	// List returns the keys under prefix in key order, at most max of
	// them; more is true when there are others.
	List(ctx context.Context, prefix string, max int) (keys []string, more bool, err error)
}

// ErrNoList is the answer of a store that cannot list its keys.
var ErrNoList = errors.New("this blob store cannot list keys (prefixes are supported on s3://, gs://, az:// and file://)")

// Keys gathers a listing's keys for a Lister: those ValidateKey takes,
// at most Max of them.
type Keys struct {
	Max  int
	List []string
}

// Add keeps key unless it is not a valid key; full is true when Max keys
// are kept and key is one more (the listing has more: stop).
func (k *Keys) Add(key string) (full bool) {
	if ValidateKey(key) != nil {
		return false
	}
	if len(k.List) == k.Max {
		return true
	}
	k.List = append(k.List, key)
	return false
}

// List lists s's keys under prefix (Lister), or fails with ErrNoList.
func List(ctx context.Context, s Store, prefix string, max int) ([]string, bool, error) {
	l, ok := s.(Lister)
	if !ok {
		return nil, false, ErrNoList
	}
	return l.List(ctx, prefix, max)
}
