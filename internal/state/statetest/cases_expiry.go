package statetest

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

// Size of the expiry linearizability case.
const (
	xNodes        = 3
	xWriters      = 4
	xOpsPerWriter = 60
	xReaders      = 2
	xReads        = 40
)

// xKind is an operation of the expiry case.
type xKind uint8

const (
	xRead xKind = iota
	xRegister
	xHeartbeat
	xRemove
	xLate
	xExpire
)

func (k xKind) String() string {
	return [...]string{"read", "register", "heartbeat", "remove", "late", "expire"}[k]
}

// xInput is one operation on one node's slot, through store 0 or 1.
type xInput struct {
	kind  xKind
	node  int
	store int
	inc   int
	seq   uint64
	// short: the slot's records have a short lease the backend expires
	// itself, so the model lets them vanish at any moment.
	short bool
}

// xOutput is the outcome and decision of a write and the record the slot
// held afterwards (writes) or that the read saw.
type xOutput struct {
	outcome  state.Outcome
	decision cluster.Decision
	slot     xState
}

// xState is the model's state of one slot; the zero value is empty.
type xState struct {
	present bool
	inc     int
	seq     uint64
	gen     uint64
	late    bool
	sup     string // superseded incarnations, newest first, comma-joined
}

func xIncName(inc int) string { return "x" + strconv.Itoa(inc) }

// record is the slot as a cluster record, for cluster.Order and Next.
func (s xState) record() *cluster.Record {
	if !s.present {
		return nil
	}
	r := &cluster.Record{IncarnationID: xIncName(s.inc), HeartbeatSeq: s.seq, Generation: s.gen, Late: s.late, StartTimeUnixMs: recordStart}
	if s.sup != "" {
		r.Superseded = strings.Split(s.sup, ",")
	}
	return r
}

// xStateOf is what a store returned for the slot.
func xStateOf(r *cluster.Record) (xState, error) {
	if r == nil {
		return xState{}, nil
	}
	inc, err := strconv.Atoi(strings.TrimPrefix(r.IncarnationID, "x"))
	if err != nil {
		return xState{}, fmt.Errorf("unknown incarnation %q", r.IncarnationID)
	}
	return xState{present: true, inc: inc, seq: r.HeartbeatSeq, gen: r.Generation, late: r.Late, sup: strings.Join(r.Superseded, ",")}, nil
}

// xStep applies one operation to slot state s; ok is false when the store
// could not have answered out from s.
func xStep(s xState, in xInput, out xOutput) (next xState, ok bool) {
	switch in.kind {
	case xRead:
		return s, out.slot == s
	case xRegister, xHeartbeat:
		return xUpsert(s, in, out)
	}
	want, next := xTransition(s, in)
	if out.outcome != want || out.decision != 0 {
		return s, false
	}
	return next, out.slot == next
}

// xUpsert is the ordering rule: cluster.Order, then cluster.Next with a
// store-issued generation above the slot's.
func xUpsert(s xState, in xInput, out xOutput) (xState, bool) {
	u := cluster.UpdateHeartbeat
	if in.kind == xRegister {
		u = cluster.UpdateRegister
	}
	incoming := &cluster.Record{IncarnationID: xIncName(in.inc), HeartbeatSeq: in.seq, StartTimeUnixMs: recordStart} // as newRecord's
	d := cluster.Order(s.record(), incoming, u)
	if out.decision != d || out.outcome != state.OutcomeOf(d) {
		return s, false
	}
	if !d.Accepted() {
		return s, out.slot == s
	}
	n := cluster.Next(s.record(), incoming, d, 0)
	next := xState{present: true, inc: in.inc, seq: in.seq, gen: s.gen, sup: strings.Join(n.Superseded, ",")}
	if d != cluster.DecisionAdvance {
		if out.slot.gen <= s.gen {
			return s, false
		}
		next.gen = out.slot.gen
	}
	return next, out.slot == next
}

// xTransition is the outcome and the next state of a removal or a
// proposal.
func xTransition(s xState, in xInput) (state.Outcome, xState) {
	switch {
	case !s.present:
		return state.OutcomeNotFound, s
	case s.inc != in.inc:
		return state.OutcomeStale, s
	case in.kind == xRemove:
		return state.OutcomeAccepted, xState{}
	case s.seq != in.seq, in.kind == xLate && s.late:
		return state.OutcomeStale, s
	case in.kind == xExpire:
		return state.OutcomeAccepted, xState{}
	}
	s.late = true
	return state.OutcomeAccepted, s
}

// xModel is the ordering rule with removal, late marks and expiry, per
// slot. A slot whose lease the backend expires itself may become empty
// before any operation: the model is nondeterministic there.
func xModel() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			parts := make([][]porcupine.Operation, xNodes)
			for _, op := range history {
				n := op.Input.(xInput).node
				parts[n] = append(parts[n], op)
			}
			return parts
		},
		Init: func() []any { return []any{xState{}} },
		Step: func(st, in, out any) []any {
			s, i, o := st.(xState), in.(xInput), out.(xOutput)
			from := []xState{s}
			if i.short && s.present {
				from = append(from, xState{}) // the lease ran out first
			}
			var next []any
			for _, f := range from {
				if n, ok := xStep(f, i, o); ok {
					next = append(next, n)
				}
			}
			return next
		},
		DescribeOperation: func(in, out any) string {
			i, o := in.(xInput), out.(xOutput)
			return fmt.Sprintf("%s(n%d via s%d, i%d s%d) -> %s %s %s", i.kind, i.node, i.store, i.inc, i.seq, o.outcome, o.decision, xDescribe(o.slot))
		},
		DescribeState: func(st any) string { return xDescribe(st.(xState)) },
	}
	return nm.ToModel()
}

func xDescribe(s xState) string {
	if !s.present {
		return "empty"
	}
	return fmt.Sprintf("i%d s%d g%d late=%t sup=[%s]", s.inc, s.seq, s.gen, s.late, s.sup)
}

// xRun is the shared state of one run of the expiry case.
type xRun struct {
	e      *env
	stores [2]state.Store
	ctx    context.Context
	cancel context.CancelFunc
	start  time.Time
	seed   uint64

	life [xNodes]atomic.Int32              // each node's newest incarnation
	seqs [xNodes][xMaxLives]atomic.Uint64  // sequences handed out per node and incarnation
	last [xNodes]atomic.Pointer[[2]uint64] // an accepted (incarnation, seq) lately
	mu   sync.Mutex                        // guards ops and fail
	ops  []porcupine.Operation             // guarded by mu
	fail error                             // guarded by mu
}

// xMaxLives bounds the incarnations of one node in the expiry case.
const xMaxLives = 8

func (r *xRun) now() int64 { return int64(time.Since(r.start)) }

func (r *xRun) failed(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail == nil {
		r.fail = err
	}
	r.cancel()
}

func (r *xRun) record(client int, in xInput, call int64, out xOutput) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: r.now()})
}

func (r *xRun) key(node int) cluster.Key {
	return cluster.Key{ClusterID: r.e.cluster, Role: cluster.RoleWorker, NodeID: "x-" + strconv.Itoa(node)}
}

// pick chooses the next operation of a writer: mostly heartbeats of each
// node's newest incarnation, with registrations (some of them restarts),
// delayed and duplicated messages, removals and the proposals a
// coordinator makes for what it saw last.
func (r *xRun) pick(rng *rand.Rand, store int) xInput {
	in := xInput{node: rng.IntN(xNodes), store: store}
	in.short = in.node == 0 && r.e.h.LeaseExpiry
	life := int(r.life[in.node].Load())
	in.inc = life
	switch p := rng.IntN(100); {
	case p < 35:
		in.kind = xHeartbeat
	case p < 55:
		in.kind = xRegister
		if p < 40 && life+1 < xMaxLives && r.life[in.node].CompareAndSwap(int32(life), int32(life+1)) {
			in.inc = life + 1 // a restart
		}
	case p < 68:
		in.kind = xLate
	case p < 80:
		in.kind = xExpire
	case p < 85:
		in.kind = xRemove
	default:
		in.kind = xHeartbeat
		if life > 0 {
			in.inc = rng.IntN(life) // a dead incarnation's delayed heartbeat
		}
	}
	counter := &r.seqs[in.node][in.inc]
	switch {
	case in.kind == xLate || in.kind == xExpire:
		if l := r.last[in.node].Load(); l != nil && rng.IntN(4) > 0 {
			// What the proposer saw: the newest accepted update, or one
			// before it (a heartbeat landed since).
			in.inc, in.seq = int(l[0]), l[1]
			if in.seq > 0 && rng.IntN(3) == 0 {
				in.seq--
			}
		} else {
			in.seq = counter.Load()
		}
	case rng.IntN(5) == 0:
		in.seq = counter.Load() // a duplicate
	default:
		in.seq = counter.Add(1)
	}
	return in
}

// write runs one write and records it.
func (r *xRun) write(client int, in xInput) {
	s := r.stores[in.store]
	key := r.key(in.node)
	ttl := longTTL
	if in.short {
		ttl = r.e.h.LeaseTTL
	}
	call := r.now()
	var res state.WriteResult
	var err error
	switch in.kind {
	case xRegister, xHeartbeat:
		var opts []state.UpsertOption
		if in.kind == xHeartbeat {
			opts = append(opts, state.Heartbeat())
		}
		res, err = s.UpsertNode(r.ctx, newRecord(r.e.cluster, cluster.RoleWorker, key.NodeID, xIncName(in.inc), in.seq), ttl, opts...)
		if err == nil && res.Outcome == state.OutcomeAccepted {
			r.last[in.node].Store(&[2]uint64{uint64(in.inc), in.seq})
		}
	case xRemove:
		res, err = s.RemoveNode(r.ctx, key, xIncName(in.inc))
	case xLate:
		res, err = s.ProposeTransition(r.ctx, key, xIncName(in.inc), in.seq, state.TransitionLate)
	case xExpire:
		res, err = s.ProposeTransition(r.ctx, key, xIncName(in.inc), in.seq, state.TransitionExpire)
	}
	if err != nil {
		r.failed(fmt.Errorf("writer %d: %s(%s, i%d s%d) through store %d: %w", client, in.kind, key, in.inc, in.seq, in.store, err))
		return
	}
	slot, err := xStateOf(res.Record)
	if err != nil {
		r.failed(fmt.Errorf("writer %d: %s(%s): %w", client, in.kind, key, err))
		return
	}
	r.record(client, in, call, xOutput{outcome: res.Outcome, decision: res.Decision, slot: slot})
}

// read takes one snapshot through store and records one read per node.
func (r *xRun) read(client, store int) {
	call := r.now()
	snap, err := r.stores[store].Snapshot(r.ctx, r.e.cluster)
	if err != nil {
		r.failed(fmt.Errorf("reader %d: Snapshot through store %d: %w", client, store, err))
		return
	}
	for n := range xNodes {
		var rec *cluster.Record
		for _, x := range snap.Records {
			if x.Key() == r.key(n) {
				rec = x
			}
		}
		slot, err := xStateOf(rec)
		if err != nil {
			r.failed(fmt.Errorf("reader %d: %w", client, err))
			return
		}
		r.record(client, xInput{kind: xRead, node: n, store: store, short: n == 0 && r.e.h.LeaseExpiry}, call, xOutput{slot: slot})
	}
}

// runLinearizableExpiry drives two stores on one backend (two
// coordinators and their caches) with registrations, restarts, delayed
// heartbeats, removals, late marks and expiry proposals from several
// writers, and (where the backend has it) its own lease expiry of one
// node's short-lease records, while readers take snapshots through both.
// porcupine checks the history against the ordering rule with removal and
// transitions.
func runLinearizableExpiry(t *testing.T, newHarness Factory) {
	e := setup(t, newHarness)
	r := &xRun{e: e, start: time.Now(), seed: rand.Uint64()}
	r.stores = [2]state.Store{e.s, e.h.Peer(t, 0)}
	r.ctx, r.cancel = context.WithTimeout(t.Context(), 6*opTimeout)
	defer r.cancel()
	t.Logf("seed %d", r.seed)

	var writers, readers sync.WaitGroup
	var done atomic.Bool
	for c := range xWriters {
		writers.Go(func() {
			rng := rand.New(rand.NewPCG(r.seed, uint64(c)))
			for range xOpsPerWriter {
				if r.ctx.Err() != nil {
					return
				}
				r.write(c, r.pick(rng, rng.IntN(2)))
			}
		})
	}
	for i := range xReaders {
		client := xWriters + i
		readers.Go(func() {
			for j := 0; j < xReads && !done.Load() && r.ctx.Err() == nil; j++ {
				r.read(client, (i+j)%2)
				time.Sleep(time.Millisecond)
			}
		})
	}
	writers.Wait()
	done.Store(true)
	readers.Wait()
	r.read(xWriters+xReaders, 0)
	r.read(xWriters+xReaders, 1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		t.Fatal(r.fail)
	}
	counts := map[string]int{}
	for _, op := range r.ops {
		in, out := op.Input.(xInput), op.Output.(xOutput)
		if in.kind != xRead {
			counts[in.kind.String()+"/"+out.outcome.String()]++
		}
	}
	t.Logf("checking %d operations for linearizability: %v", len(r.ops), counts)
	if counts["late/accepted"] == 0 || counts["expire/accepted"]+counts["remove/accepted"] == 0 {
		t.Fatalf("the history holds no accepted late mark or no accepted expiry or removal (%v): it checks too little (seed %d)", counts, r.seed)
	}
	model := xModel()
	res := porcupine.CheckOperationsTimeout(model, r.ops, time.Minute)
	if res != porcupine.Ok {
		logIllegalSlot(t, model, r.ops)
		t.Fatalf("the history with expiry and removal through two stores is not linearizable (porcupine: %s, seed %d)%s", res, r.seed, visualize(t, model, r.ops))
	}
}

// logIllegalSlot logs the history of the first slot whose own history is
// not linearizable, in call order: what a reader needs to see why.
func logIllegalSlot(t *testing.T, model porcupine.Model, ops []porcupine.Operation) {
	t.Helper()
	for _, part := range model.Partition(ops) {
		if porcupine.CheckOperationsTimeout(model, part, 10*time.Second) == porcupine.Ok {
			continue
		}
		slices.SortFunc(part, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
		// The shortest illegal prefix in call order ends at the operation
		// no linearization can place: show it and what came before.
		lo, hi := 1, len(part)
		for lo < hi {
			mid := (lo + hi) / 2
			if porcupine.CheckOperationsTimeout(model, part[:mid], 10*time.Second) == porcupine.Ok {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
		t.Logf("the slot's history is illegal from operation %d of %d on:", lo, len(part))
		for _, op := range part[max(0, lo-30):lo] {
			t.Logf("[%d, %d] client %d: %s", op.Call/int64(time.Microsecond), op.Return/int64(time.Microsecond), op.ClientId, model.DescribeOperation(op.Input, op.Output))
		}
		return
	}
}
