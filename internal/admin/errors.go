package admin

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/coordinator"
	"github.com/talonhq/talon/internal/state"
)

// Errors of the admin listener, mapped to HTTP by errorTable.
var (
	errInvalidParameter = errors.New("invalid parameter")
	errUnauthenticated  = errors.New("a valid bearer token is required")
	errNotFound         = errors.New("not found")
	errMethodNotAllowed = errors.New("method not allowed")
	errBodyNotAccepted  = errors.New("request bodies are not accepted")
	errRateLimited      = errors.New("too many requests from this client; retry after a second")
)

// errorTable is the one map from internal errors to HTTP status and API
// error code, checked in order with errors.Is. Anything else is a 500.
var errorTable = []struct {
	err       error
	status    int
	code      string
	retryable bool
}{
	{errInvalidParameter, http.StatusBadRequest, apiv1.CodeInvalidArgument, false},
	{errUnauthenticated, http.StatusUnauthorized, apiv1.CodeUnauthenticated, false},
	{errForbidden, http.StatusForbidden, apiv1.CodePermissionDenied, false},
	{errNotFound, http.StatusNotFound, apiv1.CodeNotFound, false},
	{errMethodNotAllowed, http.StatusMethodNotAllowed, apiv1.CodeMethodNotAllowed, false},
	{errBodyNotAccepted, http.StatusRequestEntityTooLarge, apiv1.CodeTooLarge, false},
	{errRateLimited, http.StatusTooManyRequests, apiv1.CodeRateLimited, true},
	{coordinator.ErrFeatureLevel, http.StatusConflict, apiv1.CodeFeatureLevel, true},
	{coordinator.ErrJobRefused, http.StatusConflict, apiv1.CodeConflict, true},
	{state.ErrTooManyJobs, http.StatusConflict, apiv1.CodeConflict, true},
	{state.ErrConflict, http.StatusConflict, apiv1.CodeConflict, true},
	// Fail closed: no current snapshot. The store sentinels appear only
	// wrapped in ErrNotReady today; they are listed so that a future path
	// returning them bare still answers 503, not 500.
	{coordinator.ErrNotReady, http.StatusServiceUnavailable, apiv1.CodeNotReady, true},
	{state.ErrUnavailable, http.StatusServiceUnavailable, apiv1.CodeNotReady, true},
	{state.ErrTimeout, http.StatusServiceUnavailable, apiv1.CodeNotReady, true},
}

// classify returns the HTTP status, the API error code and retryability of err.
func classify(err error) (status int, code string, retryable bool) {
	for _, e := range errorTable {
		if errors.Is(err, e.err) {
			return e.status, e.code, e.retryable
		}
	}
	return http.StatusInternalServerError, apiv1.CodeInternal, false
}

// codeOfStatus is the metrics outcome of an answer whose error, if any,
// was not built here (promhttp, the UI handler).
func codeOfStatus(status int) string {
	if status < 400 {
		return "ok"
	}
	for _, e := range errorTable {
		if e.status == status {
			return e.code
		}
	}
	return apiv1.CodeInternal
}

// paramError is a query parameter that breaks a rule. Its message names
// the parameter, the value (shortened) and the rule.
type paramError struct {
	param string
	value string
	rule  string
}

func (e *paramError) Error() string {
	return fmt.Sprintf("parameter %s %s: %s", e.param, quoteShort(e.value), e.rule)
}

func (e *paramError) Unwrap() error { return errInvalidParameter }

func badParam(param, value, format string, args ...any) error {
	return &paramError{param: param, value: value, rule: fmt.Sprintf(format, args...)}
}

// quoteShort quotes s, cut to 64 bytes, so an error never echoes a huge value.
func quoteShort(s string) string {
	const max = 64
	if len(s) > max {
		return fmt.Sprintf("%q... (%d bytes)", s[:max], len(s))
	}
	return fmt.Sprintf("%q", s)
}

// notFoundError is a 404 with a message for the caller.
type notFoundError struct{ msg string }

func (e *notFoundError) Error() string { return e.msg }
func (e *notFoundError) Unwrap() error { return errNotFound }

func notFound(format string, args ...any) error {
	return &notFoundError{msg: fmt.Sprintf(format, args...)}
}

// publicMessage is the message an error answer carries. Only errors built
// by this package give their own text; anything else (store errors, bugs)
// gets a fixed message, so that error text from dependencies, which may
// name endpoints or hosts, never reaches an API client.
func publicMessage(err error, code string) string {
	var pe *paramError
	var nf *notFoundError
	var fe *forbiddenError
	switch {
	case errors.As(err, &pe):
		return pe.Error()
	case errors.As(err, &nf):
		return nf.Error()
	case errors.As(err, &fe):
		return fe.Error()
	}
	switch code {
	case apiv1.CodeNotReady:
		return "no current cluster snapshot: the shared store could not be read in time (failing closed); retry, or add allowStale=true for the last good snapshot marked stale"
	case apiv1.CodeInternal:
		return "internal error; see the server log"
	}
	return err.Error()
}
