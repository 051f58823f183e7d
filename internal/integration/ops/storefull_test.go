package ops

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/testenv"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// noSpaceWords is how a coordinator names etcd's NOSPACE alarm.
const noSpaceWords = "the state store's database is full (etcd alarm NOSPACE): compact, defragment, then disarm the alarm"

// TestStoreFullRecoversWithoutRestart fills a real etcd started with a
// small --quota-backend-bytes (junk keys under another prefix, written
// with an etcd client, as another tenant or a runaway history would): the
// coordinator turns unready naming the NOSPACE alarm in words (/readyz,
// the stale cluster summary the UI and coordinators list read) and its
// metrics show the alarm and a database at its quota. Then the operator's
// procedure (delete the junk, compact, defragment, disarm) brings it back
// ready without a restart, and a new worker registers. It logs the time to
// detect and the time to recover.
func TestStoreFullRecoversWithoutRestart(t *testing.T) {
	talontest.SkipShort(t)
	const quota = 8 << 20
	e := testenv.StartEtcd(t, testenv.EtcdOptions{ExtraArgs: []string{"--quota-backend-bytes", strconv.Itoa(quota)}})
	etcdArgs := []string{"--state-backend", "etcd", "--etcd-endpoints", strings.Join(e.Endpoints(), ",")}
	ctl := talontest.FreeAddr(t)
	coord := talontest.Start(t, "coordinator", talontest.CoordinatorArgs("coord", ctl, talontest.FreeAddr(t), etcdArgs...)...)
	testsupport.WaitFor(t, 20*time.Second, "coordinator ready", func() bool { return talontest.Ready(t, coord) })
	blobs := t.TempDir()
	talontest.Start(t, "w1", talontest.WorkerArgs("w1", talontest.FreeAddr(t), talontest.FreeAddr(t), []string{ctl}, blobs, t.TempDir())...)
	testsupport.WaitFor(t, 20*time.Second, "w1 eligible", func() bool { return eligible(t, coord) == 1 })
	if q := talontest.ScrapeGauge(t, coord, "talon_store_quota_bytes"); q != quota {
		t.Fatalf("talon_store_quota_bytes = %v, want the etcd's %d", q, quota)
	}
	if a := scrapeAlarm(t, coord, "NOSPACE"); a != 0 {
		t.Fatalf("talon_store_alarm{alarm=\"NOSPACE\"} = %v before the fill", a)
	}

	// Fill etcd until it refuses writes.
	cli := e.Client(t)
	ctx := context.Background()
	junk := strings.Repeat("j", 64<<10)
	var full time.Time
	for i := 0; full.IsZero(); i++ {
		_, err := cli.Put(ctx, fmt.Sprintf("/other-tenant/junk/%06d", i), junk)
		switch {
		case errors.Is(err, rpctypes.ErrNoSpace):
			full = time.Now()
		case err != nil:
			t.Fatalf("put %d: %v", i, err)
		case i > 4*quota/len(junk):
			t.Fatalf("%d puts of %d bytes and etcd still takes more: is --quota-backend-bytes applied?", i, len(junk))
		}
	}
	var reasons []string
	testsupport.WaitFor(t, 30*time.Second, "the coordinator names the alarm", func() bool {
		h, err := coord.API(t).Readyz(ctx)
		if err != nil {
			return false
		}
		reasons = h.Reasons
		return !h.Ready() && slices.Contains(h.Reasons, noSpaceWords)
	})
	detect := time.Since(full)
	if a := scrapeAlarm(t, coord, "NOSPACE"); a != 1 {
		t.Fatalf("talon_store_alarm{alarm=\"NOSPACE\"} = %v while etcd is full", a)
	}
	size, inUse := talontest.ScrapeGauge(t, coord, "talon_store_db_size_bytes"), talontest.ScrapeGauge(t, coord, "talon_store_db_in_use_bytes")
	if size < 0.8*quota {
		t.Fatalf("talon_store_db_size_bytes = %v with etcd full, want at least 80%% of %d (the alert's threshold)", size, quota)
	}
	c, err := coord.API(t).Cluster(ctx, apiv1.AllowStale())
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Store.Alarms) != 1 || c.Store.Alarms[0].Alarm != "NOSPACE" || c.Store.Alarms[0].Message != noSpaceWords || c.Store.Capacity == nil || c.Store.Capacity.QuotaBytes != quota {
		t.Fatalf("stale cluster summary's store: %+v (capacity %+v)", c.Store, c.Store.Capacity)
	}
	t.Logf("etcd full after junk; coordinator unready naming the alarm %s later (reasons %q); database %.1f MiB of %d MiB, %.1f MiB in use",
		detect.Round(time.Millisecond), reasons, size/(1<<20), quota>>20, inUse/(1<<20))

	// Stay full for longer than lease-ttl (3 s), as an outage waiting for
	// an operator would: no heartbeat is stored meanwhile.
	time.Sleep(4 * time.Second)
	held, err := cli.Get(ctx, "/talon/clusters/it/nodes/worker/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}

	// The operator frees space: delete the junk, compact, defragment,
	// disarm. No Talon process is restarted.
	freed := time.Now()
	del, err := cli.Delete(ctx, "/other-tenant/", clientv3.WithPrefix())
	if err != nil {
		t.Fatalf("delete the junk: %v", err)
	}
	if _, err := cli.Compact(ctx, del.Header.Revision); err != nil {
		t.Fatalf("compact: %v", err)
	}
	for _, ep := range e.Endpoints() {
		if _, err := cli.Defragment(ctx, ep); err != nil {
			t.Fatalf("defragment %s: %v", ep, err)
		}
	}
	if _, err := cli.AlarmDisarm(ctx, &clientv3.AlarmMember{}); err != nil {
		t.Fatalf("disarm: %v", err)
	}
	disarmed := time.Now()
	testsupport.WaitFor(t, 60*time.Second, "coordinator ready again", func() bool { return talontest.Ready(t, coord) })
	recovered := time.Since(disarmed)
	if a := scrapeAlarm(t, coord, "NOSPACE"); a != 0 {
		t.Fatalf("talon_store_alarm{alarm=\"NOSPACE\"} = %v after the disarm", a)
	}
	talontest.Start(t, "w2", talontest.WorkerArgs("w2", talontest.FreeAddr(t), talontest.FreeAddr(t), []string{ctl}, blobs, t.TempDir())...)
	testsupport.WaitFor(t, 30*time.Second, "w1 and the new w2 eligible", func() bool { return eligible(t, coord) == 2 })
	t.Logf("%d worker record(s) left after 4 s full; operator's procedure took %s; coordinator ready %s after the disarm; w1 and a new worker eligible %s after it; database after defragmentation %.2f MiB",
		held.Count, disarmed.Sub(freed).Round(time.Millisecond), recovered.Round(time.Millisecond), time.Since(disarmed).Round(time.Millisecond),
		talontest.ScrapeGauge(t, coord, "talon_store_db_size_bytes")/(1<<20))
}

// eligible is the coordinator's eligible worker count, -1 when it does not
// answer with a current view.
func eligible(t *testing.T, p *talontest.Proc) int {
	c, err := p.API(t).Cluster(context.Background())
	if err != nil {
		return -1
	}
	return c.EligibleWorkers
}

// scrapeAlarm is talon_store_alarm{alarm=...} on p, NaN when absent.
func scrapeAlarm(t *testing.T, p *talontest.Proc, alarm string) float64 {
	t.Helper()
	for l := range strings.SplitSeq(talontest.ScrapeText(t, p), "\n") {
		if v, ok := strings.CutPrefix(l, `talon_store_alarm{alarm="`+alarm+`"} `); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("talon_store_alarm line %q: %v", l, err)
			}
			return f
		}
	}
	return math.NaN()
}

// TestCompactionKeepsStoreBounded runs a coordinator with a short
// compaction interval and 10 workers heartbeating every 100 ms on an etcd
// with a 16 MiB quota (issue 36's setting, where an uncompacted etcd filled
// in 150 s), while a client looks up placements without pause: no lookup
// fails while history is compacted under the coordinator's watch, and the
// database stops growing well below the quota. It logs the curve.
func TestCompactionKeepsStoreBounded(t *testing.T) {
	talontest.SkipShort(t)
	const (
		quota    = 16 << 20
		workers  = 10
		interval = 2 * time.Second
		run      = 40 * time.Second
	)
	e := testenv.StartEtcd(t, testenv.EtcdOptions{ExtraArgs: []string{"--quota-backend-bytes", strconv.Itoa(quota)}})
	fast := []string{"--heartbeat-interval", "100ms"}
	ctl := talontest.FreeAddr(t)
	coord := talontest.Start(t, "coordinator", talontest.CoordinatorArgs("coord", ctl, talontest.FreeAddr(t), append([]string{"--state-backend", "etcd",
		"--etcd-endpoints", strings.Join(e.Endpoints(), ","), "--etcd-compaction-interval", interval.String()}, fast...)...)...)
	testsupport.WaitFor(t, 20*time.Second, "coordinator ready", func() bool { return talontest.Ready(t, coord) })
	blobs := t.TempDir()
	for i := range workers {
		id := fmt.Sprintf("w%d", i)
		talontest.Start(t, id, talontest.WorkerArgs(id, talontest.FreeAddr(t), talontest.FreeAddr(t), []string{ctl}, blobs, t.TempDir(), fast...)...)
	}
	testsupport.WaitFor(t, 60*time.Second, "every worker eligible", func() bool { return eligible(t, coord) == workers })

	cl, err := client.New(client.Options{Coordinators: []string{ctl}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), run)
	defer cancel()
	var lookups, failed atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			// Each lookup has its own deadline: one cut short by the end
			// of the run (its attempt deadline is a share of what remains)
			// is not a failure of the store.
			lctx, lcancel := context.WithTimeout(context.Background(), 10*time.Second)
			p, err := cl.Lookup(lctx, fmt.Sprintf("obj-%d#0", i), 2)
			lcancel()
			lookups.Add(1)
			if err != nil || len(p.Owners) != 2 {
				failed.Add(1)
				t.Errorf("lookup %d during compaction: %+v, %v", i, p, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	cli := e.Client(t)
	var sizes, inUse []int64
	for tick := time.NewTicker(5 * time.Second); ctx.Err() == nil; {
		select {
		case <-ctx.Done():
		case <-tick.C:
			st, err := cli.Status(context.Background(), e.Endpoints()[0])
			if err != nil {
				t.Fatal(err)
			}
			sizes, inUse = append(sizes, st.DbSize), append(inUse, st.DbSizeInUse)
		}
	}
	<-done
	compacted := scrapeCounter(t, coord, `talon_state_etcd_compactions_total{outcome="compacted"}`)
	heartbeats := scrapeCounter(t, coord, `talon_coordinator_node_updates_total{operation="heartbeat",outcome="accepted"}`)
	var curve []string
	for i := range sizes {
		curve = append(curve, fmt.Sprintf("%ds %.2f/%.2f", 5*(i+1), float64(sizes[i])/(1<<20), float64(inUse[i])/(1<<20)))
	}
	t.Logf("%d workers at 100 ms, %s: %.0f heartbeats, %.0f compactions (interval %s), %d lookups, %d failed; etcd MiB (file/in use) every 5 s: %s",
		workers, run, heartbeats, compacted, interval, lookups.Load(), failed.Load(), strings.Join(curve, ", "))
	if failed.Load() > 0 {
		t.Fatalf("%d of %d lookups failed while etcd was compacted", failed.Load(), lookups.Load())
	}
	if compacted < float64(run/interval)/2 {
		t.Fatalf("%.0f compactions in %s at interval %s", compacted, run, interval)
	}
	half := len(inUse) / 2
	if first, second := slices.Max(inUse[:half]), slices.Max(inUse[half:]); second > first+first/2 { // uncompacted, it would about double
		t.Fatalf("database in use peaked at %d B in the second half, over 1.5 times the first half's %d B: not bounded", second, first)
	}
	if last := sizes[len(sizes)-1]; last > quota*3/4 {
		t.Fatalf("database file %d B at the end, over 3/4 of the %d B quota", last, quota)
	}
}

// scrapeCounter is the value of one series line (name and labels exactly
// as exported) on p, 0 when absent.
func scrapeCounter(t *testing.T, p *talontest.Proc, series string) float64 {
	t.Helper()
	for l := range strings.SplitSeq(talontest.ScrapeText(t, p), "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%q: %v", l, err)
			}
			return f
		}
	}
	return 0
}
