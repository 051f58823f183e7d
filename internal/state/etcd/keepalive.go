package etcd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// keeper refreshes leases one at a time, on demand, over a few long-lived
// LeaseKeepAlive streams: one request message and one response message per
// refresh.
//
// clientv3.Lease.KeepAliveOnce opens a new stream per call, and the client
// authenticates every new stream (a password check and a Raft write on the
// server) when a username is set, so it would cost an extra, expensive
// request per heartbeat. Lease.KeepAlive keeps a lease alive until its
// context ends, which would keep a record alive after its process stopped
// sending heartbeats. Hence this: the server answers each stream's requests
// in order, so responses are matched to requests first in, first out (and
// checked by lease ID).
type keeper struct {
	client   pb.LeaseClient
	lifetime context.Context
	spawn    func(func()) bool // starts a goroutine the store waits for; false once closed
	log      *slog.Logger
	slots    []*kaSlot
	next     atomic.Uint64
}

// keepAliveStreams is the number of streams refreshes are spread over: the
// server handles one stream's requests one after another.
const keepAliveStreams = 4

// maxPending bounds the refreshes waiting on one stream; a stream that
// falls that far behind is considered stuck and replaced.
const maxPending = 4096

func newKeeper(client pb.LeaseClient, lifetime context.Context, spawn func(func()) bool, log *slog.Logger) *keeper {
	k := &keeper{client: client, lifetime: lifetime, spawn: spawn, log: log}
	for range keepAliveStreams {
		k.slots = append(k.slots, &kaSlot{open: make(chan struct{}, 1)})
	}
	return k
}

// kaSlot holds the current session of one stream.
type kaSlot struct {
	open chan struct{} // a one-token lock held while opening a session
	cur  atomic.Pointer[kaSession]
}

// kaSession is one LeaseKeepAlive stream and the refreshes waiting on it.
type kaSession struct {
	stream pb.Lease_LeaseKeepAliveClient
	cancel context.CancelFunc

	sendMu sync.Mutex // serialises Send with the append to pending, so pending is in send order

	mu      sync.Mutex // guards the fields below
	pending []*kaWaiter
	err     error // set once the session failed; it takes no more requests
}

type kaWaiter struct {
	id int64
	ch chan kaResult // buffered: the receiver never blocks on a caller that gave up
}

type kaResult struct {
	ttl int64
	err error
}

// keepAlive refreshes lease id and returns its TTL in seconds, 0 when the
// lease no longer exists.
func (k *keeper) keepAlive(ctx context.Context, id int64) (int64, error) {
	var lastErr error
	for range 2 {
		ttl, err := k.keepAliveOnce(ctx, id)
		if err == nil {
			return ttl, nil
		}
		lastErr = err
		// A stream authenticated with a token that has since expired fails
		// with an auth error; a new stream fetches a new token. Retry once.
		e := rpctypes.Error(err)
		if ctx.Err() != nil || !(errors.Is(e, rpctypes.ErrInvalidAuthToken) || errors.Is(e, rpctypes.ErrAuthOldRevision)) {
			break
		}
	}
	return 0, lastErr
}

func (k *keeper) keepAliveOnce(ctx context.Context, id int64) (int64, error) {
	slot := k.slots[k.next.Add(1)%uint64(len(k.slots))]
	sess, err := k.session(ctx, slot)
	if err != nil {
		return 0, err
	}
	w := &kaWaiter{id: id, ch: make(chan kaResult, 1)}
	if err := sess.send(ctx, w); err != nil {
		return 0, err
	}
	select {
	case r := <-w.ch:
		return r.ttl, r.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// session returns the slot's live session, opening one if needed.
func (k *keeper) session(ctx context.Context, slot *kaSlot) (*kaSession, error) {
	if s := slot.cur.Load(); s != nil && !s.failed() {
		return s, nil
	}
	select {
	case slot.open <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-slot.open }()
	if s := slot.cur.Load(); s != nil && !s.failed() {
		return s, nil
	}
	if err := k.lifetime.Err(); err != nil {
		return nil, err
	}
	// The stream lives as long as the store; the caller's context bounds
	// only its opening (which authenticates when a username is set). The
	// callInfo lets the caller's error mapping see a connection failure.
	sctx, cancel := context.WithCancel(clientv3.WithRequireLeader(k.lifetime))
	if ci := callInfoFrom(ctx); ci != nil {
		sctx = context.WithValue(sctx, callInfoKey{}, ci)
	}
	stopOpen := context.AfterFunc(ctx, cancel)
	stream, err := k.client.LeaseKeepAlive(sctx)
	if !stopOpen() {
		cancel()
		return nil, ctx.Err()
	}
	if err != nil {
		cancel()
		return nil, err
	}
	s := &kaSession{stream: stream, cancel: cancel}
	if !k.spawn(func() { k.receive(s) }) {
		cancel()
		return nil, errors.New("lease keepalive stream: store closed")
	}
	slot.cur.Store(s)
	return s, nil
}

// receive delivers responses to waiters until the stream fails.
func (k *keeper) receive(s *kaSession) {
	for {
		resp, err := s.stream.Recv()
		if err != nil {
			s.fail(err)
			return
		}
		s.mu.Lock()
		if len(s.pending) == 0 {
			s.mu.Unlock()
			s.fail(fmt.Errorf("lease keepalive stream: response for lease %x with no request waiting", resp.ID))
			return
		}
		w := s.pending[0]
		s.pending[0] = nil
		s.pending = s.pending[1:]
		s.mu.Unlock()
		if resp.ID != w.id {
			err := fmt.Errorf("lease keepalive stream: response for lease %x, expected %x", resp.ID, w.id)
			w.ch <- kaResult{err: err}
			s.fail(err)
			return
		}
		w.ch <- kaResult{ttl: resp.TTL}
	}
}

// send queues w and sends its request. A Send blocked past ctx (the
// server stopped reading and the flow-control window is full) fails the
// session, whose pending refreshes then fail too.
func (s *kaSession) send(ctx context.Context, w *kaWaiter) error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return err
	}
	if len(s.pending) >= maxPending {
		s.mu.Unlock()
		err := fmt.Errorf("lease keepalive stream: %d refreshes unanswered", maxPending)
		s.fail(err)
		return err
	}
	s.pending = append(s.pending, w)
	s.mu.Unlock()
	var sending atomic.Bool
	sending.Store(true)
	stop := context.AfterFunc(ctx, func() {
		if sending.Load() {
			s.fail(fmt.Errorf("lease keepalive stream: send blocked: %w", ctx.Err()))
		}
	})
	err := s.stream.Send(&pb.LeaseKeepAliveRequest{ID: w.id})
	sending.Store(false)
	stop()
	if errors.Is(err, io.EOF) {
		// The stream ended; Recv reports why, and fails w with it.
		return nil
	}
	if err != nil {
		s.fail(err)
		return err
	}
	return nil
}

func (s *kaSession) failed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err != nil
}

// fail ends the session: every waiter gets err, the stream is cancelled
// and the next refresh opens a new session.
func (s *kaSession) fail(err error) {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	s.err = err
	pending := s.pending
	s.pending = nil
	s.mu.Unlock()
	s.cancel()
	for _, w := range pending {
		w.ch <- kaResult{err: err}
	}
}
