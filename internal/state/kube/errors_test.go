package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/talonhq/talon/internal/state"
)

// timeoutErr is a net.Error that timed out (like a dial or TLS handshake
// timeout).
type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestMapError(t *testing.T) {
	leases := schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
	refused := &url.Error{Op: "Get", URL: "https://127.0.0.1:6443/apis", Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
	status := func(code int32, reason metav1.StatusReason) error {
		return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: code, Reason: reason, Message: "from the server"}}
	}
	tests := []struct {
		name string
		err  error
		want error // nil: no sentinel
		code string
	}{
		{"401", apierrors.NewUnauthorized("bad token"), state.ErrUnauthenticated, "unauthenticated"},
		{"403", apierrors.NewForbidden(leases, "x", errors.New("rbac")), state.ErrPermissionDenied, "permission_denied"},
		//lint:ignore SA1019 older API servers still answer 410 Gone; the mapping must handle it
		{"410 gone", apierrors.NewGone("too old resource version: 5 (9)"), state.ErrCompacted, "compacted"},
		{"410 expired", apierrors.NewResourceExpired("The resourceVersion for the provided watch is too old."), state.ErrCompacted, "compacted"},
		{"409 conflict", apierrors.NewConflict(leases, "x", errors.New("object was modified")), state.ErrConflict, "conflict"},
		{"504 timeout", apierrors.NewTimeoutError("request did not complete", 1), state.ErrTimeout, "timeout"},
		{"server timeout", apierrors.NewServerTimeout(leases, "get", 1), state.ErrTimeout, "timeout"},
		{"503", apierrors.NewServiceUnavailable("etcd down"), state.ErrUnavailable, "unavailable"},
		{"429", apierrors.NewTooManyRequests("slow down", 1), state.ErrUnavailable, "unavailable"},
		{"500", apierrors.NewInternalError(errors.New("etcdserver: leader changed")), state.ErrUnavailable, "unavailable"},
		{"502 bare", status(502, ""), state.ErrUnavailable, "unavailable"},
		{"404 is no sentinel", apierrors.NewNotFound(leases, "x"), nil, "internal"},
		{"422 is no sentinel", apierrors.NewInvalid(schema.GroupKind{Kind: "Lease"}, "x", nil), nil, "internal"},
		{"connection refused", refused, state.ErrUnavailable, "unavailable"},
		{"connection reset", fmt.Errorf("read: %w", syscall.ECONNRESET), state.ErrUnavailable, "unavailable"},
		{"eof", &url.Error{Op: "Get", URL: "https://x", Err: io.EOF}, state.ErrUnavailable, "unavailable"},
		{"unexpected eof", io.ErrUnexpectedEOF, state.ErrUnavailable, "unavailable"},
		{"dns", &net.DNSError{Err: "no such host", Name: "kube.invalid"}, state.ErrUnavailable, "unavailable"},
		{"net timeout", &url.Error{Op: "Get", URL: "https://x", Err: timeoutErr{}}, state.ErrTimeout, "timeout"},
		{"context deadline", &url.Error{Op: "Get", URL: "https://x", Err: context.DeadlineExceeded}, state.ErrTimeout, "timeout"},
		{"rate limiter deadline", fmt.Errorf("client rate limiter Wait returned an error: %w", context.DeadlineExceeded), state.ErrTimeout, "timeout"},
		{"rate limiter would exceed deadline", fmt.Errorf("client rate limiter Wait returned an error: %w", errors.New("rate: Wait(n=1) would exceed context deadline")), state.ErrTimeout, "timeout"},
		{"canceled stays canceled", &url.Error{Op: "Get", URL: "https://x", Err: context.Canceled}, nil, "canceled"},
		{"already a sentinel", fmt.Errorf("%w: establishing the watch", state.ErrTimeout), state.ErrTimeout, "timeout"},
		{"other", errors.New("something else"), nil, "internal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mapError("kube op", tt.err)
			if !errors.Is(got, tt.err) {
				t.Errorf("mapError(%v) = %v: lost the original error", tt.err, got)
			}
			if tt.want != nil && !errors.Is(got, tt.want) {
				t.Errorf("mapError(%v) = %v, want it to wrap %v", tt.err, got, tt.want)
			}
			if c := state.Code(got); c != tt.code {
				t.Errorf("state.Code(mapError(%v)) = %q, want %q", tt.err, c, tt.code)
			}
			if !strings.HasPrefix(got.Error(), "kube op: ") {
				t.Errorf("mapError(%v) = %q, want the op as prefix", tt.err, got)
			}
		})
	}
	if mapError("op", nil) != nil {
		t.Error("mapError(nil) is not nil")
	}
}
