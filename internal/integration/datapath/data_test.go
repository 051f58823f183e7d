package datapath

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/datav1"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// TestReadsThroughTheCache: contents match byte for byte, a second read is
// all hits, and killing an owner mid-run costs no failed read.
func TestReadsThroughTheCache(t *testing.T) {
	talontest.SkipShort(t)
	blobs := t.TempDir()
	objects := map[string][]byte{
		"a/one.bin":   talontest.WriteBlob(t, blobs, "a/one.bin", 5*talontest.BlockSize+12345, 1),
		"a/two.bin":   talontest.WriteBlob(t, blobs, "a/two.bin", 3*talontest.BlockSize, 2),
		"b/small.txt": talontest.WriteBlob(t, blobs, "b/small.txt", 777, 3),
		"b/empty":     talontest.WriteBlob(t, blobs, "b/empty", 0, 4),
	}
	// Without read-ahead, so that every block of the first pass is a miss
	// the counters show (read-ahead's loads count as neither).
	c := talontest.StartCluster(t, blobs, 3, "--read-ahead", "0")
	blocks := uint64(0)
	for name, want := range objects {
		if got := c.Read(t, name); !bytes.Equal(got, want) {
			t.Fatalf("%s: read %d bytes that differ from the blob (%d bytes)", name, len(got), len(want))
		}
		blocks += uint64((len(want) + talontest.BlockSize - 1) / talontest.BlockSize)
	}
	h1, m1, _, _ := c.Usage(t)
	if m1 < blocks {
		t.Fatalf("first pass: %d misses for %d blocks", m1, blocks)
	}
	for name, want := range objects {
		if got := c.Read(t, name); !bytes.Equal(got, want) {
			t.Fatalf("%s differs on the second read", name)
		}
	}
	h2, m2, _, _ := c.Usage(t)
	if m2 != m1 || h2-h1 < blocks {
		t.Fatalf("second pass: hits %d->%d, misses %d->%d; want +%d hits and no new miss", h1, h2, m1, m2, blocks)
	}

	// Kill the primary owner of a block while readers run: every read
	// must still succeed, through the replica.
	p, err := c.Coord.API(t).Placement(context.Background(), datav1.BlockKey("a/one.bin", 0), 2)
	if err != nil {
		t.Fatal(err)
	}
	victim := p.Owners[0].NodeID
	var fallbacks atomic.Int64
	c.Reader.OnFallback = func(string, int64, string, error) { fallbacks.Add(1) }
	var wg sync.WaitGroup
	var failed atomic.Int64
	stop := make(chan struct{})
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				for name, want := range objects {
					var buf bytes.Buffer
					if _, err := c.Reader.ReadObject(context.Background(), name, &buf); err != nil || !bytes.Equal(buf.Bytes(), want) {
						failed.Add(1)
						t.Errorf("read %s during the kill: %v", name, err)
					}
				}
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	c.Workers[victim].Kill()
	time.Sleep(2500 * time.Millisecond) // past unhealthy-after: placement moves on
	close(stop)
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d reads failed after %s was killed", failed.Load(), victim)
	}
	if fallbacks.Load() == 0 {
		t.Fatalf("no read fell back to a replica after %s was killed", victim)
	}
	t.Logf("%d fallbacks to a replica after killing %s", fallbacks.Load(), victim)
}

// TestCapacityAndEvictions: a small cache never holds more than its
// capacity, and evictions are counted.
func TestCapacityAndEvictions(t *testing.T) {
	talontest.SkipShort(t)
	blobs := t.TempDir()
	var names []string
	for i := range 6 {
		name := fmt.Sprintf("obj-%d", i)
		talontest.WriteBlob(t, blobs, name, 2*talontest.BlockSize, uint64(10+i))
		names = append(names, name)
	}
	c := talontest.StartCluster(t, blobs, 1, "--cache-capacity", "3MiB")
	for round := range 2 {
		for _, n := range names {
			c.Read(t, n)
			_, _, _, per := c.Usage(t)
			for id, u := range per {
				if u.Capacity.ResidentBytes > u.Capacity.CapacityBytes || u.Capacity.CapacityBytes != 3<<20 {
					t.Fatalf("round %d: %s holds %d bytes with capacity %d", round, id, u.Capacity.ResidentBytes, u.Capacity.CapacityBytes)
				}
			}
		}
	}
	_, _, ev, _ := c.Usage(t)
	if ev == 0 {
		t.Fatal("12 MiB read through a 3 MiB cache without an eviction")
	}
}

// TestCrashWhileLoading kills a worker with SIGKILL while it is loading a
// block from a slow blob store, restarts it on the same cache directory
// and checks that the block it serves is whole and correct.
func TestCrashWhileLoading(t *testing.T) {
	talontest.SkipShort(t)
	want := make([]byte, 2*talontest.BlockSize)
	r := rand.New(rand.NewPCG(99, 1))
	for i := range want {
		want[i] = byte(r.Uint32())
	}
	var slow atomic.Bool
	slow.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/blobs/big.bin" {
			http.NotFound(w, req)
			return
		}
		if !slow.Load() {
			http.ServeContent(w, req, "big.bin", time.Time{}, bytes.NewReader(want))
			return
		}
		// Slow: honour the range, but trickle the bytes.
		var start, end int64 = 0, int64(len(want)) - 1
		if rg := req.Header.Get("Range"); rg != "" {
			fmt.Sscanf(rg, "bytes=%d-%d", &start, &end)
		}
		end = min(end, int64(len(want))-1)
		w.Header().Set("Content-Length", strconv.FormatInt(end-start+1, 10))
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, end, len(want)))
		w.Header().Set("Accept-Ranges", "bytes")
		if req.Method == http.MethodHead {
			return
		}
		if req.Header.Get("Range") != "" {
			w.WriteHeader(http.StatusPartialContent)
		}
		for off := start; off <= end; off += 64 << 10 {
			w.Write(want[off:min(off+64<<10, end+1)])
			w.(http.Flusher).Flush()
			time.Sleep(50 * time.Millisecond)
		}
	}))
	defer srv.Close()

	ctl := talontest.FreeAddr(t)
	coord := talontest.Start(t, "coordinator", talontest.CoordinatorArgs("coord", ctl, talontest.FreeAddr(t))...)
	testsupport.WaitFor(t, 20*time.Second, "coordinator ready", func() bool { return talontest.Ready(t, coord) })
	cacheDir, data, adminAddr := t.TempDir(), talontest.FreeAddr(t), talontest.FreeAddr(t)
	args := []string{"worker", "--cluster-id", "it", "--node-id", "worker-1", "--listen", data, "--admin-listen", adminAddr,
		"--coordinators", ctl, "--blob-store", srv.URL + "/blobs", "--cache-dir", cacheDir, "--cache-capacity", "64MiB", "--block-size", "1MiB"}
	args = append(append(args, talontest.TimingArgs...), talontest.InsecureArgs...)
	w := talontest.Start(t, "worker-1", args...)
	testsupport.WaitFor(t, 20*time.Second, "worker ready", func() bool { return talontest.Ready(t, w) })

	// Start a read of block 0; it takes about a second to load.
	go func() {
		_, _ = datav1.Fetch(context.Background(), &http.Client{Timeout: 10 * time.Second}, datav1.Request{Addr: data, Object: "big.bin", Offset: 0, Length: talontest.BlockSize})
	}()
	time.Sleep(400 * time.Millisecond)
	w.Kill()

	slow.Store(false)
	w.Restart()
	testsupport.WaitFor(t, 20*time.Second, "restarted worker ready", func() bool { return talontest.Ready(t, w) })
	for i := range 2 {
		res, err := datav1.Fetch(context.Background(), &http.Client{Timeout: 10 * time.Second}, datav1.Request{Addr: data, Object: "big.bin", Offset: int64(i) * talontest.BlockSize, Length: talontest.BlockSize})
		if err != nil {
			t.Fatalf("block %d after the crash: %v", i, err)
		}
		if !bytes.Equal(res.Data, want[i*talontest.BlockSize:(i+1)*talontest.BlockSize]) {
			t.Fatalf("block %d after the crash: %d bytes that differ from the blob", i, len(res.Data))
		}
	}
}
