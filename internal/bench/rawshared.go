package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// sharedStreams are the LeaseKeepAlive streams the raw writers share when
// RawEtcdOptions.Streams is set: writer w sends on stream w mod len, and
// each stream has several requests in flight, as Talon's etcd store
// multiplexes its keepalives over a few streams. etcd answers one
// stream's requests one after another, in order, so the answers are
// matched to the requests first in, first out.
type sharedStreams struct {
	lc       pb.LeaseClient
	lifetime context.Context
	wg       *sync.WaitGroup // the receivers; Close waits for them

	mu    sync.Mutex // guards slots
	slots []*sharedStream
}

// sharedStream is one stream and the requests waiting on it.
type sharedStream struct {
	s      pb.Lease_LeaseKeepAliveClient
	sendMu sync.Mutex // serialises Send with the append to pending

	mu      sync.Mutex // guards the fields below
	pending []chan keepAliveAnswer
	err     error // set once the stream failed
}

type keepAliveAnswer struct {
	resp *pb.LeaseKeepAliveResponse
	err  error
}

func newSharedStreams(lc pb.LeaseClient, lifetime context.Context, n int, wg *sync.WaitGroup) *sharedStreams {
	return &sharedStreams{lc: lc, lifetime: lifetime, wg: wg, slots: make([]*sharedStream, n)}
}

// stream returns slot i's live stream, opening one if needed.
func (ss *sharedStreams) stream(i int) (*sharedStream, error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if st := ss.slots[i]; st != nil && st.failed() == nil {
		return st, nil
	}
	s, err := ss.lc.LeaseKeepAlive(clientv3.WithRequireLeader(ss.lifetime))
	if err != nil {
		return nil, fmt.Errorf("raw etcd: open a shared lease keepalive stream: %w", err)
	}
	st := &sharedStream{s: s}
	ss.slots[i] = st
	ss.wg.Go(st.receive)
	return st, nil
}

// keepAlive renews lease id on slot i's stream and returns the answer.
func (ss *sharedStreams) keepAlive(ctx context.Context, i int, id clientv3.LeaseID) (*pb.LeaseKeepAliveResponse, error) {
	st, err := ss.stream(i)
	if err != nil {
		return nil, err
	}
	ch := make(chan keepAliveAnswer, 1)
	st.sendMu.Lock()
	st.mu.Lock()
	if st.err != nil {
		st.mu.Unlock()
		st.sendMu.Unlock()
		return nil, st.err
	}
	st.pending = append(st.pending, ch)
	st.mu.Unlock()
	err = st.s.Send(&pb.LeaseKeepAliveRequest{ID: int64(id)})
	st.sendMu.Unlock()
	if err != nil {
		st.fail(err)
	}
	select {
	case a := <-ch:
		if a.err == nil && a.resp.ID != int64(id) {
			a.err = fmt.Errorf("raw etcd: keepalive answer for lease %x, expected %x", a.resp.ID, id)
			st.fail(a.err)
		}
		return a.resp, a.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// receive hands the stream's answers to the requests in order until the
// stream fails (or its lifetime ends).
func (st *sharedStream) receive() {
	for {
		resp, err := st.s.Recv()
		if err != nil {
			st.fail(err)
			return
		}
		st.mu.Lock()
		if len(st.pending) == 0 {
			st.mu.Unlock()
			st.fail(errors.New("raw etcd: keepalive answer with no request waiting"))
			return
		}
		ch := st.pending[0]
		st.pending = st.pending[1:]
		st.mu.Unlock()
		ch <- keepAliveAnswer{resp: resp}
	}
}

// fail marks the stream failed and fails the requests waiting on it.
func (st *sharedStream) fail(err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.err == nil {
		st.err = err
	}
	for _, ch := range st.pending {
		ch <- keepAliveAnswer{err: st.err}
	}
	st.pending = nil
}

func (st *sharedStream) failed() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.err
}
