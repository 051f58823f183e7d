package protocol

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/talonhq/talon/internal/cluster"
)

// Code is a wire error code. Values are never reused. A reader accepts
// codes it does not know (a newer peer may send them) and relies on the
// Error's Retryable flag for them.
type Code uint16

// Error codes. The comment gives Retryable's default for each.
const (
	CodeUnavailable        Code = 1  // retryable: the shared store or a dependency cannot serve now
	CodeTimeout            Code = 2  // retryable: a deadline passed
	CodeUnauthenticated    Code = 3  // not retryable: credentials rejected
	CodePermissionDenied   Code = 4  // not retryable: authenticated, not allowed
	CodeInvalidArgument    Code = 5  // not retryable: the request breaks a rule (malformed, invalid record, unknown type)
	CodeUnsupportedVersion Code = 6  // not retryable: protocol or record schema version not read by the receiver
	CodeTooLarge           Code = 7  // not retryable: frame, field or record over its limit
	CodeNotReady           Code = 8  // retryable: the coordinator has no current snapshot (fail closed, ADR section 8)
	CodeDraining           Code = 9  // retryable: the coordinator is shutting down; reconnect (possibly elsewhere)
	CodeInternal           Code = 10 // not retryable: a bug
	CodeNoWorkers          Code = 11 // retryable: placement found no healthy worker
	CodeConflict           Code = 12 // retryable: the store lost too many optimistic-concurrency races
	CodeResourceExhausted  Code = 13 // not retryable without operator action: a configured limit is reached (records of a cluster)
)

// String returns the code's snake_case name (a bounded metrics label), or
// "unknown" for a code this build does not know.
func (c Code) String() string {
	switch c {
	case CodeUnavailable:
		return "unavailable"
	case CodeTimeout:
		return "timeout"
	case CodeUnauthenticated:
		return "unauthenticated"
	case CodePermissionDenied:
		return "permission_denied"
	case CodeInvalidArgument:
		return "invalid_argument"
	case CodeUnsupportedVersion:
		return "unsupported_version"
	case CodeTooLarge:
		return "too_large"
	case CodeNotReady:
		return "not_ready"
	case CodeDraining:
		return "draining"
	case CodeInternal:
		return "internal"
	case CodeNoWorkers:
		return "no_workers"
	case CodeConflict:
		return "conflict"
	case CodeResourceExhausted:
		return "resource_exhausted"
	}
	return "unknown"
}

// Retryable reports whether a request failing with c may succeed if sent
// again without operator action. It is the default for Error.Retryable; a
// received Error's own flag is authoritative.
func (c Code) Retryable() bool {
	switch c {
	case CodeUnavailable, CodeTimeout, CodeNotReady, CodeDraining, CodeNoWorkers, CodeConflict:
		return true
	}
	return false
}

// Error is the Error message (type 1, frozen layout) and the Go error a
// client gets back for it. Servers build one with ErrorOf or NewError.
//
// errors.Is(err, &Error{Code: c}) matches any *Error with code c, so
// clients can test codes without comparing messages; IsCode does the same
// and also classifies errors that were never on the wire.
type Error struct {
	Code      Code
	Retryable bool
	// MinVersion and MaxVersion are the protocol versions the sender
	// speaks, so a peer refused with CodeUnsupportedVersion can tell which
	// to use. Every Error carries them.
	MinVersion uint16
	MaxVersion uint16
	// Message is human-readable detail, at most MaxErrorMessageBytes of
	// UTF-8. It must never carry secrets.
	Message string

	cause error // the local error this was built from; never on the wire
}

// maxErrorPayload is the largest Error payload: the frozen layout with a
// message at its limit.
const maxErrorPayload = 2 + 1 + 2 + 2 + 2 + MaxErrorMessageBytes

func (e *Error) Error() string {
	if e.Message == "" {
		return "protocol: " + e.Code.String()
	}
	return "protocol: " + e.Code.String() + ": " + e.Message
}

// Is reports whether target is an *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Unwrap returns the local error the Error was built from (nil for one
// decoded from the wire), so a server can still match the cause.
func (e *Error) Unwrap() error { return e.cause }

func (*Error) Type() Type { return TypeError }

// AppendBinary appends the frozen Error layout.
func (e *Error) AppendBinary(b []byte) ([]byte, error) {
	if err := checkStr(TypeError, "message", e.Message, MaxErrorMessageBytes, false); err != nil {
		return b, err
	}
	b = appendU16(b, uint16(e.Code))
	b = appendBool(b, e.Retryable)
	b = appendU16(b, e.MinVersion)
	b = appendU16(b, e.MaxVersion)
	return appendStr(b, e.Message), nil
}

// UnmarshalBinary decodes the frozen Error layout. Unknown codes are kept.
func (e *Error) UnmarshalBinary(p []byte) error {
	r := reader{t: TypeError, b: p}
	var d Error
	d.Code = Code(r.u16("code"))
	d.Retryable = r.boolean("retryable")
	d.MinVersion = r.u16("minVersion")
	d.MaxVersion = r.u16("maxVersion")
	d.Message = r.str("message", MaxErrorMessageBytes, false)
	if err := r.finish(); err != nil {
		return err
	}
	*e = d
	return nil
}

// NewError returns an Error with code c, c's default retryability, this
// build's versions and a formatted message (clipped to the limit).
func NewError(c Code, format string, args ...any) *Error {
	return &Error{
		Code:       c,
		Retryable:  c.Retryable(),
		MinVersion: MinVersion,
		MaxVersion: MaxVersion,
		Message:    clip(fmt.Sprintf(format, args...)),
	}
}

// ErrorOf returns the Error a server sends for err: err itself when it is
// (or wraps) an *Error, otherwise an Error with code CodeOf(err), that
// code's retryability, and err's text (made valid UTF-8, clipped to
// MaxErrorMessageBytes). The result unwraps to err. ErrorOf(nil) is nil.
func ErrorOf(err error) *Error { return ErrorWithCode(err, CodeOf(err)) }

// ErrorWithCode is ErrorOf with the code chosen by the caller (a server
// that maps its own errors): err itself when it is (or wraps) an *Error,
// otherwise an Error with code c, c's retryability and err's clipped text.
// The result unwraps to err. ErrorWithCode(nil, c) is nil.
func ErrorWithCode(err error, c Code) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{
		Code:       c,
		Retryable:  c.Retryable(),
		MinVersion: MinVersion,
		MaxVersion: MaxVersion,
		Message:    clip(err.Error()),
		cause:      err,
	}
}

// clip makes s valid UTF-8 of at most MaxErrorMessageBytes, cutting at a
// rune boundary.
func clip(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= MaxErrorMessageBytes {
		return s
	}
	const ellipsis = "..."
	n := MaxErrorMessageBytes - len(ellipsis)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + ellipsis
}

// CodeOf maps an error that this package or cluster knows to its wire
// code, checked in this order:
//
//	*Error (received or built)                      its Code
//	ErrUnsupportedVersion, cluster.ErrUnsupportedVersion
//	                                                unsupported_version
//	ErrFrameTooLarge, ErrFieldTooLarge              too_large
//	ErrMalformed, ErrUnknownType, ErrBadHeader, ErrBadMagic,
//	cluster.ErrInvalid, cluster.ErrMalformed        invalid_argument
//	context.Canceled, ErrConnBroken                 unavailable
//	context.DeadlineExceeded, os.ErrDeadlineExceeded timeout
//	anything else                                   internal
//
// The wire codec knows no store or server: the server keeps the table that
// maps its own errors (a state store's, say) to codes, and falls back to
// CodeOf for the rest. ErrConnBroken (client side) means dial again.
// CodeOf(nil) is 0, which is no code.
func CodeOf(err error) Code {
	var e *Error
	switch {
	case err == nil:
		return 0
	case errors.As(err, &e):
		return e.Code
	case errors.Is(err, ErrUnsupportedVersion), errors.Is(err, cluster.ErrUnsupportedVersion):
		return CodeUnsupportedVersion
	case errors.Is(err, ErrFrameTooLarge), errors.Is(err, ErrFieldTooLarge):
		return CodeTooLarge
	case errors.Is(err, ErrMalformed), errors.Is(err, ErrUnknownType), errors.Is(err, ErrBadHeader),
		errors.Is(err, ErrBadMagic), errors.Is(err, cluster.ErrInvalid), errors.Is(err, cluster.ErrMalformed):
		return CodeInvalidArgument
	case errors.Is(err, context.Canceled), errors.Is(err, ErrConnBroken):
		return CodeUnavailable
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return CodeTimeout
	}
	return CodeInternal
}

// IsCode reports whether err maps to code c (see CodeOf).
func IsCode(err error, c Code) bool { return err != nil && CodeOf(err) == c }

// Retryable reports whether the request that failed with err may succeed
// if sent again: a received Error's own flag, otherwise the default of
// CodeOf(err). Retryable(nil) is false.
func Retryable(err error) bool {
	var e *Error
	if errors.As(err, &e) {
		return e.Retryable
	}
	return err != nil && CodeOf(err).Retryable()
}

// FrameErrorReply returns the Error a server sends, under the failed
// frame's request ID (Frame.Header, which ReadFrame fills for these
// errors), before it closes the connection after Decoder.ReadFrame
// returned err:
//
//   - *VersionError: unsupported_version naming the version received and
//     the versions this build speaks (also in MinVersion/MaxVersion);
//   - *FrameTooLargeError: too_large naming the length and the limit;
//   - ErrBadHeader: invalid_argument.
//
// For anything else (io.EOF, io.ErrUnexpectedEOF, ErrBadMagic: the peer
// does not speak this protocol, I/O errors) it returns nil: nothing useful
// can be sent. The connection is closed in every case, because the
// unread payload leaves the stream unframed. Closing a TCP socket with
// unread input sends a reset; a server that wants the reply delivered on
// every platform half-closes (CloseWrite) and drains briefly first.
func FrameErrorReply(err error) *Error {
	switch {
	case errors.Is(err, ErrUnsupportedVersion), errors.Is(err, ErrFrameTooLarge), errors.Is(err, ErrBadHeader):
		return ErrorOf(err)
	}
	return nil
}
