package worker

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/blob"
	"github.com/talonhq/talon/internal/protocol"
	"github.com/talonhq/talon/internal/worker/cache"
	"github.com/talonhq/talon/internal/worker/stats"
)

// jobBS is the test cache's block size.
const jobBS = 4096

// jobEnv is a real cache over a real file store with three objects of
// four blocks each: d/a, d/b and e/c.
func jobEnv(t *testing.T) (*cache.Cache, *jobRunner) {
	t.Helper()
	blobs, dir := t.TempDir(), t.TempDir()
	for _, name := range []string{"d/a", "d/b", "e/c"} {
		p := filepath.Join(blobs, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, 4*jobBS), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fs, err := blob.NewFile(blobs)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	c, err := cache.Open(cache.Config{Dir: dir, Capacity: 1 << 20, BlockSize: jobBS, Source: fs, Stats: stats.New(), Logger: log, Clock: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	// This worker owns the even blocks.
	owns := func(_ string, block int64) (bool, uint64) { return block%2 == 0, 1 }
	r := newJobRunner(JobOptions{Cache: c, Owns: owns}, log)
	t.Cleanup(r.close)
	return c, r
}

func waitReport(t *testing.T, r *jobRunner, id string, want protocol.JobState) protocol.JobReport {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, rep := range r.reports() {
			if rep.JobID == id && rep.State == want {
				return rep
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("job %s never reported %s: %+v", id, want, r.reports())
	return protocol.JobReport{}
}

// TestJobRunnerWarmAndFree: a warm of a prefix loads the blocks this
// worker owns (the even ones) and no other; a free of one object evicts
// its blocks and leaves the others; a job no longer listed is forgotten;
// a warm of a missing object fails with the store's error.
func TestJobRunnerWarmAndFree(t *testing.T) {
	c, r := jobEnv(t)
	r.apply(&protocol.JobOrders{Orders: []protocol.JobOrder{{JobID: "j-warm", Op: protocol.JobWarm, Targets: []protocol.JobTarget{{Prefix: true, Key: "d/"}}}}})
	rep := waitReport(t, r, "j-warm", protocol.JobDone)
	if rep.BlocksDone != 4 || rep.BlocksTotal != 4 || rep.BytesDone != 4*jobBS {
		t.Fatalf("warm of d/: %+v; want the 4 even blocks of d/a and d/b", rep)
	}
	for _, obj := range []string{"d/a", "d/b"} {
		info, err := c.Stat(context.Background(), obj)
		if err != nil {
			t.Fatal(err)
		}
		for i := range int64(4) {
			if cold := c.Cold(obj, info, i); cold != (i%2 == 1) {
				t.Errorf("%s block %d cold %v after the warm; want %v", obj, i, cold, i%2 == 1)
			}
		}
	}
	r.apply(&protocol.JobOrders{Orders: []protocol.JobOrder{{JobID: "j-free", Op: protocol.JobFree, Targets: []protocol.JobTarget{{Key: "d/a"}}}}})
	if _, ok := r.running["j-warm"]; ok {
		t.Error("a job the coordinators no longer list is still tracked")
	}
	rep = waitReport(t, r, "j-free", protocol.JobDone)
	if rep.BlocksDone != 2 || rep.BytesDone != 2*jobBS {
		t.Fatalf("free of d/a: %+v; want its 2 resident blocks", rep)
	}
	info, _ := c.Stat(context.Background(), "d/b")
	if c.Cold("d/b", info, 0) {
		t.Error("free of d/a evicted d/b")
	}
	r.apply(&protocol.JobOrders{Orders: []protocol.JobOrder{{JobID: "j-missing", Op: protocol.JobWarm, Targets: []protocol.JobTarget{{Key: "d/none"}}}}})
	if rep := waitReport(t, r, "j-missing", protocol.JobFailed); rep.Error == "" {
		t.Fatal("a failed warm reports no error")
	}
}

// TestJobRunnerCancel: a running warm stops when the coordinators stop
// listing it, and the runner's close waits for it.
func TestJobRunnerCancel(t *testing.T) {
	_, r := jobEnv(t)
	r.opts.Rate = 1 // one block a second: the job is still running below
	r.apply(&protocol.JobOrders{Orders: []protocol.JobOrder{{JobID: "j-slow", Op: protocol.JobWarm, Targets: []protocol.JobTarget{{Prefix: true, Key: "d/"}, {Key: "e/c"}}}}})
	waitReport(t, r, "j-slow", protocol.JobRunning)
	j := r.running["j-slow"]
	r.apply(&protocol.JobOrders{})
	deadline := time.Now().Add(5 * time.Second)
	for protocol.JobState(j.state.Load()) != protocol.JobCancelled && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if s := protocol.JobState(j.state.Load()); s != protocol.JobCancelled || j.blocksDone.Load() >= 6 {
		t.Fatalf("after the job was dropped: %s with %d of 6 blocks; want cancelled short of them", s, j.blocksDone.Load())
	}
}
