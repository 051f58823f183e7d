package coordinator

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/talonhq/talon/internal/protocol"
	"github.com/talonhq/talon/internal/state"
)

func TestWireCode(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("etcd put /talon/x: %w", err) }
	tests := []struct {
		err       error
		code      protocol.Code
		retryable bool
	}{
		{wrap(state.ErrUnavailable), protocol.CodeUnavailable, true},
		{wrap(state.ErrTimeout), protocol.CodeTimeout, true},
		{wrap(state.ErrUnauthenticated), protocol.CodeUnauthenticated, false},
		{wrap(state.ErrPermissionDenied), protocol.CodePermissionDenied, false},
		{wrap(state.ErrCompacted), protocol.CodeUnavailable, true},
		{wrap(state.ErrInvalidRecord), protocol.CodeInvalidArgument, false},
		{wrap(state.ErrRecordTooLarge), protocol.CodeTooLarge, false},
		{wrap(state.ErrUnsupportedVersion), protocol.CodeUnsupportedVersion, false},
		{wrap(state.ErrConflict), protocol.CodeConflict, true},
		{wrap(state.ErrClosed), protocol.CodeDraining, true},
		// Not a store error: the protocol's own table decides.
		{wrap(context.DeadlineExceeded), protocol.CodeTimeout, true},
		{wrap(protocol.NewError(protocol.CodeNoWorkers, "none")), protocol.CodeNoWorkers, true},
		{errors.New("boom"), protocol.CodeInternal, false},
	}
	for _, tt := range tests {
		t.Run(tt.err.Error(), func(t *testing.T) {
			e := wireError(tt.err)
			if e.Code != tt.code || e.Retryable != tt.retryable {
				t.Fatalf("wireError = %v retryable %v, want %v retryable %v", e.Code, e.Retryable, tt.code, tt.retryable)
			}
			if !errors.Is(e, errors.Unwrap(tt.err)) && !errors.Is(e, tt.err) {
				t.Fatal("wireError result does not unwrap to its cause")
			}
			if r := storeErrorReply(tt.err); r.Code != tt.code {
				t.Fatalf("storeErrorReply code %v, want %v", r.Code, tt.code)
			}
		})
	}
	if wireCode(nil) != 0 || wireError(nil) != nil {
		t.Fatal("nil error has a code")
	}
}

// The wire codes' retryability agrees with the state package's own rule
// for every sentinel except ErrClosed, which to a caller means "this
// coordinator is going away; try another".
func TestWireRetryableAgreesWithState(t *testing.T) {
	for _, err := range []error{
		state.ErrUnavailable, state.ErrTimeout, state.ErrUnauthenticated, state.ErrPermissionDenied,
		state.ErrCompacted, state.ErrInvalidRecord, state.ErrRecordTooLarge, state.ErrUnsupportedVersion,
		state.ErrConflict, context.DeadlineExceeded,
	} {
		if wireCode(err).Retryable() != state.Retryable(err) {
			t.Fatalf("%v: wire retryable %v, state.Retryable %v", err, wireCode(err).Retryable(), state.Retryable(err))
		}
	}
}

func TestWireOutcome(t *testing.T) {
	for _, o := range []state.Outcome{state.OutcomeAccepted, state.OutcomeDuplicate, state.OutcomeStale, state.OutcomeNotFound} {
		w := wireOutcome(o)
		if !w.Valid() || w.String() != o.String() {
			t.Fatalf("wireOutcome(%v) = %v", o, w)
		}
	}
	if wireOutcome(0) != 0 {
		t.Fatal("invalid outcome maps to a valid one")
	}
}
