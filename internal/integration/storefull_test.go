package integration

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/testenv"
	"github.com/talonhq/talon/internal/testsupport"
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
	skipShort(t)
	const quota = 8 << 20
	e := testenv.StartEtcd(t, testenv.EtcdOptions{ExtraArgs: []string{"--quota-backend-bytes", strconv.Itoa(quota)}})
	etcdArgs := []string{"--state-backend", "etcd", "--etcd-endpoints", strings.Join(e.Endpoints(), ",")}
	ctl := freeAddr(t)
	coord := start(t, "coordinator", coordinatorArgs("coord", ctl, freeAddr(t), etcdArgs...)...)
	testsupport.WaitFor(t, 20*time.Second, "coordinator ready", func() bool { return ready(t, coord) })
	blobs := t.TempDir()
	start(t, "w1", workerArgs("w1", freeAddr(t), freeAddr(t), []string{ctl}, blobs, t.TempDir())...)
	testsupport.WaitFor(t, 20*time.Second, "w1 eligible", func() bool { return eligible(t, coord) == 1 })
	if q := scrapeGauge(t, coord, "talon_store_quota_bytes"); q != quota {
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
		h, err := coord.api(t).Readyz(ctx)
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
	size, inUse := scrapeGauge(t, coord, "talon_store_db_size_bytes"), scrapeGauge(t, coord, "talon_store_db_in_use_bytes")
	if size < 0.8*quota {
		t.Fatalf("talon_store_db_size_bytes = %v with etcd full, want at least 80%% of %d (the alert's threshold)", size, quota)
	}
	c, err := coord.api(t).Cluster(ctx, apiv1.AllowStale())
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Store.Alarms) != 1 || c.Store.Alarms[0].Alarm != "NOSPACE" || c.Store.Alarms[0].Message != noSpaceWords || c.Store.Capacity == nil || c.Store.Capacity.QuotaBytes != quota {
		t.Fatalf("stale cluster summary's store: %+v (capacity %+v)", c.Store, c.Store.Capacity)
	}
	t.Logf("etcd full after junk; coordinator unready naming the alarm %s later (reasons %q); database %.1f MiB of %d MiB, %.1f MiB in use",
		detect.Round(time.Millisecond), reasons, size/(1<<20), quota>>20, inUse/(1<<20))

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
	testsupport.WaitFor(t, 60*time.Second, "coordinator ready again", func() bool { return ready(t, coord) })
	recovered := time.Since(disarmed)
	if a := scrapeAlarm(t, coord, "NOSPACE"); a != 0 {
		t.Fatalf("talon_store_alarm{alarm=\"NOSPACE\"} = %v after the disarm", a)
	}
	start(t, "w2", workerArgs("w2", freeAddr(t), freeAddr(t), []string{ctl}, blobs, t.TempDir())...)
	testsupport.WaitFor(t, 30*time.Second, "w1 and the new w2 eligible", func() bool { return eligible(t, coord) == 2 })
	t.Logf("operator's procedure took %s; coordinator ready %s after the disarm; w1 and a new worker eligible %s after it; database after defragmentation %.2f MiB",
		disarmed.Sub(freed).Round(time.Millisecond), recovered.Round(time.Millisecond), time.Since(disarmed).Round(time.Millisecond),
		scrapeGauge(t, coord, "talon_store_db_size_bytes")/(1<<20))
}

// eligible is the coordinator's eligible worker count, -1 when it does not
// answer with a current view.
func eligible(t *testing.T, p *proc) int {
	c, err := p.api(t).Cluster(context.Background())
	if err != nil {
		return -1
	}
	return c.EligibleWorkers
}

// scrapeAlarm is talon_store_alarm{alarm=...} on p, NaN when absent.
func scrapeAlarm(t *testing.T, p *proc, alarm string) float64 {
	t.Helper()
	for l := range strings.SplitSeq(scrapeText(t, p), "\n") {
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
