package cache_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/blob"
	"github.com/talonhq/talon/internal/worker/cache"
)

const bs = 4096

func TestOpenConfig(t *testing.T) {
	e := newEnv(t)
	base := cache.Config{Dir: e.cacheDir, Capacity: 1 << 20, BlockSize: bs, Source: e.src, Stats: e.st, Logger: testLogger(t)}
	tests := []struct {
		name string
		mod  func(*cache.Config)
		want string
	}{
		{"no dir", func(c *cache.Config) { c.Dir = "" }, "cache-dir is empty"},
		{"zero block", func(c *cache.Config) { c.BlockSize = 0 }, "block-size 0"},
		{"huge block", func(c *cache.Config) { c.BlockSize = 2 << 30; c.Capacity = 4 << 30 }, "block-size 2147483648"},
		{"capacity below one block", func(c *cache.Config) { c.Capacity = bs }, "cache-capacity 4096: must hold one block"},
		{"no source", func(c *cache.Config) { c.Source = nil }, "required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := base
			tt.mod(&cfg)
			_, err := cache.Open(cfg)
			if !errors.Is(err, cache.ErrConfig) || err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Open = %v, want ErrConfig containing %q", err, tt.want)
			}
		})
	}
}

func TestReadBlockContents(t *testing.T) {
	e := newEnv(t)
	c := e.open(t, 1<<20, bs)
	sizes := []int{1, bs - 1, bs, bs + 1, 3*bs + 17}
	for i, n := range sizes {
		key := fmt.Sprintf("dir/obj-%d", n)
		data := pattern(i, n)
		e.put(t, key, data)
		t.Run(key, func(t *testing.T) {
			blocks := (int64(n) + bs - 1) / bs
			for idx := range blocks {
				wantBlock(t, c, key, idx, data)
			}
			if _, err := c.ReadBlock(context.Background(), key, blocks); !errors.Is(err, cache.ErrOutOfRange) {
				t.Fatalf("ReadBlock past the end = %v, want ErrOutOfRange", err)
			}
			if _, err := c.ReadBlock(context.Background(), key, -1); !errors.Is(err, cache.ErrOutOfRange) {
				t.Fatalf("ReadBlock(-1) = %v, want ErrOutOfRange", err)
			}
		})
	}
	t.Run("partial ranges", func(t *testing.T) {
		data := pattern(1, bs-1)
		b, err := c.ReadBlock(context.Background(), "dir/obj-4095", 0)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		for _, r := range [][2]int64{{0, 1}, {100, 200}, {bs - 2, 1}, {0, bs - 1}} {
			p := make([]byte, r[1])
			if n, err := b.ReadAt(p, r[0]); n != len(p) || err != nil || string(p) != string(data[r[0]:r[0]+r[1]]) {
				t.Fatalf("ReadAt(%d, %d) = %d, %v or wrong bytes", r[0], r[1], n, err)
			}
		}
		if _, err := b.WriteRange(discard{}, bs-2, 2); !errors.Is(err, cache.ErrOutOfRange) {
			t.Fatalf("WriteRange past the block = %v, want ErrOutOfRange", err)
		}
	})
	t.Run("empty object has no blocks", func(t *testing.T) {
		e.put(t, "empty", nil)
		if _, err := c.ReadBlock(context.Background(), "empty", 0); !errors.Is(err, cache.ErrOutOfRange) {
			t.Fatalf("ReadBlock(empty, 0) = %v, want ErrOutOfRange", err)
		}
	})
	t.Run("errors", func(t *testing.T) {
		if _, err := c.ReadBlock(context.Background(), "missing", 0); !errors.Is(err, blob.ErrNotFound) {
			t.Fatalf("ReadBlock(missing) = %v, want ErrNotFound", err)
		}
		if _, err := c.ReadBlock(context.Background(), "../x", 0); !errors.Is(err, blob.ErrInvalidKey) {
			t.Fatalf("ReadBlock(../x) = %v, want ErrInvalidKey", err)
		}
		if _, c := e.st.Status(); c.BackendErrorsTotal != 0 {
			t.Fatalf("a missing object counted %d backend errors", c.BackendErrorsTotal)
		}
	})
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func TestSecondReadIsHit(t *testing.T) {
	e := newEnv(t)
	c := e.open(t, 1<<20, bs)
	data := pattern(7, 2*bs+5)
	e.put(t, "obj", data)
	wantBlock(t, c, "obj", 2, data)
	capy, ctr := e.st.Status()
	if ctr.MissesTotal != 1 || ctr.HitsTotal != 0 || e.src.reads.Load() != 1 || capy.Blocks != 1 {
		t.Fatalf("after the first read: %+v %+v, reads %d", ctr, capy, e.src.reads.Load())
	}
	if want := uint64(cache.HeaderLen("obj") + 5); capy.ResidentBytes != want {
		t.Fatalf("resident bytes = %d, want %d (header plus the short block)", capy.ResidentBytes, want)
	}
	wantBlock(t, c, "obj", 2, data)
	_, ctr = e.st.Status()
	if ctr.MissesTotal != 1 || ctr.HitsTotal != 1 || e.src.reads.Load() != 1 {
		t.Fatalf("after the second read: %+v, reads %d; want 1 miss, 1 hit, 1 backend read", ctr, e.src.reads.Load())
	}
	// Size is cached: one lookup so far; after the TTL another.
	if n := e.src.sizes.Load(); n != 1 {
		t.Fatalf("size lookups = %d, want 1", n)
	}
	e.advance(cache.DefaultSizeTTL + time.Second)
	wantBlock(t, c, "obj", 2, data)
	if n := e.src.sizes.Load(); n != 2 {
		t.Fatalf("size lookups after the TTL = %d, want 2", n)
	}
}

func TestConcurrentMissesLoadOnce(t *testing.T) {
	e := newEnv(t)
	c := e.open(t, 1<<20, bs)
	data := pattern(3, 3*bs)
	e.put(t, "obj", data)
	gate := make(chan struct{})
	e.src.setGate(gate)
	const readers = 16
	var wg sync.WaitGroup
	errs := make(chan error, readers)
	for range readers {
		wg.Go(func() {
			got, err := readBlock(t, c, "obj", 1)
			if err == nil && string(got) != string(data[bs:2*bs]) {
				err = errors.New("wrong bytes")
			}
			errs <- err
		})
	}
	// Wait until the load is in flight and every reader had time to join it.
	waitFor(t, func() bool { capy, _ := e.st.Status(); return capy.InflightLoads == 1 })
	time.Sleep(50 * time.Millisecond)
	close(gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := e.src.reads.Load(); n != 1 {
		t.Fatalf("%d concurrent misses made %d backend reads, want 1", readers, n)
	}
	capy, ctr := e.st.Status()
	if ctr.BackendFetchesTotal != 2 || ctr.MissesTotal+ctr.HitsTotal != readers || capy.InflightLoads != 0 {
		t.Fatalf("stats %+v %+v: want 2 fetches (size, read), %d lookups, no load in flight", ctr, capy, readers)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestBackendFailureNotCached(t *testing.T) {
	e := newEnv(t)
	c := e.open(t, 1<<20, bs)
	data := pattern(4, bs)
	e.put(t, "obj", data)
	e.src.failNext(1, fmt.Errorf("%w: injected 500", blob.ErrBackend))
	if _, err := c.ReadBlock(context.Background(), "obj", 0); !errors.Is(err, blob.ErrBackend) {
		t.Fatalf("ReadBlock with a failing backend = %v, want ErrBackend", err)
	}
	blocks, temps := cacheFiles(t, e.cacheDir)
	capy, ctr := e.st.Status()
	if len(blocks)+len(temps) != 0 || capy.Blocks != 0 || capy.ResidentBytes != 0 {
		t.Fatalf("a failed load left files %v %v or blocks %+v", blocks, temps, capy)
	}
	if ctr.BackendErrorsTotal != 1 {
		t.Fatalf("backend errors = %d, want 1", ctr.BackendErrorsTotal)
	}
	wantBlock(t, c, "obj", 0, data)
	if n := e.src.reads.Load(); n != 2 {
		t.Fatalf("backend reads = %d, want 2: the failure must not be cached", n)
	}
}

func TestObjectShrankDuringLoad(t *testing.T) {
	e := newEnv(t)
	c := e.open(t, 1<<20, bs)
	e.put(t, "obj", pattern(1, 2*bs))
	if _, err := c.Size(context.Background(), "obj"); err != nil {
		t.Fatal(err)
	}
	e.put(t, "obj", pattern(1, bs+10)) // the cached size is now stale
	if _, err := c.ReadBlock(context.Background(), "obj", 1); !errors.Is(err, blob.ErrBackend) {
		t.Fatalf("ReadBlock of a shrunk object = %v, want ErrBackend", err)
	}
	if blocks, temps := cacheFiles(t, e.cacheDir); len(blocks)+len(temps) != 0 {
		t.Fatalf("a short load left files %v %v", blocks, temps)
	}
	// The short read dropped the cached size: the next read sees the truth.
	wantBlock(t, c, "obj", 1, pattern(1, bs+10))
}

func TestObjectChangedSize(t *testing.T) {
	e := newEnv(t)
	c := e.open(t, 1<<20, bs)
	old := pattern(1, bs+10)
	e.put(t, "obj", old)
	wantBlock(t, c, "obj", 1, old)
	grown := pattern(2, bs+20)
	e.put(t, "obj", grown)
	wantBlock(t, c, "obj", 1, old) // within the size TTL: the old block
	e.advance(cache.DefaultSizeTTL + time.Second)
	wantBlock(t, c, "obj", 1, grown)
	if capy, _ := e.st.Status(); capy.Blocks != 1 {
		t.Fatalf("blocks = %d, want 1 (the stale block replaced)", capy.Blocks)
	}
}

func TestCapacityNeverExceeded(t *testing.T) {
	e := newEnv(t)
	const capacity = 10 * (bs + cache.MaxHeaderBytes)
	c := e.open(t, capacity, bs)
	objects := make([][]byte, 12)
	for i := range objects {
		objects[i] = pattern(i, (i%4+1)*bs-i*13) // short last blocks of different sizes
		e.put(t, fmt.Sprintf("o/%d", i), objects[i])
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	fail := func(format string, args ...any) {
		mu.Lock()
		failures = append(failures, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	for g := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range 300 {
				i := r.IntN(len(objects))
				// Skewed: low objects are hot.
				if r.IntN(2) == 0 {
					i = r.IntN(3)
				}
				data := objects[i]
				idx := r.Int64N((int64(len(data)) + bs - 1) / bs)
				b, err := c.ReadBlock(context.Background(), fmt.Sprintf("o/%d", i), idx)
				if err != nil {
					fail("ReadBlock: %v", err)
					return
				}
				p := make([]byte, b.Size())
				_, err = b.ReadAt(p, 0)
				b.Close()
				if err != nil || string(p) != string(data[idx*bs:min((idx+1)*bs, int64(len(data)))]) {
					fail("object %d block %d: wrong bytes (%v)", i, idx, err)
				}
				if res, resv := c.Usage(); res+resv > capacity {
					fail("resident %d + reserved %d > capacity %d", res, resv, capacity)
				}
			}
		})
	}
	wg.Wait()
	for _, f := range failures {
		t.Error(f)
	}
	blocks, temps := cacheFiles(t, e.cacheDir)
	capy, ctr := e.st.Status()
	if total := sum(blocks) + sum(temps); total > capacity || total != int64(capy.ResidentBytes) || len(temps) != 0 {
		t.Fatalf("files on disk %d bytes (%d temps), stats say %d, capacity %d", total, len(temps), capy.ResidentBytes, capacity)
	}
	if int(capy.Blocks) != len(blocks) {
		t.Fatalf("stats say %d blocks, disk has %d", capy.Blocks, len(blocks))
	}
	if ctr.EvictionsTotal == 0 || ctr.HitsTotal == 0 {
		t.Fatalf("a workload larger than the cache made %d evictions and %d hits; want both > 0", ctr.EvictionsTotal, ctr.HitsTotal)
	}
	t.Logf("hits %d misses %d evictions %d", ctr.HitsTotal, ctr.MissesTotal, ctr.EvictionsTotal)
}

func TestEvictedBlockStaysReadable(t *testing.T) {
	e := newEnv(t)
	const capacity = 2 * (bs + cache.MaxHeaderBytes)
	c := e.open(t, capacity, bs)
	data := pattern(9, 5*bs)
	e.put(t, "obj", data)
	held, err := c.ReadBlock(context.Background(), "obj", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	for idx := int64(1); idx < 5; idx++ {
		wantBlock(t, c, "obj", idx, data)
	}
	if _, ctr := e.st.Status(); ctr.EvictionsTotal < 3 {
		t.Fatalf("evictions = %d, want at least 3", ctr.EvictionsTotal)
	}
	if _, err := os.Stat(c.BlockPath("obj", 0)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("block 0 should have been evicted (file removed): %v", err)
	}
	p := make([]byte, held.Size())
	if _, err := held.ReadAt(p, 0); err != nil || string(p) != string(data[:bs]) {
		t.Fatalf("reading an evicted block held open: %v or wrong bytes", err)
	}
}

func TestClosedCache(t *testing.T) {
	e := newEnv(t)
	c := e.open(t, 1<<20, bs)
	e.put(t, "obj", pattern(1, bs))
	gate := make(chan struct{})
	e.src.setGate(gate)
	defer close(gate)
	errc := make(chan error, 1)
	go func() {
		_, err := c.ReadBlock(context.Background(), "obj", 0)
		errc <- err
	}()
	waitFor(t, func() bool { capy, _ := e.st.Status(); return capy.InflightLoads == 1 })
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, cache.ErrClosed) {
		t.Fatalf("ReadBlock during Close = %v, want ErrClosed", err)
	}
	if _, err := c.ReadBlock(context.Background(), "obj", 0); !errors.Is(err, cache.ErrClosed) {
		t.Fatalf("ReadBlock after Close = %v, want ErrClosed", err)
	}
	if blocks, temps := cacheFiles(t, e.cacheDir); len(blocks)+len(temps) != 0 {
		t.Fatalf("an aborted load left files %v %v", blocks, temps)
	}
	if _, ctr := e.st.Status(); ctr.BackendErrorsTotal != 0 {
		t.Fatalf("Close counted %d backend errors", ctr.BackendErrorsTotal)
	}
}

func TestCallerCtxDoesNotAbortLoad(t *testing.T) {
	e := newEnv(t)
	c := e.open(t, 1<<20, bs)
	data := pattern(1, bs)
	e.put(t, "obj", data)
	gate := make(chan struct{})
	e.src.setGate(gate)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := c.ReadBlock(ctx, "obj", 0)
		errc <- err
	}()
	waitFor(t, func() bool { capy, _ := e.st.Status(); return capy.InflightLoads == 1 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("ReadBlock with a cancelled ctx = %v, want Canceled", err)
	}
	close(gate)
	waitFor(t, func() bool { capy, _ := e.st.Status(); return capy.Blocks == 1 })
	e.src.setGate(nil)
	wantBlock(t, c, "obj", 0, data)
	if n := e.src.reads.Load(); n != 1 {
		t.Fatalf("backend reads = %d, want 1: the abandoned load still caches the block", n)
	}
}

func TestLocked(t *testing.T) {
	e := newEnv(t)
	e.open(t, 1<<20, bs)
	_, err := cache.Open(cache.Config{Dir: e.cacheDir, Capacity: 1 << 20, BlockSize: bs, Source: e.src, Stats: e.st, Logger: testLogger(t)})
	if !errors.Is(err, cache.ErrLocked) {
		t.Fatalf("second Open of one directory = %v, want ErrLocked", err)
	}
}

// TestDiskFailureReadsThrough: when the cache directory cannot take a
// block (read-only, broken disk), the read is served from the blob store,
// the failure is counted, and nothing is cached.
func TestDiskFailureReadsThrough(t *testing.T) {
	e := newEnv(t)
	c := e.open(t, 1<<20, bs)
	data := pattern(7, 2*bs+5)
	e.put(t, "ro/obj", data)
	c.FailCreate(100, syscall.EROFS)
	for idx := range int64(3) {
		wantBlock(t, c, "ro/obj", idx, data)
	}
	if got := e.st.DiskErrors(); got != 3 {
		t.Fatalf("disk errors %d, want 3", got)
	}
	if got := e.st.BackendBytesRead(); got != uint64(len(data)) {
		t.Fatalf("blob store bytes read %d, want %d", got, len(data))
	}
	if resident, _ := c.Usage(); resident != 0 {
		t.Fatalf("%d bytes cached although the directory failed", resident)
	}
}

// TestFullDiskEvicts: ENOSPC from the disk (fuller than the configured
// capacity assumed) evicts blocks and retries, and the read succeeds
// from the cache.
func TestFullDiskEvicts(t *testing.T) {
	e := newEnv(t)
	c := e.open(t, 1<<20, bs)
	data := pattern(3, 4*bs)
	e.put(t, "full/obj", data)
	for idx := range int64(3) {
		wantBlock(t, c, "full/obj", idx, data)
	}
	before, _ := c.Usage()
	c.FailCreate(1, syscall.ENOSPC)
	wantBlock(t, c, "full/obj", 3, data)
	after, _ := c.Usage()
	_, counters := e.st.Status()
	if counters.EvictionsTotal == 0 || after > before || e.st.DiskErrors() != 0 {
		t.Fatalf("after ENOSPC: evictions %d, resident %d -> %d, disk errors %d; want an eviction and the block cached", counters.EvictionsTotal, before, after, e.st.DiskErrors())
	}
}

// TestConcurrentReadsOfOneBlock: WriteRange and ReadAt of one Block from
// several goroutines at once each return their own range. (WriteRange
// positions the file offset for sendfile; two of them must not move it
// under each other.) Readers of one block through separate ReadBlock
// calls hold separate descriptors and are covered too.
func TestConcurrentReadsOfOneBlock(t *testing.T) {
	e := newEnv(t)
	const size = 64 << 10
	c := e.open(t, 1<<20, size)
	data := pattern(7, size)
	e.put(t, "shared", data)
	shared, err := c.ReadBlock(context.Background(), "shared", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer shared.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for i := range 200 {
				b, err := shared, error(nil)
				if g%4 == 3 { // a block of its own, as each request gets
					if b, err = c.ReadBlock(context.Background(), "shared", 0); err != nil {
						errs <- err
						return
					}
				}
				off := rng.Int64N(size)
				n := rng.Int64N(size-off) + 1
				var got []byte
				if i%3 == 0 {
					got = make([]byte, n)
					_, err = b.ReadAt(got, off)
				} else {
					var w strings.Builder
					_, err = b.WriteRange(&w, off, n)
					got = []byte(w.String())
				}
				if b != shared {
					b.Close()
				}
				if err != nil || string(got) != string(data[off:off+n]) {
					errs <- fmt.Errorf("goroutine %d read %d: range %d+%d: %d bytes, error %v, or wrong bytes", g, i, off, n, len(got), err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
