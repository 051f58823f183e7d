package apiv1

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Sentinel errors for errors.Is. A Client's errors match at most one.
var (
	// ErrUnavailable: no base URL answered (connection refused, timeout,
	// TLS failure on every one), or the last one tried answered 503 (for
	// /api/v1 resources: the coordinator has no current cluster snapshot).
	// Retryable.
	ErrUnavailable = errors.New("admin api unavailable")
	// ErrUnauthorized: the server answered 401 or 403; check the token.
	ErrUnauthorized = errors.New("admin api unauthorized")
	// ErrNotFound: the server answered 404: no such node, or the endpoint
	// is not served (wrong role, or not exposed).
	ErrNotFound = errors.New("admin api resource not found")
	// ErrBadRequest: the server answered 400; APIError.Parameter names the
	// offending query parameter.
	ErrBadRequest = errors.New("admin api bad request")
)

// APIError is an error answer from the server.
type APIError struct {
	// Server is the base URL that answered.
	Server     string
	HTTPStatus int
	// Code is the error code (see the Code constants); for a non-JSON
	// answer (a proxy's error page) it is derived from the status.
	Code    string
	Message string
	// Parameter names the query parameter a 400 is about.
	Parameter string
	Retryable bool
	// RetryAfter is the server's Retry-After, zero when absent.
	RetryAfter time.Duration
}

// Error returns "admin api <server>: <status> <code>: <message>".
func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "admin api %s: %d %s: %s", e.Server, e.HTTPStatus, e.Code, e.Message)
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, " (retry after %s)", e.RetryAfter)
	}
	return b.String()
}

// Is matches the sentinel of e's HTTP status.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrUnavailable:
		return e.HTTPStatus == http.StatusServiceUnavailable
	case ErrUnauthorized:
		return e.HTTPStatus == http.StatusUnauthorized || e.HTTPStatus == http.StatusForbidden
	case ErrNotFound:
		return e.HTTPStatus == http.StatusNotFound
	case ErrBadRequest:
		return e.HTTPStatus == http.StatusBadRequest
	}
	return false
}

// codeForStatus names the code of a status when the body carried none.
func codeForStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return CodeInvalidArgument
	case http.StatusUnauthorized:
		return CodeUnauthenticated
	case http.StatusForbidden:
		return CodePermissionDenied
	case http.StatusNotFound:
		return CodeNotFound
	case http.StatusMethodNotAllowed:
		return CodeMethodNotAllowed
	case http.StatusServiceUnavailable:
		return CodeNotReady
	}
	return CodeInternal
}

// ParseRetryAfter parses a Retry-After header value: delay seconds or an
// HTTP date (relative to now). It returns 0 for an empty or malformed value
// and for a date in the past.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		return time.Duration(min(secs, int64(24*time.Hour/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
