package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/talonhq/talon/internal/state"
)

// Group commit bounds. etcd refuses a transaction with more operations
// than its --max-txn-ops (default 128) in any branch; a smaller server
// limit is learned from the refusal (committer.maxOps halves).
const (
	maxGroupOps     = 128
	maxGroupBatches = 4 // transactions in flight per store
)

// committer coalesces the compare-and-swap puts of concurrent UpsertNode
// calls into one etcd transaction, group commit: each put keeps its own
// compare, as a nested transaction
//
//	Txn Then(
//	    Txn If(ModRevision(k1) == r1) Then(Put(k1, v1, L1)) Else(Get(k1)),
//	    Txn If(ModRevision(k2) == r2) Then(Put(k2, v2, L2)) Else(Get(k2)),
//	    ...)
//
// so every put still succeeds or fails on its own, and its caller gets
// the outcome of its own compare (and the Else read) exactly as from a
// transaction of its own. One transaction is one Raft proposal and one
// apply for the whole group: under load, etcd's per-request cost, not its
// disk, is what limits heartbeats.
//
// A call joins the queue; when fewer than maxGroupBatches transactions are
// in flight it starts one with everything queued (up to maxOps puts, one
// per key: etcd refuses a key twice in one transaction), and whichever
// transaction finishes next takes the next group. So an idle store sends
// each put at once, alone, and a busy one sends as many per transaction as
// arrived during the last round trip.
//
// One put whose lease has expired fails the whole transaction (etcd checks
// every lease before applying any put); the group is then sent again as
// separate transactions, so only that put sees rpctypes.ErrLeaseNotFound.
type committer struct {
	s *Store

	mu       sync.Mutex // guards the fields below
	queue    []*commitOp
	inflight int // transactions in flight (at most maxGroupBatches)
	maxOps   int // puts per transaction: maxGroupOps, lowered when etcd refuses that many
}

// commitOp is one caller's put and where its outcome goes.
type commitOp struct {
	ctx    context.Context // the caller's: a put whose caller left is not sent
	key    string
	modRev int64 // the compare: the key's mod revision (0: absent)
	value  string
	lease  int64
	done   chan commitResult        // buffered: the sender never blocks
	ci     atomic.Pointer[callInfo] // the group transaction's call, once sent
}

// commitResult is one put's outcome: ok and the revision it was written
// at, or (compare failed) the key's current value read at rev, or err.
type commitResult struct {
	ok  bool
	rev int64
	kvs []*mvccpb.KeyValue
	err error
}

func newCommitter(s *Store) *committer { return &committer{s: s, maxOps: maxGroupOps} }

// commit sends op (alone or in a group) and returns its outcome, or ctx's
// error if ctx ends first (the put may still be applied then, as with any
// request whose answer is lost).
func (c *committer) commit(ctx context.Context, op *commitOp) commitResult {
	op.ctx = ctx
	op.done = make(chan commitResult, 1)
	c.mu.Lock()
	c.queue = append(c.queue, op)
	var group []*commitOp
	if c.inflight < maxGroupBatches {
		c.inflight++
		group = c.takeLocked()
	}
	c.mu.Unlock()
	if group != nil && !c.s.spawn(func() { c.run(group) }) {
		c.mu.Lock()
		c.inflight--
		c.mu.Unlock()
		for _, o := range group {
			o.done <- commitResult{err: errStoreClosed}
		}
	}
	select {
	case r := <-op.done:
		op.noteConn(ctx)
		return r
	case <-ctx.Done():
		op.noteConn(ctx)
		return commitResult{err: ctx.Err()}
	}
}

// noteConn marks the caller's call (in ctx) as one that never reached a
// server when the group transaction's attempts did not: mapError then
// reports state.ErrUnavailable, as for a request of the caller's own.
func (op *commitOp) noteConn(ctx context.Context) {
	if op.ci.Load().noConnection() {
		if ci := callInfoFrom(ctx); ci != nil {
			ci.noConn.Store(true)
		}
	}
}

// errStoreClosed is what a put queued when the store closed gets.
var errStoreClosed = fmt.Errorf("etcd: %w", state.ErrClosed)

// takeLocked removes the next group from the queue: up to maxOps puts of
// distinct keys, in arrival order; a second put of a key waits for the
// next group. Puts whose caller has left are answered and dropped.
func (c *committer) takeLocked() []*commitOp {
	group := make([]*commitOp, 0, min(len(c.queue), c.maxOps))
	keys := make(map[string]struct{}, cap(group))
	rest := c.queue[:0]
	for _, op := range c.queue {
		if err := op.ctx.Err(); err != nil {
			op.done <- commitResult{err: err}
			continue
		}
		if _, dup := keys[op.key]; dup || len(group) == c.maxOps {
			rest = append(rest, op)
			continue
		}
		keys[op.key] = struct{}{}
		group = append(group, op)
	}
	clear(c.queue[len(rest):])
	c.queue = rest
	return group
}

// run sends group, then the next groups queued meanwhile, until the queue
// is empty.
func (c *committer) run(group []*commitOp) {
	for {
		if len(group) > 0 {
			c.send(group)
		}
		c.mu.Lock()
		if len(c.queue) == 0 {
			c.inflight--
			c.mu.Unlock()
			return
		}
		group = c.takeLocked()
		c.mu.Unlock()
	}
}

// send commits group in one transaction and answers each put. A put
// alone is sent with its caller's context (deadline and call info), just
// as without group commit.
func (c *committer) send(group []*commitOp) {
	s := c.s
	if len(group) == 1 {
		group[0].done <- c.sendOne(group[0].ctx, group[0])
		return
	}
	ctx, cancel := context.WithTimeout(s.lifetime, s.opts.RequestTimeout)
	defer cancel()
	ctx, ci := withCallInfo(ctx)
	for _, op := range group {
		op.ci.Store(ci)
	}
	ops := make([]clientv3.Op, len(group))
	for i, op := range group {
		ops[i] = clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(op.key), "=", op.modRev)},
			[]clientv3.Op{clientv3.OpPut(op.key, op.value, clientv3.WithLease(clientv3.LeaseID(op.lease)))},
			[]clientv3.Op{clientv3.OpGet(op.key)})
	}
	s.stats.groupCommits.Add(1)
	s.stats.groupedPuts.Add(uint64(len(group)))
	resp, err := s.client.Txn(ctx).Then(ops...).Commit()
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound), errors.Is(err, rpctypes.ErrTooManyOps), errors.Is(err, rpctypes.ErrRequestTooLarge):
		if !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			c.mu.Lock()
			c.maxOps = max(1, min(c.maxOps, len(group))/2)
			c.mu.Unlock()
			s.log.Warn("etcd refused a group of puts; sending smaller groups", "puts", len(group), "err", err)
		}
		// Each put on its own, so each gets its own outcome.
		var wg sync.WaitGroup
		for _, op := range group {
			wg.Go(func() {
				op.done <- c.sendOne(op.ctx, op)
			})
		}
		wg.Wait()
		return
	case err != nil:
		for _, op := range group {
			op.done <- commitResult{err: err}
		}
		return
	}
	rev := resp.Header.Revision
	for i, op := range group {
		var r commitResult
		if i < len(resp.Responses) {
			if tr := resp.Responses[i].GetResponseTxn(); tr != nil {
				r = commitResult{ok: tr.Succeeded, rev: rev}
				if !tr.Succeeded && len(tr.Responses) > 0 {
					r.kvs = tr.Responses[0].GetResponseRange().GetKvs()
				}
				op.done <- r
				continue
			}
		}
		op.done <- commitResult{err: errors.New("etcd answered a group transaction without a result for each put")}
	}
}

// sendOne commits one put in a transaction of its own, with ctx (the
// caller's, so its call info records a missing connection).
func (c *committer) sendOne(ctx context.Context, op *commitOp) commitResult {
	resp, err := c.s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(op.key), "=", op.modRev)).
		Then(clientv3.OpPut(op.key, op.value, clientv3.WithLease(clientv3.LeaseID(op.lease)))).
		Else(clientv3.OpGet(op.key)).
		Commit()
	if err != nil {
		return commitResult{err: err}
	}
	r := commitResult{ok: resp.Succeeded, rev: resp.Header.Revision}
	if !resp.Succeeded {
		r.kvs = resp.Responses[0].GetResponseRange().GetKvs()
	}
	return r
}
