package etcd

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"syscall"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/talonhq/talon/internal/state"
)

// classify returns the state sentinel that err belongs to, or nil when it
// belongs to none (a cancelled context, or a bug). noConn reports that the
// request never found a ready connection: the client waits for one until
// the deadline, so an expired deadline then means "unreachable", not "slow".
func classify(err error, noConn bool) error {
	if err == nil {
		return nil
	}
	// Sentinels already assigned (by a lower layer of this package) stay.
	for _, s := range []error{state.ErrUnavailable, state.ErrTimeout, state.ErrUnauthenticated,
		state.ErrPermissionDenied, state.ErrCompacted, state.ErrClosed} {
		if errors.Is(err, s) {
			return s
		}
	}
	// rpctypes.Error turns a gRPC status that etcd sent into its typed
	// EtcdError value; the client does this for its own calls, not for the
	// raw lease stream.
	e := rpctypes.Error(err)
	if sentinel := classifyRPC(e); sentinel != nil {
		return sentinel
	}
	switch {
	case errors.Is(err, clientv3.ErrNoAvailableEndpoints), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return state.ErrUnavailable
	case errors.Is(err, context.DeadlineExceeded):
		if noConn {
			return state.ErrUnavailable
		}
		return state.ErrTimeout
	case errors.Is(err, context.Canceled):
		return nil
	}
	if sentinel := classifyStatus(e, noConn); sentinel != nil {
		return sentinel
	}
	// A watch cancelled by the server carries the server's error as text
	// ("rpc error: code = PermissionDenied desc = etcdserver: permission
	// denied"), in a plain error or inside another status; classify that.
	text := e.Error()
	if st, ok := status.FromError(e); ok {
		text = st.Message()
	}
	if inner, ok := embeddedStatus(text); ok {
		return classify(inner, noConn)
	}
	// Dial failures surface as plain errors from the resolver and balancer.
	msg := err.Error()
	for _, s := range []string{"connection refused", "no available endpoints", "there is no address available", "there is no connection available"} {
		if strings.Contains(msg, s) {
			return state.ErrUnavailable
		}
	}
	return nil
}

// rpcSentinels maps etcd's typed errors onto the state sentinels.
var rpcSentinels = []struct {
	sentinel error
	errs     []error
}{
	{state.ErrCompacted, []error{rpctypes.ErrCompacted}},
	{state.ErrUnauthenticated, []error{rpctypes.ErrAuthFailed, rpctypes.ErrInvalidAuthToken,
		rpctypes.ErrAuthOldRevision, rpctypes.ErrUserEmpty, rpctypes.ErrUserNotFound}},
	{state.ErrPermissionDenied, []error{rpctypes.ErrPermissionDenied}},
	{state.ErrTimeout, []error{rpctypes.ErrTimeout, rpctypes.ErrTimeoutDueToLeaderFail,
		rpctypes.ErrTimeoutDueToConnectionLost, rpctypes.ErrTimeoutWaitAppliedIndex}},
	{state.ErrUnavailable, []error{rpctypes.ErrNoLeader, rpctypes.ErrNotLeader,
		rpctypes.ErrLeaderChanged, rpctypes.ErrStopped, rpctypes.ErrNotCapable, rpctypes.ErrUnhealthy,
		rpctypes.ErrTooManyRequests, rpctypes.ErrNoSpace}},
}

// classifyRPC returns the sentinel of an etcd typed error, or nil.
func classifyRPC(e error) error {
	for _, r := range rpcSentinels {
		for _, x := range r.errs {
			if errors.Is(e, x) {
				return r.sentinel
			}
		}
	}
	return nil
}

// classifyStatus returns the sentinel of a gRPC status error, or nil.
func classifyStatus(e error, noConn bool) error {
	st, ok := status.FromError(e)
	if !ok {
		return nil
	}
	switch st.Code() {
	case codes.Unavailable:
		return state.ErrUnavailable
	case codes.DeadlineExceeded:
		if noConn || waitingForConnection(st) {
			return state.ErrUnavailable
		}
		return state.ErrTimeout
	case codes.Unauthenticated:
		return state.ErrUnauthenticated
	case codes.PermissionDenied:
		return state.ErrPermissionDenied
	}
	return nil
}

// grpcCodes names the codes an embedded status may carry.
var grpcCodes = map[string]codes.Code{
	"Unavailable":        codes.Unavailable,
	"DeadlineExceeded":   codes.DeadlineExceeded,
	"Unauthenticated":    codes.Unauthenticated,
	"PermissionDenied":   codes.PermissionDenied,
	"OutOfRange":         codes.OutOfRange,
	"InvalidArgument":    codes.InvalidArgument,
	"FailedPrecondition": codes.FailedPrecondition,
}

// embeddedStatus parses a status rendered as text by the server, as
// "rpc error: code = <Code> desc = <description>".
func embeddedStatus(msg string) (error, bool) {
	rest, ok := strings.CutPrefix(msg, "rpc error: code = ")
	if !ok {
		return nil, false
	}
	name, desc, ok := strings.Cut(rest, " desc = ")
	if !ok {
		return nil, false
	}
	code, ok := grpcCodes[name]
	if !ok {
		code = codes.Unknown
	}
	return status.Error(code, desc), true
}

// waitingForConnection reports whether a gRPC deadline or cancellation
// status was raised while the call waited for a ready connection (the
// picker's wording in grpc-go): the server was never reached.
func waitingForConnection(st *status.Status) bool {
	switch st.Code() {
	case codes.DeadlineExceeded, codes.Canceled, codes.Unavailable:
	default:
		return false
	}
	m := st.Message()
	return strings.Contains(m, "latest balancer error") ||
		strings.Contains(m, "while waiting for connections to become ready")
}

// callInfo collects what the gRPC layer saw during one store operation; the
// client reduces such errors to context.DeadlineExceeded before returning.
type callInfo struct {
	noConn atomic.Bool
}

func (ci *callInfo) noConnection() bool { return ci != nil && ci.noConn.Load() }

type callInfoKey struct{}

func withCallInfo(ctx context.Context) (context.Context, *callInfo) {
	ci := &callInfo{}
	return context.WithValue(ctx, callInfoKey{}, ci), ci
}

func callInfoFrom(ctx context.Context) *callInfo {
	ci, _ := ctx.Value(callInfoKey{}).(*callInfo)
	return ci
}

func noteError(ctx context.Context, err error) {
	if err == nil {
		return
	}
	if st, ok := status.FromError(err); ok && waitingForConnection(st) {
		if ci := callInfoFrom(ctx); ci != nil {
			ci.noConn.Store(true)
		}
	}
}

// connUnaryInterceptor runs inside the client's retry interceptor, once per
// attempt, and records attempts that never reached a server.
func connUnaryInterceptor(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	noteError(ctx, err)
	return err
}

// connStreamInterceptor does the same for stream creation.
func connStreamInterceptor(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cs, err := streamer(ctx, desc, cc, method, opts...)
	noteError(ctx, err)
	return cs, err
}
