package cmdutil

import (
	"context"
	"errors"
	"fmt"
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

// Hint returns a short suggestion for an error, or "" when there is none.
func Hint(err error) string {
	var ee *ExitError
	if errors.As(err, &ee) && ee.Code == ExitUsage {
		return "run with --help for usage"
	}
	switch {
	case errors.Is(err, apiv1.ErrUnauthorized):
		return "check --token, --token-file, TALONCTL_TOKEN or the context's token-file"
	case errors.Is(err, apiv1.ErrUnavailable):
		var ae *apiv1.APIError
		if !errors.As(err, &ae) {
			return "no server answered: check --server, TALONCTL_SERVER or the context's servers"
		}
	case errors.Is(err, context.DeadlineExceeded):
		return "raise --timeout or check the --server addresses"
	}
	return ""
}
