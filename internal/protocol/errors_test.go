package protocol

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/talonhq/talon/internal/cluster"
)

func TestCodeOf(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("etcd put /talon/x: %w", err) }
	_, malformed := Decode(TypeAck, nil)
	_, unknown := Decode(99, nil)
	_, recVersion := cluster.Decode([]byte(`{"schemaVersion":2}`))
	_, recMalformed := cluster.Decode([]byte(`{`))
	recInvalid := (&cluster.Record{}).Validate()
	tests := []struct {
		err       error
		code      Code
		retryable bool
	}{
		{recInvalid, CodeInvalidArgument, false},
		{recVersion, CodeUnsupportedVersion, false},
		{recMalformed, CodeInvalidArgument, false},
		{wrap(context.DeadlineExceeded), CodeTimeout, true},
		{wrap(os.ErrDeadlineExceeded), CodeTimeout, true},
		{wrap(context.Canceled), CodeUnavailable, true},
		{malformed, CodeInvalidArgument, false},
		{unknown, CodeInvalidArgument, false},
		{&VersionError{Version: 2}, CodeUnsupportedVersion, false},
		{&FrameTooLargeError{Length: 1 << 20, Limit: MaxPayload}, CodeTooLarge, false},
		{&FieldError{Type: TypeHeartbeat, Field: "record", Kind: ErrFieldTooLarge}, CodeTooLarge, false},
		{ErrBadHeader, CodeInvalidArgument, false},
		{ErrBadMagic, CodeInvalidArgument, false},
		{wrap(NewError(CodeNoWorkers, "no healthy worker")), CodeNoWorkers, true},
		{&Error{Code: CodeNotReady, Retryable: false}, CodeNotReady, false}, // the wire flag wins
		{&Error{Code: 999, Retryable: true}, 999, true},
		{errors.New("boom"), CodeInternal, false},
	}
	for _, tt := range tests {
		t.Run(tt.err.Error(), func(t *testing.T) {
			if got := CodeOf(tt.err); got != tt.code {
				t.Fatalf("CodeOf = %v (%d), want %v (%d)", got, got, tt.code, tt.code)
			}
			if got := Retryable(tt.err); got != tt.retryable {
				t.Fatalf("Retryable = %v, want %v", got, tt.retryable)
			}
			if !IsCode(tt.err, tt.code) {
				t.Fatalf("IsCode(%v) = false", tt.code)
			}
		})
	}
	if CodeOf(nil) != 0 || Retryable(nil) || IsCode(nil, 0) || ErrorOf(nil) != nil {
		t.Fatal("nil error has a code")
	}
}

func TestCodeNames(t *testing.T) {
	want := map[Code]string{
		CodeUnavailable: "unavailable", CodeTimeout: "timeout", CodeUnauthenticated: "unauthenticated",
		CodePermissionDenied: "permission_denied", CodeInvalidArgument: "invalid_argument",
		CodeUnsupportedVersion: "unsupported_version", CodeTooLarge: "too_large", CodeNotReady: "not_ready",
		CodeDraining: "draining", CodeInternal: "internal", CodeNoWorkers: "no_workers", CodeConflict: "conflict",
		CodeResourceExhausted: "resource_exhausted",
		0:                     "unknown", 14: "unknown", 0xffff: "unknown",
	}
	for c, name := range want {
		if c.String() != name {
			t.Fatalf("Code(%d).String() = %q, want %q", c, c, name)
		}
	}
}

func TestErrorIsByCode(t *testing.T) {
	got := &Error{Code: CodeNotReady, Retryable: true, Message: "no snapshot"}
	wrapped := fmt.Errorf("heartbeat: %w", got)
	if !errors.Is(wrapped, &Error{Code: CodeNotReady}) {
		t.Fatal("errors.Is by code = false")
	}
	if errors.Is(wrapped, &Error{Code: CodeDraining}) {
		t.Fatal("errors.Is matched another code")
	}
	if got.Error() != "protocol: not_ready: no snapshot" {
		t.Fatalf("Error() = %q", got.Error())
	}
	if (&Error{Code: CodeInternal}).Error() != "protocol: internal" {
		t.Fatalf("Error() without message = %q", (&Error{Code: CodeInternal}).Error())
	}
}

func TestErrorOf(t *testing.T) {
	cause := fmt.Errorf("snapshot prod: %w", context.DeadlineExceeded)
	e := ErrorOf(cause)
	if e.Code != CodeTimeout || !e.Retryable || e.MinVersion != MinVersion || e.MaxVersion != MaxVersion || e.Message != cause.Error() {
		t.Fatalf("ErrorOf = %+v", e)
	}
	if !errors.Is(e, context.DeadlineExceeded) {
		t.Fatal("ErrorOf result does not unwrap to its cause")
	}
	// Already an *Error: returned as is.
	ne := NewError(CodeDraining, "shutting down in %ds", 5)
	if got := ErrorOf(fmt.Errorf("x: %w", ne)); got != ne {
		t.Fatalf("ErrorOf(wrapped *Error) = %p, want %p", got, ne)
	}
	if ne.Message != "shutting down in 5s" || !ne.Retryable {
		t.Fatalf("NewError = %+v", ne)
	}
	// Long and invalid text is clipped to a valid, encodable message.
	long := errors.New(strings.Repeat("é", MaxErrorMessageBytes) + "\xff")
	le := ErrorOf(long)
	if len(le.Message) > MaxErrorMessageBytes || !utf8.ValidString(le.Message) || !strings.HasSuffix(le.Message, "...") {
		t.Fatalf("clipped message: %d bytes, valid %v", len(le.Message), utf8.ValidString(le.Message))
	}
	if _, err := le.AppendBinary(nil); err != nil {
		t.Fatalf("clipped Error does not encode: %v", err)
	}
	if got := ErrorOf(errors.New("\xffbad")).Message; got != "\uFFFDbad" {
		t.Fatalf("invalid UTF-8 message = %q", got)
	}
}

func TestFrameErrorReply(t *testing.T) {
	e := FrameErrorReply(&VersionError{Version: 2})
	if e == nil || e.Code != CodeUnsupportedVersion || e.Retryable || e.MinVersion != 1 || e.MaxVersion != 1 {
		t.Fatalf("reply to version 2 = %+v", e)
	}
	if !strings.Contains(e.Message, "version 2") || !strings.Contains(e.Message, "speaks version 1") {
		t.Fatalf("reply message %q does not name both versions", e.Message)
	}
	for _, err := range []error{io.EOF, io.ErrUnexpectedEOF, ErrBadMagic, os.ErrDeadlineExceeded, errors.New("read: connection reset")} {
		if r := FrameErrorReply(err); r != nil {
			t.Fatalf("FrameErrorReply(%v) = %+v, want nil", err, r)
		}
	}
}
