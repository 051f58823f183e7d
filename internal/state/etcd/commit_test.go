package etcd

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/testenv"
)

// TestGroupOutcomesPerPut sends groups straight to the committer: every
// put in a group gets the outcome of its own compare (a lost compare gets
// the key's current value, the others are written at one revision), and a
// put on a revoked lease fails alone with ErrLeaseNotFound instead of
// failing the group.
func TestGroupOutcomesPerPut(t *testing.T) {
	testenv.SkipIfShort(t)
	e := testenv.StartEtcd(t, testenv.EtcdOptions{})
	ctx := testCtx(t)
	s := newStore(t, optionsFor(e, false))
	raw := e.Client(t)
	live, err := raw.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	dead, err := raw.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Revoke(ctx, dead.ID); err != nil {
		t.Fatal(err)
	}
	taken, err := raw.Put(ctx, "/group/taken", "someone else's")
	if err != nil {
		t.Fatal(err)
	}

	send := func(ops ...*commitOp) []commitResult {
		for _, op := range ops {
			op.ctx, op.done = ctx, make(chan commitResult, 1)
		}
		s.commit.send(ops)
		out := make([]commitResult, len(ops))
		for i, op := range ops {
			out[i] = <-op.done
		}
		return out
	}
	before := s.Stats()
	res := send(
		&commitOp{key: "/group/a", value: "a", lease: int64(live.ID)},
		&commitOp{key: "/group/taken", value: "mine", lease: int64(live.ID)}, // compares 0: absent
		&commitOp{key: "/group/b", value: "b", lease: int64(live.ID)},
	)
	if !res[0].ok || !res[2].ok || res[0].rev != res[2].rev || res[0].err != nil {
		t.Fatalf("puts a and b: %+v %+v, want both written at one revision", res[0], res[2])
	}
	if res[1].ok || res[1].err != nil || len(res[1].kvs) != 1 || string(res[1].kvs[0].Value) != "someone else's" || res[1].kvs[0].ModRevision != taken.Header.Revision {
		t.Fatalf("lost compare: %+v, want the current value", res[1])
	}
	if got := s.Stats(); got.GroupCommits != before.GroupCommits+1 || got.GroupedPuts != before.GroupedPuts+3 {
		t.Fatalf("stats %+v after one group of 3", got)
	}

	res = send(
		&commitOp{key: "/group/c", value: "c", lease: int64(live.ID)},
		&commitOp{key: "/group/d", value: "d", lease: int64(dead.ID)},
	)
	if !res[0].ok || res[0].err != nil {
		t.Fatalf("put c beside a dead lease: %+v, want written", res[0])
	}
	if !errors.Is(res[1].err, rpctypes.ErrLeaseNotFound) {
		t.Fatalf("put d on a revoked lease: %+v, want ErrLeaseNotFound", res[1])
	}
	for key, want := range map[string]string{"/group/a": "a", "/group/b": "b", "/group/c": "c", "/group/taken": "someone else's", "/group/d": ""} {
		gr, err := raw.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if len(gr.Kvs) == 1 {
			got = string(gr.Kvs[0].Value)
		}
		if got != want {
			t.Errorf("%s = %q, want %q", key, got, want)
		}
	}
}

// TestConcurrentHeartbeatsGrouped has many nodes heartbeat at once through
// one store: the puts travel in shared transactions, every heartbeat is
// accepted, and a snapshot holds each node's last sequence.
func TestConcurrentHeartbeatsGrouped(t *testing.T) {
	testenv.SkipIfShort(t)
	e := testenv.StartEtcd(t, testenv.EtcdOptions{})
	ctx := testCtx(t)
	s := newStore(t, optionsFor(e, true))
	waitCacheReady(t, s)
	cid := uniqueCluster(t)
	const nodes, rounds = 64, 3
	recs := make([]*cluster.Record, nodes)
	for i := range recs {
		recs[i] = record(cid, cluster.RoleWorker, fmt.Sprintf("w%02d", i), "i", 1)
		if _, err := s.UpsertNode(ctx, recs[i], time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	before := s.Stats()
	for range rounds {
		start := make(chan struct{})
		var wg sync.WaitGroup
		errs := make(chan error, nodes)
		for _, r := range recs {
			r.HeartbeatSeq++
			wg.Go(func() {
				<-start
				res, err := s.UpsertNode(ctx, r, time.Minute, state.Heartbeat())
				if err == nil && res.Outcome != state.OutcomeAccepted {
					err = fmt.Errorf("%s seq %d: %s", r.NodeID, r.HeartbeatSeq, res.Outcome)
				}
				errs <- err
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	st := s.Stats()
	groups, puts := st.GroupCommits-before.GroupCommits, st.GroupedPuts-before.GroupedPuts
	if groups == 0 || puts < 2*groups {
		t.Fatalf("%d heartbeats sent in %d group transactions carrying %d puts: want groups of several", nodes*rounds, groups, puts)
	}
	snap, err := s.Snapshot(ctx, cid)
	if err != nil || len(snap.Records) != nodes {
		t.Fatalf("snapshot: %d records, %v", len(snap.Records), err)
	}
	for _, r := range snap.Records {
		if r.HeartbeatSeq != 1+rounds {
			t.Fatalf("%s at seq %d, want %d", r.NodeID, r.HeartbeatSeq, 1+rounds)
		}
	}
	t.Logf("%d heartbeats: %d group transactions, %d puts in them", nodes*rounds, groups, puts)
}
