package kube

import (
	"context"
	"sync"
	"time"
)

// sharedCall runs one request on behalf of every caller that asks for it
// while earlier runs are in flight: a caller gets the outcome of the first
// run that starts after it asked (never of one already running, so the
// answer is as fresh as if it had sent the request itself), and at most
// maxInflight runs are in flight at a time; callers that ask while all are
// busy share the next. The revision probe (two in flight, so the
// coordinator's two overlapping snapshot reads each get one without
// waiting for the other's) and the fence write (one) of the snapshot
// cache are shared calls.
//
// Runs happen on a goroutine of the store, bounded by RequestTimeout and
// by the store's lifetime; a caller whose context ends stops waiting, the
// run goes on for the others.
type sharedCall struct {
	s           *Store
	fn          func(ctx context.Context) (uint64, error)
	timeout     time.Duration
	maxInflight int

	mu       sync.Mutex    // guards the fields below
	inflight int           // runs in flight
	next     *sharedResult // the run callers join; not started yet
}

// sharedResult is the outcome of one run, set before done is closed.
type sharedResult struct {
	done chan struct{}
	v    uint64
	err  error
}

func newSharedCall(s *Store, maxInflight int, fn func(ctx context.Context) (uint64, error)) *sharedCall {
	return &sharedCall{s: s, fn: fn, timeout: s.opts.RequestTimeout, maxInflight: maxInflight}
}

// do returns the outcome of the first run that starts after the call,
// ctx's error if ctx ends first, or state.ErrClosed if the store is closed.
func (c *sharedCall) do(ctx context.Context) (uint64, error) {
	c.mu.Lock()
	if c.next == nil {
		c.next = &sharedResult{done: make(chan struct{})}
	}
	r := c.next
	if c.inflight < c.maxInflight {
		if err := c.s.goOwned(func() { c.run(r) }); err != nil {
			c.mu.Unlock()
			return 0, err
		}
		c.inflight++
		c.next = nil
	}
	c.mu.Unlock()
	select {
	case <-r.done:
		return r.v, r.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// run runs r, then the runs callers joined meanwhile, until none is
// waiting.
func (c *sharedCall) run(r *sharedResult) {
	for r != nil {
		ctx, cancel := context.WithTimeout(c.s.ctx, c.timeout)
		r.v, r.err = c.fn(ctx)
		cancel()
		close(r.done)
		c.mu.Lock()
		r, c.next = c.next, nil
		if r == nil {
			c.inflight--
		}
		c.mu.Unlock()
	}
}
