package state

import (
	"context"
	"errors"
)

// Sentinel errors. Backends wrap them with %w and their own detail; callers
// check them with errors.Is. The admin server maps them to HTTP statuses and
// the control protocol to wire codes, each in one table.
var (
	// ErrUnavailable: the backend cannot be reached or refuses service. Retryable.
	ErrUnavailable = errors.New("state store unavailable")
	// ErrTimeout: the backend did not answer within the deadline. Retryable.
	ErrTimeout = errors.New("state store timeout")
	// ErrUnauthenticated: the backend rejected the credentials. Not retryable.
	ErrUnauthenticated = errors.New("state store authentication failed")
	// ErrPermissionDenied: authenticated but not allowed. Not retryable.
	ErrPermissionDenied = errors.New("state store permission denied")
	// ErrCompacted: the watch revision is no longer available. Retryable by
	// taking a new snapshot and watching from its revision.
	ErrCompacted = errors.New("state store revision compacted")
	// ErrInvalidRecord: the record breaks a cluster.Record rule. Not retryable.
	ErrInvalidRecord = errors.New("invalid record")
	// ErrRecordTooLarge: the encoded record exceeds cluster.MaxRecordBytes. Not retryable.
	ErrRecordTooLarge = errors.New("record too large")
	// ErrUnsupportedVersion: a stored record has a schema version this build
	// cannot read. Not retryable; snapshots skip such records.
	ErrUnsupportedVersion = errors.New("unsupported record schema version")
	// ErrConflict: optimistic concurrency lost too many races in a row. Retryable.
	ErrConflict = errors.New("state store write conflict")
	// ErrClosed: the store was closed. Not retryable.
	ErrClosed = errors.New("state store closed")
)

// Retryable reports whether an operation that failed with err may succeed
// if repeated without operator action.
func Retryable(err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, ErrUnavailable), errors.Is(err, ErrTimeout),
		errors.Is(err, ErrCompacted), errors.Is(err, ErrConflict),
		errors.Is(err, context.DeadlineExceeded):
		return true
	}
	return false
}

// Code returns a short, bounded name for err's class, for metrics labels and
// wire codes: "unavailable", "timeout", "unauthenticated",
// "permission_denied", "compacted", "invalid", "too_large",
// "unsupported_version", "conflict", "closed", "canceled" or "internal".
func Code(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrUnavailable):
		return "unavailable"
	case errors.Is(err, ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, ErrUnauthenticated):
		return "unauthenticated"
	case errors.Is(err, ErrPermissionDenied):
		return "permission_denied"
	case errors.Is(err, ErrCompacted):
		return "compacted"
	case errors.Is(err, ErrInvalidRecord):
		return "invalid"
	case errors.Is(err, ErrRecordTooLarge):
		return "too_large"
	case errors.Is(err, ErrUnsupportedVersion):
		return "unsupported_version"
	case errors.Is(err, ErrConflict):
		return "conflict"
	case errors.Is(err, ErrClosed):
		return "closed"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return "internal"
}
