package coordinator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/job"
	"github.com/talonhq/talon/internal/protocol"
	"github.com/talonhq/talon/internal/state/memory"
)

// TestJobsWaitForFeatureLevel: while a worker of the level before jobs
// (cluster.LevelJobs - 1, the previous release) is live, a cache job is
// refused with ErrFeatureLevel naming that worker, since it would never
// pick its part up; once it leaves, the job starts, and a worker of this
// build that asks is handed it.
func TestJobsWaitForFeatureLevel(t *testing.T) {
	store := memory.New(memory.Options{})
	t.Cleanup(func() { store.Close() })
	f := start(t, store, 0)
	cn := dial(t, f.addr)
	old := workerRecord("w2", "old", 0)
	old.FeatureLevel = cluster.LevelJobs - 1
	for _, r := range []*cluster.Record{workerRecord("w1", "inc", 0), old} {
		if _, err := register(t, cn, r); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the previous-level worker in the view", func() bool {
		v := f.c.LastGood()
		return v != nil && v.Survey.Level == cluster.LevelJobs-1 && v.Survey.Mixed()
	})
	req := JobRequest{Op: job.Warm, Targets: []job.Target{{Key: "data/a"}}, By: "ops"}
	_, err := f.c.Jobs().Start(context.Background(), req)
	if !errors.Is(err, ErrFeatureLevel) || !strings.Contains(err.Error(), "worker/w2") {
		t.Fatalf("a job beside a level-%d worker: %v; want ErrFeatureLevel naming worker/w2", cluster.LevelJobs-1, err)
	}
	if jobs, err := store.Jobs(context.Background(), "test"); err != nil || len(jobs) != 0 {
		t.Fatalf("a refused job left %d jobs in the log (%v); want none", len(jobs), err)
	}
	if _, err := cn.Call(context.Background(), &protocol.Deregister{ClusterID: "test", Role: cluster.RoleWorker, NodeID: "w2", IncarnationID: "old"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the cluster at the build's level", func() bool {
		v := f.c.LastGood()
		return v != nil && v.Survey.Level == cluster.BuildLevel
	})
	j, err := f.c.Jobs().Start(context.Background(), req)
	if err != nil {
		t.Fatalf("a job at the build's level: %v", err)
	}
	if len(j.Workers) != 1 || j.Workers[0].NodeID != "w1" || j.State != job.Running {
		t.Fatalf("job %+v; want running, with w1 alone", j)
	}
	var orders *protocol.JobOrders
	waitFor(t, "w1 handed the job", func() bool {
		resp, err := cn.Call(context.Background(), &protocol.Jobs{ClusterID: "test", NodeID: "w1", IncarnationID: "inc"})
		orders, _ = resp.(*protocol.JobOrders)
		return err == nil && orders != nil && len(orders.Orders) == 1
	})
	if o := orders.Orders[0]; o.JobID != j.ID || o.Op != protocol.JobWarm || len(o.Targets) != 1 || o.Targets[0].Key != "data/a" {
		t.Fatalf("order %+v; want the job %s warming data/a", o, j.ID)
	}
}

// TestSkewedRegistrationRefused: a worker two feature levels ahead of the
// coordinator is refused with an error naming both versions and the
// policy, and nothing is written.
func TestSkewedRegistrationRefused(t *testing.T) {
	store := memory.New(memory.Options{})
	t.Cleanup(func() { store.Close() })
	f := start(t, store, 0)
	cn := dial(t, f.addr)
	r := workerRecord("w1", "inc", 0)
	r.FeatureLevel, r.Version = cluster.BuildLevel+2, "v9.9.9"
	_, err := register(t, cn, r)
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodeUnsupportedVersion {
		t.Fatalf("registration two levels ahead: got %v; want unsupported_version", err)
	}
	levels := fmt.Sprintf("levels %d to %d", cluster.BuildLevel-cluster.MaxLevelSkew, cluster.BuildLevel+cluster.MaxLevelSkew)
	for _, want := range []string{`worker "w1"`, "v9.9.9", fmt.Sprintf("feature level %d", cluster.BuildLevel+2), `coordinator "coord-a"`, "version-skew policy", levels} {
		if !strings.Contains(pe.Message, want) {
			t.Errorf("refusal %q does not say %q", pe.Message, want)
		}
	}
	snap, err := store.Snapshot(context.Background(), "test")
	if err != nil {
		t.Fatal(err)
	}
	if snap.Find(r.Key()) != nil {
		t.Fatal("the refused registration wrote a record")
	}
	r.FeatureLevel = cluster.BuildLevel + 1
	if _, err := register(t, cn, r); err != nil {
		t.Fatalf("a worker one level ahead is within the policy: %v", err)
	}
}

// TestCoordinatorRefusesToStartBesideSkew: a coordinator whose store holds
// a live process outside its skew policy does not start and writes
// nothing.
func TestCoordinatorRefusesToStartBesideSkew(t *testing.T) {
	store := memory.New(memory.Options{})
	t.Cleanup(func() { store.Close() })
	r := workerRecord("w1", "inc", 0)
	r.FeatureLevel, r.Version = cluster.BuildLevel+5, "v9.0.0"
	if _, err := store.UpsertNode(context.Background(), r, time.Minute); err != nil {
		t.Fatal(err)
	}
	c, _, _ := newTestCoordinator(t, store, testTiming, 0, Limits{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := c.Run(ctx)
	if !errors.Is(err, ErrVersionSkew) || !strings.Contains(err.Error(), "v9.0.0") || !strings.Contains(err.Error(), "nothing written") {
		t.Fatalf("Run beside a process 5 levels ahead: %v; want ErrVersionSkew naming its version", err)
	}
	snap, err := store.Snapshot(context.Background(), "test")
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Records) != 1 {
		t.Fatalf("the refused coordinator wrote to the store: %d records", len(snap.Records))
	}
}
