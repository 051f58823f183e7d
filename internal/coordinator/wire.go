package coordinator

import (
	"errors"

	"github.com/talonhq/talon/internal/protocol"
	"github.com/talonhq/talon/internal/state"
)

// This file is the one table from the coordinator's internal errors and
// store outcomes to the control protocol's wire codes and outcomes. The
// protocol package owns the codes and knows no store; the server maps.

// wireCode maps err to its wire code:
//
//	state.ErrUnsupportedVersion                     unsupported_version
//	state.ErrRecordTooLarge                         too_large
//	state.ErrInvalidRecord                          invalid_argument
//	state.ErrUnavailable, state.ErrCompacted        unavailable
//	state.ErrTimeout                                timeout
//	state.ErrUnauthenticated                        unauthenticated
//	state.ErrPermissionDenied                       permission_denied
//	state.ErrConflict                               conflict
//	state.ErrClosed                                 draining
//	anything else                                   protocol.CodeOf(err)
//
// A *protocol.Error anywhere in the chain keeps its own code. ErrCompacted
// reaching a request means the coordinator's watch recovery failed; to the
// caller that is the store being unavailable. ErrClosed means the
// coordinator is shutting its store down, so the caller should go to
// another coordinator.
func wireCode(err error) protocol.Code {
	var e *protocol.Error
	switch {
	case err == nil:
		return 0
	case errors.As(err, &e):
		return e.Code
	case errors.Is(err, state.ErrUnsupportedVersion):
		return protocol.CodeUnsupportedVersion
	case errors.Is(err, state.ErrRecordTooLarge):
		return protocol.CodeTooLarge
	case errors.Is(err, state.ErrInvalidRecord):
		return protocol.CodeInvalidArgument
	case errors.Is(err, state.ErrUnavailable), errors.Is(err, state.ErrCompacted):
		return protocol.CodeUnavailable
	case errors.Is(err, state.ErrTimeout):
		return protocol.CodeTimeout
	case errors.Is(err, state.ErrUnauthenticated):
		return protocol.CodeUnauthenticated
	case errors.Is(err, state.ErrPermissionDenied):
		return protocol.CodePermissionDenied
	case errors.Is(err, state.ErrConflict):
		return protocol.CodeConflict
	case errors.Is(err, state.ErrClosed):
		return protocol.CodeDraining
	}
	return protocol.CodeOf(err)
}

// wireError is the Error sent for err, coded by wireCode.
func wireError(err error) *protocol.Error { return protocol.ErrorWithCode(err, wireCode(err)) }

// storeErrorReply is the wire error for a failed store operation: its code
// and retryability, without the backend's text (which can name endpoints
// and users; the coordinator logs it instead).
func storeErrorReply(err error) *protocol.Error {
	return protocol.NewError(wireCode(err), "state store operation failed: %s", state.Code(err))
}

// wireOutcome is the wire outcome of a store outcome (zero for an invalid
// one).
func wireOutcome(o state.Outcome) protocol.Outcome {
	switch o {
	case state.OutcomeAccepted:
		return protocol.OutcomeAccepted
	case state.OutcomeDuplicate:
		return protocol.OutcomeDuplicate
	case state.OutcomeStale:
		return protocol.OutcomeStale
	case state.OutcomeNotFound:
		return protocol.OutcomeNotFound
	}
	return 0
}
