package statetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

func runConcurrency(t *testing.T, newHarness Factory) {
	t.Run("ConcurrentWriters", func(t *testing.T) { runConcurrentWriters(t, newHarness) })
	t.Run("Linearizable", func(t *testing.T) { runLinearizable(t, newHarness) })
	t.Run("LinearizableWithExpiry", func(t *testing.T) { runLinearizableExpiry(t, newHarness) })
}

// runConcurrentWriters has goroutines write their own nodes and race on a
// shared one while a watch records every change. Every accepted write must
// appear exactly once, in an order where each node's sequence only grows,
// and the final state must hold each node's highest sequence.
func runConcurrentWriters(t *testing.T, newHarness Factory) {
	e := setup(t, newHarness)
	const writers, perWriter = 8, 15
	snap := e.snapshot(e.cluster)
	w := e.watch(e.cluster, snap.Revision)
	ctx, cancel := context.WithTimeout(t.Context(), 4*opTimeout)
	defer cancel()

	var accepted atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for g := range writers {
		wg.Go(func() {
			own := fmt.Sprintf("own-%d", g)
			for i := range perWriter {
				seq := uint64(i + 1)
				res, err := e.s.UpsertNode(ctx, newRecord(e.cluster, cluster.RoleWorker, own, "inc-a", seq), longTTL)
				if err != nil {
					errs <- fmt.Errorf("writer %d: UpsertNode(%s seq %d): %w", g, own, seq, err)
					return
				}
				if res.Outcome != state.OutcomeAccepted {
					errs <- fmt.Errorf("writer %d: its own node's seq %d was %s", g, seq, res.Outcome)
					return
				}
				accepted.Add(1)
				// Distinct sequences for the shared node, interleaved across writers.
				shared := uint64(i*writers + g + 1)
				res, err = e.s.UpsertNode(ctx, newRecord(e.cluster, cluster.RoleWorker, "shared", "inc-a", shared), longTTL)
				if err != nil {
					errs <- fmt.Errorf("writer %d: UpsertNode(shared seq %d): %w", g, shared, err)
					return
				}
				switch res.Outcome {
				case state.OutcomeAccepted:
					accepted.Add(1)
				case state.OutcomeStale:
					if res.Record == nil || res.Record.HeartbeatSeq <= shared {
						errs <- fmt.Errorf("writer %d: shared seq %d stale against %s", g, shared, describe(res.Record))
						return
					}
				default:
					errs <- fmt.Errorf("writer %d: shared seq %d was %s", g, shared, res.Outcome)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	final := e.snapshot(e.cluster)
	if len(final.Records) != writers+1 {
		t.Fatalf("final snapshot holds %d records, want %d", len(final.Records), writers+1)
	}
	for g := range writers {
		mustFind(t, final, e.rec(cluster.RoleWorker, fmt.Sprintf("own-%d", g), "inc-a", perWriter))
	}
	mustFind(t, final, e.rec(cluster.RoleWorker, "shared", "inc-a", writers*perWriter))

	events := w.next(int(accepted.Load()))
	last := make(map[string]uint64)
	// One write of several nodes may share a revision (etcd's group commit
	// puts them in one transaction); one node's may not.
	type nodeRev struct {
		node string
		rev  state.Revision
	}
	revs := make(map[nodeRev]bool)
	for _, ev := range events {
		if ev.Type != state.EventPut || ev.Record == nil {
			t.Fatalf("unexpected event %s", describeEvent(ev))
		}
		nr := nodeRev{ev.Key.NodeID, ev.Revision}
		if revs[nr] {
			t.Fatalf("two events of %s at revision %s", ev.Key, ev.Revision)
		}
		revs[nr] = true
		if prev := last[ev.Key.NodeID]; ev.Record.HeartbeatSeq <= prev {
			t.Fatalf("watch delivered %s seq %d after seq %d", ev.Key, ev.Record.HeartbeatSeq, prev)
		}
		last[ev.Key.NodeID] = ev.Record.HeartbeatSeq
	}
	if got := last["shared"]; got != writers*perWriter {
		t.Fatalf("last shared event has seq %d, want %d", got, writers*perWriter)
	}
	// Nothing beyond the accepted writes: the next event is the marker's.
	marker := e.rec(cluster.RoleWorker, "marker", "inc-a", 1)
	w.expect(putOf(e.mustUpsert(marker, longTTL, cluster.DecisionInsert, marker)))
}

// Linearizability history sizes: small enough for a real etcd to run it in
// a few seconds, large enough to interleave.
const (
	linWriters       = 4
	linNodes         = 3
	linOpsPerNode    = 50 // per writer and node, over two incarnations
	linReaders       = 2
	linReadsPerRound = 200 // upper bound of snapshots per reader
)

// linInput is one operation on one node's slot.
type linInput struct {
	read     bool
	node     int
	phase    int // incarnation index: 0 or 1
	seq      uint64
	register bool // a registration; otherwise a heartbeat
}

// linOutput is what the operation returned: the decision (writes) and the
// record the slot held afterwards (writes) or that the read saw.
type linOutput struct {
	decision cluster.Decision
	present  bool
	phase    int
	seq      uint64
	gen      uint64 // the store-issued generation
}

// linState is the model's state of one slot.
type linState struct {
	present bool
	phase   int
	seq     uint64
	gen     uint64
	// superseded: the slot has held phase 1 after phase 0, so phase 0 is
	// in its superseded list.
	superseded bool
}

// linModel is the ordering rule over (incarnation, seq) of one slot,
// partitioned by node: per-slot linearizability of writes and reads.
func linModel() porcupine.Model {
	return porcupine.Model{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			parts := make([][]porcupine.Operation, linNodes)
			for _, op := range history {
				n := op.Input.(linInput).node
				parts[n] = append(parts[n], op)
			}
			return parts
		},
		Init: func() any { return linState{} },
		Step: linStep,
		DescribeOperation: func(in, out any) string {
			i, o := in.(linInput), out.(linOutput)
			if i.read {
				return fmt.Sprintf("read(n%d) -> %t i%d s%d g%d", i.node, o.present, o.phase, o.seq, o.gen)
			}
			op := "heartbeat"
			if i.register {
				op = "register"
			}
			return fmt.Sprintf("%s(n%d, i%d, s%d) -> %s i%d s%d g%d", op, i.node, i.phase, i.seq, o.decision, o.phase, o.seq, o.gen)
		},
		DescribeState: func(st any) string {
			s := st.(linState)
			if !s.present {
				return "empty"
			}
			return fmt.Sprintf("i%d s%d g%d", s.phase, s.seq, s.gen)
		},
	}
}

// runLinearizable has writers relay heartbeats of the same few nodes the
// way several coordinators would: interleaved, duplicated and delayed
// (resent out of order), with one restart per node, while readers take
// snapshots. porcupine checks the recorded history against the ordering
// rule; the case also checks that no reader saw a record move backward,
// that equal revisions meant equal snapshots and that each node ends at
// its newest accepted update.
func runLinearizable(t *testing.T, newHarness Factory) {
	e := setup(t, newHarness)
	r := &linRun{e: e, seed: rand.Uint64(), start: time.Now(), byRevision: make(map[state.Revision]*state.Snapshot)}
	t.Logf("seed %d", r.seed)
	r.ctx, r.cancel = context.WithTimeout(t.Context(), 6*opTimeout)
	defer r.cancel()
	r.barrier.Add(linWriters)

	var wg sync.WaitGroup
	for c := range linWriters {
		wg.Go(func() { r.writer(c) })
	}
	var readers sync.WaitGroup
	for i := range linReaders {
		readers.Go(func() { r.reader(i) })
	}
	wg.Wait()
	// Each restarted process registers once more at its newest sequence,
	// so the final state is known whatever order the relays took.
	for n := range linNodes {
		r.write(0, n, 1, r.counters[1][n].Load()-1, true)
	}
	r.writersDone.Store(true)
	readers.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failure != nil {
		t.Fatal(r.failure)
	}
	r.check(t)
}

// linRun is the shared state of one run of runLinearizable.
type linRun struct {
	e      *env
	seed   uint64
	start  time.Time
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex // guards ops and failure
	ops     []porcupine.Operation
	failure error

	// counters[phase][node] hands out fresh sequences; the restart phase
	// starts again from zero, below everything the first phase sent.
	counters    [2][linNodes]atomic.Uint64
	barrier     sync.WaitGroup // every writer's first phase is done
	writersDone atomic.Bool

	snapMu     sync.Mutex // guards byRevision
	byRevision map[state.Revision]*state.Snapshot
}

func linInc(node, phase int) string { return fmt.Sprintf("inc-%d-%d", phase, node) }

func linParseInc(s string) (node, phase int, ok bool) {
	_, err := fmt.Sscanf(s, "inc-%d-%d", &phase, &node)
	return node, phase, err == nil && node >= 0 && node < linNodes && (phase == 0 || phase == 1)
}

func linNodeName(n int) string { return fmt.Sprintf("lin-%d", n) }

func (r *linRun) now() int64 { return int64(time.Since(r.start)) }

func (r *linRun) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failure == nil {
		r.failure = err
	}
	r.cancel()
}

func (r *linRun) record(op porcupine.Operation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, op)
}

func (r *linRun) write(client, node, phase int, seq uint64, register bool) {
	rec := newRecord(r.e.cluster, cluster.RoleWorker, linNodeName(node), linInc(node, phase), seq)
	var opts []state.UpsertOption
	if !register {
		opts = append(opts, state.Heartbeat())
	}
	call := r.now()
	res, err := r.e.s.UpsertNode(r.ctx, rec, longTTL, opts...)
	ret := r.now()
	if err != nil {
		r.fail(fmt.Errorf("writer %d: UpsertNode(%s %s seq %d): %w", client, linNodeName(node), linInc(node, phase), seq, err))
		return
	}
	out := linOutput{decision: res.Decision}
	if res.Record != nil {
		n, p, ok := linParseInc(res.Record.IncarnationID)
		if !ok || n != node {
			r.fail(fmt.Errorf("writer %d: slot %s holds unknown incarnation %q", client, linNodeName(node), res.Record.IncarnationID))
			return
		}
		out.present, out.phase, out.seq, out.gen = true, p, res.Record.HeartbeatSeq, res.Record.Generation
	}
	r.record(porcupine.Operation{ClientId: client, Input: linInput{node: node, phase: phase, seq: seq, register: register}, Call: call, Output: out, Return: ret})
}

// writer relays messages of both incarnations of every node.
func (r *linRun) writer(c int) {
	rng := rand.New(rand.NewPCG(r.seed, uint64(c)))
	arrived := false
	defer func() {
		if !arrived { // failed early: do not leave the others waiting
			r.barrier.Done()
		}
	}()
	for phase := range 2 {
		if phase == 1 {
			// Every first-incarnation heartbeat is sent before any node
			// restarts, so readers can order what they see.
			arrived = true
			r.barrier.Done()
			r.barrier.Wait()
		}
		if !r.writePhase(c, phase, rng) {
			return
		}
	}
}

// writePhase sends one writer's messages of one incarnation; false when
// the run is over.
func (r *linRun) writePhase(c, phase int, rng *rand.Rand) bool {
	sent := make([][]uint64, linNodes) // what this writer relayed, per node
	for i := range linNodes * linOpsPerNode / 2 {
		if r.ctx.Err() != nil {
			return false
		}
		node := (i + c) % linNodes
		if rng.IntN(3) == 0 {
			node = rng.IntN(linNodes)
		}
		var seq uint64
		switch x := rng.IntN(10); {
		case x < 2 && len(sent[node]) > 0: // duplicate the last one
			seq = sent[node][len(sent[node])-1]
		case x < 4 && len(sent[node]) > 0: // a delayed one
			seq = sent[node][rng.IntN(len(sent[node]))]
		default:
			seq = r.counters[phase][node].Add(1)
			if phase == 1 {
				seq-- // the restarted process starts at zero
			}
		}
		sent[node] = append(sent[node], seq)
		// One message in five registers (first registrations,
		// re-registrations, delayed ones); the rest are heartbeats,
		// refused until their incarnation holds the slot.
		r.write(c, node, phase, seq, rng.IntN(5) == 0)
		if rng.IntN(4) == 0 {
			time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
		}
	}
	return true
}

// linSeen is what a reader last saw of a node.
type linSeen struct {
	phase int
	seq   uint64
}

// reader takes snapshots until the writers are done.
func (r *linRun) reader(i int) {
	client := linWriters + i
	rng := rand.New(rand.NewPCG(r.seed, uint64(client)))
	last := make(map[int]linSeen)
	for range linReadsPerRound {
		if r.ctx.Err() != nil || r.writersDone.Load() {
			return
		}
		if err := r.read(client, last); err != nil {
			r.fail(fmt.Errorf("reader %d: %w", i, err))
			return
		}
		time.Sleep(time.Duration(rng.IntN(300)) * time.Microsecond)
	}
}

// read takes one snapshot, checks it against the reader's last one and
// the other snapshots at its revision, and records one read per node.
func (r *linRun) read(client int, last map[int]linSeen) error {
	call := r.now()
	snap, err := r.e.s.Snapshot(r.ctx, r.e.cluster)
	ret := r.now()
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	r.snapMu.Lock()
	prev, ok := r.byRevision[snap.Revision]
	r.byRevision[snap.Revision] = snap
	r.snapMu.Unlock()
	if ok && !sameSnapshot(prev, snap) {
		return fmt.Errorf("two snapshots at revision %s differ", snap.Revision)
	}
	outs, err := linOutputs(snap)
	if err != nil {
		return err
	}
	for n, o := range outs {
		// Once present a record never disappears (no expiry, no removal
		// here) and never moves backward.
		prev, had := last[n]
		switch {
		case had && !o.present:
			return fmt.Errorf("%s disappeared after (incarnation %d, seq %d)", linNodeName(n), prev.phase, prev.seq)
		case had && (o.phase < prev.phase || o.phase == prev.phase && o.seq < prev.seq):
			return fmt.Errorf("%s moved backward from (incarnation %d, seq %d) to (incarnation %d, seq %d)", linNodeName(n), prev.phase, prev.seq, o.phase, o.seq)
		}
		if o.present {
			last[n] = linSeen{o.phase, o.seq}
		}
		r.record(porcupine.Operation{ClientId: client, Input: linInput{read: true, node: n}, Call: call, Output: o, Return: ret})
	}
	return nil
}

// linOutputs is what a snapshot shows of each node.
func linOutputs(snap *state.Snapshot) ([]linOutput, error) {
	outs := make([]linOutput, linNodes)
	for _, rec := range snap.Records {
		n, p, ok := linParseInc(rec.IncarnationID)
		if !ok || rec.NodeID != linNodeName(n) {
			return nil, fmt.Errorf("unexpected record %s", describe(rec))
		}
		if outs[n].present {
			return nil, fmt.Errorf("two records for %s", rec.NodeID)
		}
		outs[n] = linOutput{present: true, phase: p, seq: rec.HeartbeatSeq, gen: rec.Generation}
	}
	return outs, nil
}

// check adds a final read to the history, checks the history, and only
// then the final state itself, so a violation is reported as such. mu is
// held.
func (r *linRun) check(t *testing.T) {
	e := r.e
	call := r.now()
	final := e.snapshot(e.cluster)
	ret := r.now()
	outs, err := linOutputs(final)
	if err != nil {
		t.Fatal(err)
	}
	for n, o := range outs {
		r.ops = append(r.ops, porcupine.Operation{ClientId: linWriters + linReaders, Input: linInput{read: true, node: n}, Call: call, Output: o, Return: ret})
	}
	reads := 0
	for _, op := range r.ops {
		if op.Input.(linInput).read {
			reads++
		}
	}
	t.Logf("checking %d operations (%d reads) for linearizability", len(r.ops), reads)
	model := linModel()
	checkStart := time.Now()
	res := porcupine.CheckOperationsTimeout(model, r.ops, time.Minute)
	t.Logf("porcupine: %s in %s", res, time.Since(checkStart).Round(time.Millisecond))
	if res != porcupine.Ok {
		t.Fatalf("the history is not linearizable under the ordering rule (porcupine: %s, seed %d)%s", res, r.seed, visualize(t, model, r.ops))
	}
	// The final state is each node's newest accepted update: the highest
	// sequence its restarted incarnation sent.
	for n := range linNodes {
		mustFind(t, final, newRecord(e.cluster, cluster.RoleWorker, linNodeName(n), linInc(n, 1), r.counters[1][n].Load()-1))
	}
}

// linStep is linModel's step: the ordering rule over one slot.
func linStep(st, in, out any) (bool, any) {
	s, i, o := st.(linState), in.(linInput), out.(linOutput)
	if i.read {
		return o.present == s.present && (!s.present || o.phase == s.phase && o.seq == s.seq && o.gen == s.gen), s
	}
	var stored *cluster.Record
	if s.present {
		stored = &cluster.Record{IncarnationID: fmt.Sprint(s.phase), HeartbeatSeq: s.seq, StartTimeUnixMs: recordStart}
		if s.superseded {
			stored.Superseded = []string{"0"}
		}
	}
	u := cluster.UpdateHeartbeat
	if i.register {
		u = cluster.UpdateRegister
	}
	d := cluster.Order(stored, &cluster.Record{IncarnationID: fmt.Sprint(i.phase), HeartbeatSeq: i.seq, StartTimeUnixMs: recordStart}, u)
	if o.decision != d {
		return false, s
	}
	next := s
	switch d {
	case cluster.DecisionInsert, cluster.DecisionRestart:
		// A registration: the store issues a greater generation.
		if o.gen <= s.gen {
			return false, s
		}
		next = linState{present: true, phase: i.phase, seq: i.seq, gen: o.gen, superseded: s.superseded || s.present && s.phase != i.phase}
	case cluster.DecisionAdvance:
		next.seq = i.seq
	}
	if !next.present {
		return !o.present, next // refused with no record: nothing holds the slot
	}
	return o.present && o.phase == next.phase && o.seq == next.seq && o.gen == next.gen, next
}

// visualize writes porcupine's HTML view of a failed history to the test's
// artifact directory (kept when go test runs with -artifacts) and returns a
// note naming it.
func visualize(t *testing.T, model porcupine.Model, ops []porcupine.Operation) string {
	_, info := porcupine.CheckOperationsVerbose(model, ops, time.Minute)
	f, err := os.CreateTemp(t.ArtifactDir(), "linearizability-*.html")
	if err != nil {
		return ""
	}
	defer f.Close()
	if err := porcupine.Visualize(model, info, f); err != nil {
		return ""
	}
	return "; history: " + f.Name() + " (kept with go test -artifacts)"
}
