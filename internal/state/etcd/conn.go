package etcd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/talonhq/talon/internal/state"
)

// conn is what every request of the store needs and nothing else: the
// client, the request timeout, the store's lifetime and the goroutines
// Close waits for. The store and each of its logs (jobs, cordons, events,
// renewals) hold it; none of them reaches back into Store.
type conn struct {
	client    *clientv3.Client
	endpoints []string      // for error messages
	timeout   time.Duration // Options.RequestTimeout

	// lifetime is cancelled by Close. It bounds the store's own goroutines
	// and streams (cache watch, lease streams, Watch goroutines), never a
	// caller's request.
	lifetime context.Context
	stop     context.CancelFunc
	wg       sync.WaitGroup // the goroutines above
	closed   atomic.Bool
	closeMu  sync.RWMutex // held to set closed, and shared while adding to wg

	// noSpace, if set, is told of every failure mapError maps, so a full
	// database is polled at once (capacity.go). Set before the first
	// request, read-only after.
	noSpace func(error)
}

// shut marks the conn closed, ends its lifetime and waits for its
// goroutines; it reports false when it was closed already.
func (c *conn) shut() bool {
	c.closeMu.Lock()
	if c.closed.Swap(true) {
		c.closeMu.Unlock()
		return false
	}
	c.closeMu.Unlock()
	c.stop()
	c.wg.Wait()
	return true
}

// spawn runs f in a goroutine that Close waits for, unless the store is
// closed.
func (c *conn) spawn(f func()) bool {
	c.closeMu.RLock()
	defer c.closeMu.RUnlock()
	if c.closed.Load() {
		return false
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f()
	}()
	return true
}

// begin prepares ctx for one operation: ErrClosed after Close, the default
// request timeout when ctx has no deadline, and a callInfo for the error
// mapping.
func (c *conn) begin(ctx context.Context, op string) (context.Context, context.CancelFunc, *callInfo, error) {
	if c.closed.Load() {
		return nil, nil, nil, fmt.Errorf("etcd %s: %w", op, state.ErrClosed)
	}
	cancel := context.CancelFunc(func() {})
	if _, ok := ctx.Deadline(); !ok {
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
	}
	// Close cancels operations in flight.
	ctx, cancelLife := context.WithCancel(ctx)
	stopLife := context.AfterFunc(c.lifetime, cancelLife)
	ctx, ci := withCallInfo(ctx)
	return ctx, func() { stopLife(); cancelLife(); cancel() }, ci, nil
}

// mapError wraps err with the sentinel classify assigns it, keeping err in
// the chain: "etcd <op>: <sentinel>: <cause>". A store that has been closed
// reports ErrClosed for the failures its closing caused.
func (c *conn) mapError(op string, err error, ci *callInfo) error {
	if err == nil {
		return nil
	}
	if c.closed.Load() && !errors.Is(err, state.ErrClosed) {
		return fmt.Errorf("etcd %s: %w: %w", op, state.ErrClosed, err)
	}
	if c.noSpace != nil {
		c.noSpace(err)
	}
	sentinel := classify(err, ci.noConnection())
	where := ""
	if errors.Is(sentinel, state.ErrUnavailable) || errors.Is(sentinel, state.ErrTimeout) || errors.Is(sentinel, state.ErrUnauthenticated) {
		// Name the endpoints: "context deadline exceeded" alone does not
		// say which etcd could not be reached.
		where = " (endpoints " + strings.Join(c.endpoints, ", ") + ")"
	}
	if sentinel == nil || errors.Is(err, sentinel) {
		return fmt.Errorf("etcd %s%s: %w", op, where, err)
	}
	return fmt.Errorf("etcd %s%s: %w: %w", op, where, sentinel, err)
}

// watch opens a watch of prefix for a log's watcher: puts only, bound to
// ctx and to the store's lifetime, ended when no leader answers. cancel
// releases it.
func (c *conn) watch(ctx context.Context, prefix string) (ch clientv3.WatchChan, wctx context.Context, cancel context.CancelFunc) {
	wctx, cancelW := context.WithCancel(clientv3.WithRequireLeader(ctx))
	stop := context.AfterFunc(c.lifetime, cancelW)
	return c.client.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithFilterDelete()), wctx, func() { stop(); cancelW() }
}
