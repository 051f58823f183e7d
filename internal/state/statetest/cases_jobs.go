package statetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/talonhq/talon/internal/job"
	"github.com/talonhq/talon/internal/state"
)

// runJobs checks the cache jobs (state.JobLog), which every backend keeps:
// a job created through one store is read, listed and replaced through a
// peer; a replace at a stale revision is refused; concurrent updates
// through UpdateJob lose none of each other's; IDs are unique; the log is
// bounded; no reader of the records sees a job.
func runJobs(t *testing.T, newHarness Factory) {
	e := setup(t, newHarness)
	log, ok := e.s.(state.JobLog)
	if !ok {
		t.Fatalf("%s store keeps no jobs (state.JobLog)", e.s.Backend())
	}
	peer, ok := e.h.Peer(t, 0).(state.JobLog)
	if !ok {
		t.Fatal("the peer store keeps no jobs")
	}
	mk := func(id string, at int64) job.Job {
		return job.Job{ID: id, Op: job.Warm, Targets: []job.Target{{Key: "data/a.bin"}, {Key: "data/set/", Prefix: true}},
			By: "ops", Coordinator: "c1", CreatedAtUnixMs: at, State: job.Running,
			Workers: []job.Part{{NodeID: "w1", State: job.PartPending}, {NodeID: "w2", State: job.PartPending}}}
	}
	first := mk("j-first", 1_700_000_000_000)
	if err := log.CreateJob(e.ctx(), e.cluster, first); err != nil {
		t.Fatalf("CreateJob: %v", err)
	}
	if err := peer.CreateJob(e.ctx(), e.cluster, first); !errors.Is(err, state.ErrJobExists) {
		t.Fatalf("CreateJob of a kept ID through the peer: %v; want ErrJobExists", err)
	}
	got, rev, found, err := peer.Job(e.ctx(), e.cluster, first.ID)
	if err != nil || !found || got.Workers[1].NodeID != "w2" || got.Targets[1] != first.Targets[1] {
		t.Fatalf("the peer reads %+v, %t, %v; want %+v", got, found, err, first)
	}
	got.Workers[0] = job.Part{NodeID: "w1", State: job.PartRunning, BlocksDone: 3, BlocksTotal: 16, BytesDone: 3 << 20, BytesTotal: 16 << 20}
	if ok, err := log.ReplaceJob(e.ctx(), e.cluster, got, rev); err != nil || !ok {
		t.Fatalf("ReplaceJob at the read revision: %t, %v; want replaced", ok, err)
	}
	if ok, err := peer.ReplaceJob(e.ctx(), e.cluster, got, rev); err != nil || ok {
		t.Fatalf("ReplaceJob at a stale revision: %t, %v; want refused without error", ok, err)
	}
	checkConcurrentJobUpdates(t, e, log, peer, first.ID)
	if snap := e.snapshot(e.cluster); len(snap.Records) != 0 {
		t.Fatalf("a snapshot lists %d records; a job is not a record", len(snap.Records))
	}
	second := mk("j-second", first.CreatedAtUnixMs+1)
	if err := peer.CreateJob(e.ctx(), e.cluster, second); err != nil {
		t.Fatalf("CreateJob of a second: %v", err)
	}
	jobs, err := log.Jobs(e.ctx(), e.cluster)
	if err != nil || len(jobs) != 2 || jobs[0].ID != first.ID || jobs[1].ID != second.ID {
		t.Fatalf("Jobs = %d jobs, %v; want j-first then j-second", len(jobs), err)
	}
	if err := log.DeleteJob(e.ctx(), e.cluster, first.ID); err != nil {
		t.Fatalf("DeleteJob: %v", err)
	}
	if _, _, found, err := peer.Job(e.ctx(), e.cluster, first.ID); err != nil || found {
		t.Fatalf("a deleted job reads %t, %v; want not found", found, err)
	}
	if err := log.DeleteJob(e.ctx(), e.cluster, first.ID); err != nil {
		t.Fatalf("DeleteJob of no job: %v; want nil", err)
	}
	checkJobBound(t, e, log, second.CreatedAtUnixMs)
	for _, bad := range []job.Job{
		{},
		func() job.Job { j := mk("j-bad", 1); j.Op = "load"; return j }(),
		func() job.Job { j := mk("Bad_ID", 1); return j }(),
		func() job.Job { j := mk("j-bad", 1); j.Targets = nil; return j }(),
		func() job.Job {
			j := mk("j-bad", 1)
			j.Workers[0], j.Workers[1] = j.Workers[1], j.Workers[0]
			return j
		}(),
		func() job.Job { j := mk("j-bad", 1); j.Workers[0].BlocksDone = -1; return j }(),
	} {
		if err := log.CreateJob(e.ctx(), e.cluster, bad); !errors.Is(err, state.ErrInvalidRecord) {
			t.Errorf("CreateJob(%+v) = %v; want ErrInvalidRecord", bad, err)
		}
	}
}

// checkConcurrentJobUpdates runs UpdateJob through both stores at once,
// each setting its own worker's count: every update must survive.
func checkConcurrentJobUpdates(t *testing.T, e *env, log, peer state.JobLog, id string) {
	t.Helper()
	const rounds = 10
	var wg sync.WaitGroup
	errs := make(chan error, 2*rounds)
	for i, l := range []state.JobLog{log, peer} {
		wg.Go(func() {
			for n := range rounds {
				_, _, err := state.UpdateJob(e.ctx(), l, e.cluster, id, func(j *job.Job) error {
					j.Workers[i].BlocksDone = int64(n + 1)
					return nil
				})
				if err != nil {
					errs <- fmt.Errorf("update %d through store %d: %w", n, i, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	j, _, _, err := log.Job(e.ctx(), e.cluster, id)
	if err != nil || j.Workers[0].BlocksDone != rounds || j.Workers[1].BlocksDone != rounds {
		t.Fatalf("after concurrent updates: %+v, %v; want both workers at %d blocks", j.Workers, err, rounds)
	}
}

// checkJobBound fills the log to job.MaxKept and checks one more is
// refused, then deletes what it made.
func checkJobBound(t *testing.T, e *env, log state.JobLog, at int64) {
	t.Helper()
	jobs, err := log.Jobs(e.ctx(), e.cluster)
	if err != nil {
		t.Fatalf("Jobs: %v", err)
	}
	var made []string
	for i := len(jobs); i < job.MaxKept; i++ {
		id := fmt.Sprintf("j-fill-%d", i)
		j := job.Job{ID: id, Op: job.Free, Targets: []job.Target{{Key: "x"}}, State: job.Done, CreatedAtUnixMs: at + int64(i)}
		if err := log.CreateJob(e.ctx(), e.cluster, j); err != nil {
			t.Fatalf("CreateJob %d of %d: %v", i+1, job.MaxKept, err)
		}
		made = append(made, id)
	}
	over := job.Job{ID: "j-over", Op: job.Free, Targets: []job.Target{{Key: "x"}}, State: job.Running}
	if err := log.CreateJob(e.ctx(), e.cluster, over); !errors.Is(err, state.ErrTooManyJobs) {
		t.Fatalf("CreateJob past %d jobs: %v; want ErrTooManyJobs", job.MaxKept, err)
	}
	for _, id := range made {
		if err := log.DeleteJob(e.ctx(), e.cluster, id); err != nil {
			t.Fatalf("DeleteJob %s: %v", id, err)
		}
	}
}
