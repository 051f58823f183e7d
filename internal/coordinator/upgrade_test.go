package coordinator

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/protocol"
	"github.com/talonhq/talon/internal/state/memory"
)

// TestRenewalsWaitForFeatureLevel is issue 46's rule on one coordinator: while
// a process of feature level 0 (a build before renewals) is live, every
// accepted heartbeat writes the whole record, since a level-0 coordinator
// would read a renewal as silence; once it leaves, quiet heartbeats renew
// the lease again. It fails on the code before feature levels, whose
// quiet heartbeats renewed whatever else was live.
func TestRenewalsWaitForFeatureLevel(t *testing.T) {
	store := memory.New(memory.Options{})
	t.Cleanup(func() { store.Close() })
	timing := testTiming
	timing.StatusInterval = time.Hour
	f := startTimed(t, store, 0, Limits{}, timing)
	cn := dial(t, f.addr)
	old := workerRecord("w2", "old", 0)
	old.FeatureLevel = cluster.LevelBase
	for _, r := range []*cluster.Record{workerRecord("w1", "inc", 0), old} {
		if _, err := register(t, cn, r); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the level-0 worker in the view", func() bool {
		v := f.c.LastGood()
		return v != nil && v.Survey.Level == cluster.LevelBase && v.Survey.Mixed()
	})
	stored := func(id string) uint64 {
		snap, err := store.Snapshot(context.Background(), "test")
		if err != nil {
			t.Fatal(err)
		}
		r := snap.Find(workerRecord(id, "", 0).Key())
		if r == nil {
			t.Fatalf("no record of %s", id)
		}
		return r.HeartbeatSeq
	}
	quiet := func(seq uint64) {
		t.Helper()
		for _, r := range []*cluster.Record{workerRecord("w1", "inc", seq), workerRecord("w2", "old", seq)} {
			if r.NodeID == "w2" {
				r.FeatureLevel = cluster.LevelBase
			}
			if _, err := heartbeat(t, cn, r); err != nil {
				t.Fatal(err)
			}
		}
	}
	for seq := uint64(1); seq <= 3; seq++ {
		quiet(seq)
	}
	if got := stored("w1"); got != 3 {
		t.Fatalf("with a level-0 worker live, the stored sequence of w1 is %d after 3 quiet heartbeats; want 3 (every heartbeat written)", got)
	}
	if n := testutil.ToFloat64(f.c.m.renewals); n != 0 {
		t.Fatalf("%v renewals while the cluster's level is 0; want none", n)
	}
	if _, err := cn.Call(context.Background(), &protocol.Deregister{ClusterID: "test", Role: cluster.RoleWorker, NodeID: "w2", IncarnationID: "old"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the cluster at the build's level", func() bool {
		v := f.c.LastGood()
		return v != nil && v.Survey.Level == cluster.BuildLevel
	})
	for seq := uint64(4); seq <= 6; seq++ {
		if _, err := heartbeat(t, cn, workerRecord("w1", "inc", seq)); err != nil {
			t.Fatal(err)
		}
	}
	if got := stored("w1"); got != 3 {
		t.Fatalf("at the build's level, quiet heartbeats wrote w1's record (stored seq %d); want renewals only (seq 3)", got)
	}
	if n := testutil.ToFloat64(f.c.m.renewals); n < 3 {
		t.Fatalf("%v renewals at the build's level; want 3", n)
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
	for _, want := range []string{`worker "w1"`, "v9.9.9", "feature level 3", `coordinator "coord-a"`, "version-skew policy", "levels 0 to 2"} {
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
