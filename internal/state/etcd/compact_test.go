package etcd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/testenv"
	"github.com/talonhq/talon/internal/testsupport"
)

// TestCompactOutcomeNames: every outcome has its own metric label.
func TestCompactOutcomeNames(t *testing.T) {
	seen := map[string]bool{}
	for o := range numCompactOutcomes {
		n := o.String()
		if n == "" || seen[n] {
			t.Fatalf("outcome %d: label %q empty or taken", o, n)
		}
		seen[n] = true
	}
}

// TestNextCapacityPoll: the poll interval shortens while an alarm is
// active and never drops below the minimum gap.
func TestNextCapacityPoll(t *testing.T) {
	for _, tc := range []struct {
		interval time.Duration
		alarmed  bool
		want     time.Duration
	}{
		{30 * time.Second, false, 30 * time.Second},
		{30 * time.Second, true, alarmCapacityInterval},
		{2 * time.Second, true, 2 * time.Second},
		{10 * time.Millisecond, false, minCapacityGap},
	} {
		if got := nextCapacityPoll(tc.interval, tc.alarmed); got != tc.want {
			t.Errorf("nextCapacityPoll(%s, %t) = %s, want %s", tc.interval, tc.alarmed, got, tc.want)
		}
	}
}

// TestCompactionBoundsHistory runs two stores of one prefix with a short
// compaction interval under a steady heartbeat load: etcd's database in
// use stops growing, the two compact at most once per interval between
// them (counted by their metrics and by the compaction key's version), and
// no snapshot fails while history is compacted under the watch-fed cache.
// It logs the figures. The bound it checks holds at any write rate, so a
// loaded machine (fewer writes, or a rate that changes mid-run) does not
// make it fail.
func TestCompactionBoundsHistory(t *testing.T) {
	testenv.SkipIfShort(t)
	e := testenv.StartEtcd(t, testenv.EtcdOptions{})
	const (
		interval = time.Second
		rounds   = 30
		workers  = 20
		// every worker heartbeats every period: 1,000 writes a second
		period = 20 * time.Millisecond
	)
	o := optionsFor(e, true)
	o.Prefix = "/talon-compact"
	o.CompactionInterval = interval
	reg := prometheus.NewRegistry()
	withReg := o
	withReg.Registerer = reg
	stores := []*Store{newStore(t, withReg), newStore(t, o)}
	cid := uniqueCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rounds)*interval)
	defer cancel()
	admin := e.Client(t)

	st, err := admin.Status(context.Background(), e.Endpoints()[0])
	if err != nil {
		t.Fatal(err)
	}
	base := st.DbSizeInUse // before any write of the run

	var writes, writeErrs, snaps, snapErrs atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			s := stores[w%2]
			rec := record(cid, cluster.RoleWorker, fmt.Sprintf("w%d", w), "inc", 1)
			pad := strings.Repeat("x", 200)
			rec.Labels = map[string]string{"pad1": pad, "pad2": pad, "pad3": pad} // about a real record's size
			opts := []state.UpsertOption(nil)
			tick := time.NewTicker(period)
			defer tick.Stop()
			for ctx.Err() == nil {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				if _, err := s.UpsertNode(ctx, rec, time.Minute, opts...); err != nil {
					if ctx.Err() == nil {
						writeErrs.Add(1)
						t.Errorf("upsert %s: %v", rec.NodeID, err)
					}
					return
				}
				writes.Add(1)
				rec.HeartbeatSeq++
				opts = []state.UpsertOption{state.Heartbeat()}
			}
		})
	}
	for _, s := range stores {
		wg.Go(func() {
			for ctx.Err() == nil {
				_, err := s.Snapshot(ctx, cid)
				if err != nil && ctx.Err() == nil {
					snapErrs.Add(1)
					t.Errorf("snapshot during compaction: %v", err)
				}
				snaps.Add(1)
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	type sample struct {
		at           time.Duration
		size, in     int64
		writes, comp int64
	}
	var samples []sample
	start := time.Now()
	for tick := time.NewTicker(interval / 2); ctx.Err() == nil; {
		select {
		case <-ctx.Done():
		case <-tick.C:
			st, err := admin.Status(context.Background(), e.Endpoints()[0])
			if err != nil {
				t.Fatal(err)
			}
			samples = append(samples, sample{time.Since(start), st.DbSize, st.DbSizeInUse, writes.Load(), compactedTotal(stores)})
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	for _, s := range samples {
		t.Logf("t=%5.1fs writes=%6d compactions=%d db=%7d B in use=%7d B", s.at.Seconds(), s.writes, s.comp, s.size, s.in)
	}
	if writeErrs.Load() > 0 || snapErrs.Load() > 0 {
		t.Fatalf("%d failed writes, %d failed snapshots of %d", writeErrs.Load(), snapErrs.Load(), snaps.Load())
	}

	// At most one compaction per interval between the two stores: by their
	// counters, and by the compaction key, written once per interval taken.
	total := compactedTotal(stores)
	maxRounds := int64(elapsed/interval) + 1
	kv, err := admin.Get(context.Background(), o.Prefix+"/compaction")
	if err != nil || len(kv.Kvs) != 1 {
		t.Fatalf("compaction key: %v %v", kv, err)
	}
	var perStore []map[string]uint64
	for _, s := range stores {
		m, _ := s.Compactions()
		perStore = append(perStore, m)
	}
	t.Logf("%d writes in %s; compactions %d (at most %d rounds); key version %d; per store %v; %d snapshots, none failed",
		writes.Load(), elapsed.Round(time.Millisecond), total, maxRounds, kv.Kvs[0].Version, perStore, snaps.Load())
	if total < 2 || total > maxRounds {
		t.Fatalf("%d compactions in %s at interval %s: want from 2 to %d", total, elapsed, interval, maxRounds)
	}
	if kv.Kvs[0].Version > maxRounds {
		t.Fatalf("compaction key written %d times in %s: more than once per interval", kv.Kvs[0].Version, elapsed)
	}
	testsupport.LintMetrics(t, reg, "talon_state_etcd_", 13)
	// The history before the last compaction is gone.
	_, last := stores[0].Compactions()
	if _, l := stores[1].Compactions(); l > last {
		last = l
	}
	if _, err := admin.Get(context.Background(), o.Prefix+"/compaction", clientv3.WithRev(last-1)); err == nil || !errors.Is(classify(err, false), state.ErrCompacted) {
		t.Fatalf("read below the compacted revision %d: %v, want compacted", last, err)
	}

	// Bounded: over the second half of the run the database in use grows
	// by less than half of what that half wrote. Uncompacted it would grow
	// by all of it; compacted it keeps at most a few intervals of history
	// (each store keeps one, and a round lost to the other store adds one),
	// a few seconds of writes out of the half's 15. The bytes a write
	// stores are measured before the first compaction, so the bound holds
	// at whatever rate this machine writes, even one that changes mid-run.
	// The first compaction removes none of the writes: it compacts to
	// the revision of the round at the stores' start, before the writers.
	var perWrite int64
	for _, s := range samples {
		if s.comp <= 1 && s.writes > 0 {
			perWrite = (s.in - base) / s.writes
		}
	}
	if len(samples) < 4 || perWrite <= 0 {
		t.Fatalf("%d samples, %d B per write: want at least 4 samples, and one after a write before the second compaction", len(samples), perWrite)
	}
	half := len(samples) / 2
	peak := func(ss []sample) int64 {
		var m int64
		for _, s := range ss {
			m = max(m, s.in)
		}
		return m
	}
	first, second := peak(samples[:half]), peak(samples[half:])
	secondWrites := samples[len(samples)-1].writes - samples[half].writes
	wrote := secondWrites * perWrite
	t.Logf("database in use: %d B before the run, peaks %d B in the first half and %d B in the second; the second half's %d writes stored about %d B (%d B each, measured before compaction)",
		base, first, second, secondWrites, wrote, perWrite)
	if secondWrites < 1000 {
		t.Fatalf("too few writes to tell: %d in the second half, want at least 1,000", secondWrites)
	}
	if growth := second - first; growth > wrote/2 {
		t.Fatalf("database in use grew by %d B over the second half, more than half of the %d B it wrote: history is not compacted", growth, wrote)
	}
}

func compactedTotal(stores []*Store) int64 {
	var n int64
	for _, s := range stores {
		m, _ := s.Compactions()
		n += int64(m[compactCompacted.String()])
	}
	return n
}

// TestCompactionNeedsRoot: etcd lets only the root role compact. A user
// with read-write on the prefix records its intervals but its compactions
// end permission_denied (counted, and logged with what to do), while it may
// still read etcd's status and alarms: the capacity is known, with the
// quota the server reports (etcd's default 2 GiB here).
func TestCompactionNeedsRoot(t *testing.T) {
	testenv.SkipIfShort(t)
	e := testenv.StartEtcd(t, testenv.EtcdOptions{Auth: true})
	e.AddPrefixUser(t, "talon", "pw", "/talon-perm/")
	var logs testsupport.SyncBuffer
	o := optionsFor(e, false)
	o.Username, o.Password = "talon", "pw"
	o.Prefix = "/talon-perm"
	o.CompactionInterval, o.CapacityInterval = 100*time.Millisecond, time.Second
	o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	s := newStore(t, o)
	testsupport.WaitFor(t, 20*time.Second, "a compaction refused and the capacity known", func() bool {
		m, _ := s.Compactions()
		return m[compactDenied.String()] >= 2 && s.Capacity().Known
	})
	m, rev := s.Compactions()
	if m[compactRecorded.String()] != 1 || m[compactCompacted.String()] != 0 || rev != 0 {
		t.Fatalf("outcomes %v, compacted to %d: want one recorded interval and no compaction", m, rev)
	}
	if n := strings.Count(logs.String(), "etcd compaction failed"); n != 1 {
		t.Fatalf("%d warnings for a run of refused compactions, want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "grant Talon's etcd user the root role") {
		t.Fatalf("the warning does not say what to do:\n%s", logs.String())
	}
	if cp := s.Capacity(); cp.QuotaBytes != DefaultQuotaBytes || cp.DBSizeBytes <= 0 || cp.DBInUseBytes <= 0 || len(cp.Alarms) != 0 {
		t.Fatalf("capacity %+v", cp)
	}
}
