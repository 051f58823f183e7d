package blob

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// This file is what the backends below blob (s3, gcs, azure) share with
// the ones here: the checks before a read, version tokens, response
// bodies and error mapping. They follow the same invariants (doc.go).

// NormVersion bounds a store's version token (see MaxVersionBytes).
func NormVersion(v string) string {
	if len(v) <= MaxVersionBytes && utf8.ValidString(v) && !strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return v
	}
	sum := sha256.Sum256([]byte(v))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// RemoteRead checks a remote store's read before any request: the key and
// the range; an empty range is answered here, with an empty reader. A nil
// reader and error mean the read must go to the store.
func RemoteRead(object string, off, length int64) (io.ReadCloser, error) {
	if err := ValidateKey(object); err != nil {
		return nil, err
	}
	if err := checkRange(object, off, length); err != nil {
		return nil, err
	}
	if length == 0 {
		return io.NopCloser(strings.NewReader("")), nil
	}
	return nil, nil
}

// ContextErr reports the caller's ctx error, if its ctx has ended, so that
// backends return it instead of ErrBackend.
func ContextErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%w (%v)", cerr, err)
	}
	return nil
}

// DigestSize returns the length in bytes of a checksum of algorithm alg
// (SHA256, CRC32C, ...), 0 for an algorithm this package does not know.
func DigestSize(alg string) int { return checksumLen[alg] }

// NewBody returns a remote store's response body for object: at most n
// bytes of body (all of it when n < 0). Read errors become ErrBackend
// naming the object and store, or the caller's context error when ctx
// ended the read. Close closes body, then calls each of release (the
// cancel of a request timeout's context, say).
func NewBody(ctx context.Context, body io.ReadCloser, n int64, object string, store fmt.Stringer, release ...func()) io.ReadCloser {
	return newBody(ctx, body, n, object, store, release)
}

func newBody(ctx context.Context, body io.ReadCloser, n int64, object string, store fmt.Stringer, release []func()) *backendBody {
	var r io.Reader = body
	if n >= 0 {
		r = io.LimitReader(body, n)
	}
	return &backendBody{ctx: ctx, body: body, r: r, object: object, store: store, release: release}
}
