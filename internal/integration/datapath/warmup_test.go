package datapath

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/datav1"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// warmupFigures is one run: a worker joins a loaded, warm cluster.
type warmupFigures struct {
	rate                  int       // the new worker's warmup-rate, 0 for no bound
	before, during, after []float64 // store reads a second, all workers, per second
	newWorker             []float64 // the new worker's store reads a second, during
	// newTotal[i] is the new worker's store reads by newAt[i], seconds
	// after it was started (its warm-up bound began a little later).
	newTotal, newAt []float64
	deferred        float64 // loads the new worker refused (warming_up)
	reads, failed   int64
	failedBy        map[string]int
	wrong           int64
}

// TestWarmupJoinUnderLoad adds a worker to a three-worker cluster whose
// caches are warm and whose readers keep reading, twice: once with the
// new worker's warm-up bound at 10 loads a second and once without (a
// cluster whose new worker has warmup-rate 0). It reports the store reads
// a second before, during and after the join, and checks that with the
// bound the new worker's store loads stay within the rate (its burst plus
// the rate for each second), that no read fails or returns wrong bytes in
// either run, and that without the bound the new worker loads faster than
// the bound allows (so the figures show the bound at work, not an idle
// cluster).
func TestWarmupJoinUnderLoad(t *testing.T) {
	talontest.SkipShort(t)
	const rate = 10
	bounded := runWarmupJoin(t, rate)
	free := runWarmupJoin(t, 0)
	for _, f := range []warmupFigures{bounded, free} {
		t.Logf("warmup-rate %d: store reads/s before %v, during %v, after %v; new worker %v; %d deferred; %d reads, %d failed %v, %d wrong",
			f.rate, f.before, f.during, f.after, f.newWorker, int(f.deferred), f.reads, f.failed, f.failedBy, f.wrong)
		if f.failed != 0 || f.wrong != 0 {
			t.Errorf("warmup-rate %d: %d of %d reads failed (%v), %d returned wrong bytes; want none", f.rate, f.failed, f.reads, f.failedBy, f.wrong)
		}
	}
	for i, total := range bounded.newTotal {
		if limit := rate*bounded.newAt[i] + rate; total > limit {
			t.Errorf("bounded: the new worker loaded %.0f blocks in the %.2f s after it started, over the bound %.1f (burst %d + %d/s)", total, bounded.newAt[i], limit, rate, rate)
		}
	}
	if bounded.deferred == 0 {
		t.Error("bounded: the new worker deferred no load: the readers did not push past the rate, so the run shows nothing")
	}
	if peak := maxOf(free.newWorker); peak <= 2*rate {
		t.Errorf("unbounded: the new worker's peak was %.0f loads/s, not above twice the bound %d: the load is too light to show the bound", peak, rate)
	}
}

func maxOf(xs []float64) float64 {
	m := 0.0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// runWarmupJoin runs one join: 400 one-block objects read at random by 4
// readers, 240 reads a second in all; 3 s of warm load, a fourth worker with warmupRate joins, 8 s
// during, 3 s after.
func runWarmupJoin(t *testing.T, warmupRate int) warmupFigures {
	t.Helper()
	blobs := t.TempDir()
	const objects = 400
	data := make([][]byte, objects)
	for i := range objects {
		data[i] = talontest.WriteBlob(t, blobs, fmt.Sprintf("w/%d", i), 64<<10, uint64(i+1))
	}
	c := talontest.StartCluster(t, blobs, 3, "--warmup-rate", "0") // an established cluster: warm-up long over
	for i := range objects {                                       // warm every block on its owner
		if got := c.Read(t, fmt.Sprintf("w/%d", i)); !bytes.Equal(got, data[i]) {
			t.Fatalf("warm-up read of w/%d: wrong bytes", i)
		}
	}
	f := warmupFigures{rate: warmupRate, failedBy: map[string]int{}}
	var mu sync.Mutex
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var reads, failed, wrong atomic.Int64
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, err := client.New(client.Options{Coordinators: []string{c.Ctl}, CacheTTL: time.Second})
			if err != nil {
				t.Error(err)
				return
			}
			defer cl.Close()
			rd := &client.ObjectReader{Client: cl, HTTP: &http.Client{Timeout: 10 * time.Second}, BlockSize: talontest.BlockSize, Replicas: 2}
			rng := rand.New(rand.NewPCG(uint64(r), 9))
			// 60 reads a second per reader: every read's first request
			// asks the owner to revalidate (fresh=1), and a worker takes
			// 256 of those a second from one client address.
			tick := time.NewTicker(time.Second / 60)
			defer tick.Stop()
			for ctx.Err() == nil {
				select {
				case <-tick.C:
				case <-ctx.Done():
					return
				}
				i := rng.IntN(objects)
				var buf bytes.Buffer
				_, err := rd.ReadObject(ctx, fmt.Sprintf("w/%d", i), &buf)
				if ctx.Err() != nil {
					return
				}
				reads.Add(1)
				switch {
				case err != nil:
					failed.Add(1)
					mu.Lock()
					f.failedBy[readCode(err)]++
					if failed.Load() == 1 {
						t.Logf("first failed read: %v", err)
					}
					mu.Unlock()
				case !bytes.Equal(buf.Bytes(), data[i]):
					wrong.Add(1)
				}
			}
		}()
	}
	workers := []*talontest.Proc{c.Workers["worker-1"], c.Workers["worker-2"], c.Workers["worker-3"]}
	sampler := newStoreReads(t, workers)
	f.before = sampler.perSecond(3)
	started := time.Now()
	w4 := talontest.Start(t, "worker-4", talontest.WorkerArgs("worker-4", talontest.FreeAddr(t), talontest.FreeAddr(t), []string{c.Ctl}, blobs, t.TempDir(),
		"--warmup-rate", fmt.Sprint(warmupRate))...)
	testsupport.WaitFor(t, 30*time.Second, "worker-4 eligible", func() bool {
		cl, err := c.Coord.API(t).Cluster(context.Background())
		return err == nil && cl.EligibleWorkers == 4
	})
	sampler.add(w4)
	newW := newStoreReads(t, []*talontest.Proc{w4})
	for range 8 {
		f.during = append(f.during, sampler.perSecond(1)...)
		f.newWorker = append(f.newWorker, newW.last()...)
		f.newTotal = append(f.newTotal, newW.prev)
		f.newAt = append(f.newAt, newW.at.Sub(started).Seconds())
	}
	f.after = sampler.perSecond(3)
	stop()
	wg.Wait()
	f.reads, f.failed, f.wrong = reads.Load(), failed.Load(), wrong.Load()
	f.deferred = talontest.Scrape("http://" + w4.Admin + "/metrics")[`talon_worker_warmup_loads_total{outcome="deferred"}`]
	return f
}

func readCode(err error) string {
	var de *datav1.Error
	if errors.As(err, &de) {
		return de.Code
	}
	s := err.Error()
	if i := strings.IndexByte(s, ':'); i > 0 {
		return s[:i]
	}
	return s
}

// storeReads samples the workers' talon_worker_backend_fetches_total
// {operation="read"} once a second.
type storeReads struct {
	t     *testing.T
	procs []*talontest.Proc
	prev  float64
	at    time.Time
}

func newStoreReads(t *testing.T, procs []*talontest.Proc) *storeReads {
	s := &storeReads{t: t, procs: procs}
	s.prev, s.at = s.sum(), time.Now()
	return s
}

func (s *storeReads) add(p *talontest.Proc) {
	s.procs = append(s.procs, p)
	s.prev += s.one(p)
}

func (s *storeReads) one(p *talontest.Proc) float64 {
	return talontest.Scrape("http://" + p.Admin + "/metrics")[`talon_worker_backend_fetches_total{operation="read"}`]
}

func (s *storeReads) sum() float64 {
	var n float64
	for _, p := range s.procs {
		n += s.one(p)
	}
	return n
}

// perSecond waits n seconds, returning the store reads of each.
func (s *storeReads) perSecond(n int) []float64 {
	var out []float64
	for range n {
		time.Sleep(time.Until(s.at.Add(time.Second)))
		out = append(out, s.last()...)
	}
	return out
}

// last returns the reads since the previous sample, per second of it.
func (s *storeReads) last() []float64 {
	cur, now := s.sum(), time.Now()
	rate := (cur - s.prev) / now.Sub(s.at).Seconds()
	s.prev, s.at = cur, now
	return []float64{float64(int(rate + 0.5))}
}
