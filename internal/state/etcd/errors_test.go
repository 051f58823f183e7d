package etcd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/talonhq/talon/internal/state"
)

func TestClassify(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	tests := []struct {
		name   string
		err    error
		noConn bool
		want   error // nil: no sentinel
	}{
		{"nil", nil, false, nil},
		{"compacted", rpctypes.ErrCompacted, false, state.ErrCompacted},
		{"compacted grpc status", rpctypes.ErrGRPCCompacted, false, state.ErrCompacted},
		{"auth failed", rpctypes.ErrAuthFailed, false, state.ErrUnauthenticated},
		{"auth failed grpc status", rpctypes.ErrGRPCAuthFailed, false, state.ErrUnauthenticated},
		{"invalid auth token", rpctypes.ErrInvalidAuthToken, false, state.ErrUnauthenticated},
		{"auth old revision", rpctypes.ErrAuthOldRevision, false, state.ErrUnauthenticated},
		{"user empty", rpctypes.ErrUserEmpty, false, state.ErrUnauthenticated},
		{"unauthenticated code", status.Error(codes.Unauthenticated, "who are you"), false, state.ErrUnauthenticated},
		{"permission denied", rpctypes.ErrPermissionDenied, false, state.ErrPermissionDenied},
		{"permission denied grpc status", rpctypes.ErrGRPCPermissionDenied, false, state.ErrPermissionDenied},
		{"permission denied code", status.Error(codes.PermissionDenied, "no"), false, state.ErrPermissionDenied},
		{"watch cancelled for permission", errors.New("rpc error: code = PermissionDenied desc = etcdserver: permission denied"), false, state.ErrPermissionDenied},
		{"watch cancel reason in status", status.Error(codes.FailedPrecondition, "rpc error: code = PermissionDenied desc = etcdserver: permission denied"), false, state.ErrPermissionDenied},
		{"watch cancelled for compaction", errors.New("rpc error: code = OutOfRange desc = etcdserver: mvcc: required revision has been compacted"), false, state.ErrCompacted},
		{"server request timed out", rpctypes.ErrTimeout, false, state.ErrTimeout},
		{"timeout due to leader fail", rpctypes.ErrTimeoutDueToLeaderFail, false, state.ErrTimeout},
		{"timeout due to connection lost", rpctypes.ErrTimeoutDueToConnectionLost, false, state.ErrTimeout},
		{"no leader", rpctypes.ErrNoLeader, false, state.ErrUnavailable},
		{"leader changed", rpctypes.ErrLeaderChanged, false, state.ErrUnavailable},
		{"server stopped", rpctypes.ErrStopped, false, state.ErrUnavailable},
		{"too many requests", rpctypes.ErrTooManyRequests, false, state.ErrUnavailable},
		{"no space", rpctypes.ErrNoSpace, false, state.ErrUnavailable},
		{"unavailable code", status.Error(codes.Unavailable, "connection error: desc = \"transport: Error while dialing: dial tcp 127.0.0.1:1: connect: connection refused\""), false, state.ErrUnavailable},
		{"connection refused", fmt.Errorf("dial: %w", refused), false, state.ErrUnavailable},
		{"connection refused text", errors.New("dial tcp 127.0.0.1:2379: connect: connection refused"), false, state.ErrUnavailable},
		{"no available endpoints", clientv3.ErrNoAvailableEndpoints, false, state.ErrUnavailable},
		{"deadline with a connection", context.DeadlineExceeded, false, state.ErrTimeout},
		{"deadline waiting for a connection", context.DeadlineExceeded, true, state.ErrUnavailable},
		{"deadline status with a connection", status.Error(codes.DeadlineExceeded, "context deadline exceeded"), false, state.ErrTimeout},
		{"deadline status waiting for a connection", status.Error(codes.DeadlineExceeded, "latest balancer error: connection error: desc = \"transport: Error while dialing: dial tcp 127.0.0.1:1: connect: connection refused\""), false, state.ErrUnavailable},
		{"deadline status before any connection", status.Error(codes.DeadlineExceeded, "context deadline exceeded while waiting for connections to become ready"), false, state.ErrUnavailable},
		{"canceled", context.Canceled, false, nil},
		{"already classified", fmt.Errorf("x: %w", state.ErrTimeout), true, state.ErrTimeout},
		{"closed", fmt.Errorf("x: %w", state.ErrClosed), false, state.ErrClosed},
		{"key not found is no sentinel", rpctypes.ErrKeyNotFound, false, nil},
		{"request too large is no sentinel", rpctypes.ErrRequestTooLarge, false, nil},
		{"unknown", errors.New("boom"), false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := classify(tt.err, tt.noConn); got != tt.want {
				t.Fatalf("classify(%v, noConn=%t) = %v, want %v", tt.err, tt.noConn, got, tt.want)
			}
		})
	}
}

func TestMapErrorKeepsCause(t *testing.T) {
	s := &Store{}
	ci := &callInfo{}
	err := s.mapError("upsert c/worker/w", rpctypes.ErrPermissionDenied, ci)
	if !errors.Is(err, state.ErrPermissionDenied) || !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Fatalf("%v: want both the sentinel and the cause in the chain", err)
	}
	if state.Retryable(err) {
		t.Fatalf("%v: permission denied must not be retryable", err)
	}
	ci.noConn.Store(true)
	err = s.mapError("snapshot c", context.DeadlineExceeded, ci)
	if !errors.Is(err, state.ErrUnavailable) || state.Code(err) != "unavailable" {
		t.Fatalf("%v: want unavailable", err)
	}
	s.closed.Store(true)
	if err := s.mapError("snapshot c", context.Canceled, nil); !errors.Is(err, state.ErrClosed) {
		t.Fatalf("%v: want closed after Close", err)
	}
}
