package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/talonhq/talon/internal/state"
)

// mapError wraps err from the Kubernetes API (or the transport under it)
// with the state sentinel that classifies it, prefixed with op. The original
// error stays in the chain, so errors.Is still finds a context error or an
// *apierrors.StatusError. It never adds credentials: API errors carry the
// server's message, transport errors the URL and the syscall.
//
// Conflicts map to state.ErrConflict; callers that retry conflicts check
// apierrors.IsConflict before they get here.
func mapError(op string, err error) error {
	if err == nil {
		return nil
	}
	sentinel := classify(err)
	if sentinel == nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if errors.Is(err, sentinel) {
		return fmt.Errorf("%s: %w", op, err)
	}
	return fmt.Errorf("%s: %w: %w", op, sentinel, err)
}

// classify returns the state sentinel for err, or nil when none fits (the
// caller's context was canceled, or an error no sentinel describes).
func classify(err error) error {
	for _, s := range []error{
		state.ErrUnavailable, state.ErrTimeout, state.ErrUnauthenticated,
		state.ErrPermissionDenied, state.ErrCompacted, state.ErrConflict,
		state.ErrClosed, state.ErrInvalidRecord, state.ErrRecordTooLarge,
		state.ErrUnsupportedVersion,
	} {
		if errors.Is(err, s) {
			return s
		}
	}
	// Context errors first: client-go wraps them (the rate limiter, the
	// transport), and a deadline is a timeout whatever the layer.
	if errors.Is(err, context.Canceled) {
		return nil
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return state.ErrTimeout
	}
	// client-go's rate limiter refuses to wait past the context's deadline
	// with an error that does not wrap context.DeadlineExceeded.
	if strings.Contains(err.Error(), "client rate limiter Wait returned an error") {
		return state.ErrTimeout
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		switch {
		case apierrors.IsUnauthorized(err):
			return state.ErrUnauthenticated
		case apierrors.IsForbidden(err):
			return state.ErrPermissionDenied
		case apierrors.IsResourceExpired(err), apierrors.IsGone(err):
			return state.ErrCompacted
		case apierrors.IsConflict(err):
			return state.ErrConflict
		case apierrors.IsTimeout(err), apierrors.IsServerTimeout(err):
			return state.ErrTimeout
		case apierrors.IsServiceUnavailable(err), apierrors.IsTooManyRequests(err),
			apierrors.IsInternalError(err), apierrors.IsUnexpectedServerError(err):
			return state.ErrUnavailable
		}
		switch status.Status().Code {
		case 502, 503:
			return state.ErrUnavailable
		case 504:
			return state.ErrTimeout
		}
		return nil
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return state.ErrTimeout
	}
	switch {
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		errors.Is(err, syscall.EPIPE), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, net.ErrClosed):
		return state.ErrUnavailable
	}
	var opErr *net.OpError
	var dnsErr *net.DNSError
	if errors.As(err, &opErr) || errors.As(err, &dnsErr) {
		return state.ErrUnavailable
	}
	return nil
}
