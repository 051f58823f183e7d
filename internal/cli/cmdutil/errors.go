package cmdutil

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/talonhq/talon/internal/apiv1"
)

// Exit codes of talonctl, documented in `talonctl --help` and the man page.
const (
	ExitOK           = 0 // success, including an empty result
	ExitFailure      = 1 // any other error
	ExitUsage        = 2 // bad command line
	ExitUnavailable  = 3 // cluster state unavailable: no server reachable, or 503 fail-closed
	ExitAuthRejected = 4 // authentication or permission refused
)

// ExitCodesHelp documents the exit codes; the root command's help and man
// page carry it.
const ExitCodesHelp = `Exit codes:
  0  success (an empty result is not an error)
  1  error
  2  usage error (bad command line, or a value the server rejected as a bad parameter)
  3  cluster state unavailable (no server reachable, or 503: no coordinator has a current snapshot)
  4  authentication or permission refused (401 or 403: check the token)`

// ExitError carries an exit code with an error.
type ExitError struct {
	Code int
	Err  error
	// Hint, when set, is printed after the error instead of Hint's
	// general advice ("did you mean ...?").
	Hint string
	// Silent: the command printed its answer already (auth can-i's
	// "no"); only the exit code remains.
	Silent bool
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// UsageError returns err as a usage error (exit code 2).
func UsageError(err error) error { return &ExitError{Code: ExitUsage, Err: err} }

// UsageErrorf formats a usage error (exit code 2).
func UsageErrorf(format string, args ...any) error {
	return UsageError(fmt.Errorf(format, args...))
}

// FlagValueError is the usage error of a flag value outside its allowed
// set: it names the flag, the value and the allowed values.
func FlagValueError(flag, value string, allowed []string) error {
	return UsageErrorf("--%s %q: must be one of %s", flag, value, strings.Join(allowed, ", "))
}

// CheckEnum returns a FlagValueError unless value is one of allowed.
func CheckEnum(flag, value string, allowed []string) error {
	for _, a := range allowed {
		if value == a {
			return nil
		}
	}
	return FlagValueError(flag, value, allowed)
}

// ExitCode classifies err: nil is ExitOK, an *ExitError carries its code,
// errors from the API map by kind (unavailable 3, unauthorized 4, bad
// request 2), anything else is ExitFailure.
func ExitCode(err error) int {
	var ee *ExitError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ee):
		return ee.Code
	case errors.Is(err, apiv1.ErrUnauthorized):
		return ExitAuthRejected
	case errors.Is(err, apiv1.ErrUnavailable):
		return ExitUnavailable
	case errors.Is(err, apiv1.ErrBadRequest):
		return ExitUsage
	}
	return ExitFailure
}

// staleAdvice is the API's own advice in a 503 not_ready message: it names
// the query parameter, which talonctl users set with --allow-stale.
var staleAdvice = regexp.MustCompile(`; retry, or add allowStale=true[^;\n]*`)

// Message returns the text talonctl prints for err: the error, with the
// API's advice to add the allowStale=true parameter left out (Hint gives
// the advice in terms of the command line).
func Message(err error) string {
	return staleAdvice.ReplaceAllString(err.Error(), "")
}

// adminAddress says where talonctl must point, for the wrong-address hints.
const adminAddress = "talonctl talks to a coordinator's admin address (" + DefaultServer + " by default, the admin-listen of the coordinator's configuration)"

// UsageHint is Hint's answer for a usage error.
const UsageHint = "run with --help for usage"

// Hint returns a short suggestion for an error, or "" when there is none.
// allowStale says whether --allow-stale was given, which changes the
// advice on a 503.
func Hint(err error, allowStale bool) string {
	if h := exitHint(err); h != "" {
		return h
	}
	var forbidden *apiv1.APIError
	if errors.As(err, &forbidden) && forbidden.Code == apiv1.CodePermissionDenied {
		return "the token was accepted but lacks the scope named above: use a token with it (admin-token-file lines are name:scopes:token)"
	}
	if errors.Is(err, apiv1.ErrUnauthorized) {
		return "check --token, --token-file, TALONCTL_TOKEN or the context's token-file"
	}
	var ae *apiv1.APIError
	if errors.As(err, &ae) {
		if h := apiHint(ae, allowStale); h != "" {
			return h
		}
	} else if errors.Is(err, apiv1.ErrUnavailable) {
		return unreachableHint(err.Error())
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "raise --timeout or check the --server addresses"
	}
	return ""
}

// exitHint is the hint an *ExitError carries, or UsageHint for a usage
// error without one.
func exitHint(err error) string {
	var ee *ExitError
	if !errors.As(err, &ee) {
		return ""
	}
	if ee.Hint != "" {
		return ee.Hint
	}
	if ee.Code == ExitUsage {
		return UsageHint
	}
	return ""
}

// apiHint explains an answer of the server: the wrong kind of address,
// plain http to https, or a coordinator without a current snapshot.
func apiHint(ae *apiv1.APIError, allowStale bool) string {
	switch {
	case ae.Code == datav1CodeUnknownPath:
		return ae.Server + " is a worker's data address; " + adminAddress
	case ae.HTTPStatus == http.StatusNotFound && strings.HasPrefix(ae.Message, "no resource at ") && strings.HasSuffix(ae.Message, " on this worker"):
		return ae.Server + " is a worker's admin address, which serves only its own /api/v1/status (and the cordon that talonctl nodes cordon sends it by itself); " + adminAddress
	case ae.HTTPStatus == http.StatusBadRequest && strings.Contains(ae.Message, "HTTP request to an HTTPS server"):
		return ae.Server + " is served over https: use " + strings.Replace(ae.Server, "http://", "https://", 1) + " (with --ca-file if its certificate is not trusted); if that server then asks for a client certificate, it is a worker's data port or a control port, not an admin address: " + adminAddress
	case ae.Code == apiv1.CodeNotReady:
		if allowStale {
			return "--allow-stale was given, but this coordinator has no last good snapshot either (it has not read the store since it started): check the store, or ask another coordinator"
		}
		return "rerun with --allow-stale to see the coordinator's last good snapshot, marked stale"
	}
	return ""
}

// unreachableHint explains a failure to get any HTTP answer, from the
// transport's message: the wrong scheme or not an admin address.
func unreachableHint(msg string) string {
	switch {
	case strings.Contains(msg, "server gave HTTP response to HTTPS client"):
		return "the server speaks plain http, not https: use an http:// URL in --server"
	case strings.Contains(msg, ": EOF") || strings.Contains(msg, "malformed HTTP response"):
		return "the server closed the connection without an HTTP answer: is that a control address (port 7400 by default) or a worker's data address? " + adminAddress
	case strings.Contains(msg, "certificate required") || strings.Contains(msg, "bad certificate"):
		return "the server asks for a client certificate (mutual TLS): that is a worker's data port or a control port, not an admin listener; " + adminAddress
	case strings.Contains(msg, "tls: first record does not look like a TLS handshake"):
		return "the server does not speak https there: use an http:// URL in --server, or check the port"
	}
	return "no server answered: check --server, TALONCTL_SERVER or the context's servers"
}

// datav1CodeUnknownPath is the data path's code for a path it does not
// serve (datav1.CodeUnknownPath; talonctl does not import the data-path
// package).
const datav1CodeUnknownPath = "unknown_path"
