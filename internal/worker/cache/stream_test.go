package cache_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/blob"
	"github.com/talonhq/talon/internal/worker/cache"
)

// midStore is a store whose reads pass the first after bytes, then wait
// for gate (or fail with failErr once gate closes): a store whose body
// arrives in two parts.
type midStore struct {
	blob.Store
	after   int64
	gate    chan struct{}
	failErr error

	mu    sync.Mutex
	reads int
}

func (s *midStore) ReadRange(ctx context.Context, object string, off, n int64) (io.ReadCloser, error) {
	s.mu.Lock()
	s.reads++
	s.mu.Unlock()
	rc, err := s.Store.ReadRange(ctx, object, off, n)
	if err != nil {
		return nil, err
	}
	return &midReader{rc: rc, s: s, left: s.after}, nil
}

type midReader struct {
	rc   io.ReadCloser
	s    *midStore
	left int64
}

func (r *midReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		<-r.s.gate
		if r.s.failErr != nil {
			return 0, r.s.failErr
		}
		r.left = -1
	}
	if r.left > 0 && int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.rc.Read(p)
	if r.left > 0 {
		r.left -= int64(n)
	}
	return n, err
}

func (r *midReader) Close() error { return r.rc.Close() }

func openStreamEnv(t *testing.T, failErr error) (*env, *midStore, *cache.Cache, []byte) {
	t.Helper()
	e := newEnv(t)
	data := pattern(7, 3<<20)
	e.put(t, "obj", data)
	ms := &midStore{Store: e.src, after: 256 << 10, gate: make(chan struct{}), failErr: failErr}
	c, err := cache.Open(cache.Config{Dir: e.cacheDir, Capacity: 64 << 20, BlockSize: 1 << 20, Source: ms, Stats: e.st, Logger: testLogger(t), Clock: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetLoadBuffer(64 << 10)
	return e, ms, c, data
}

// TestOpenBlockStreams: a reader gets the block's first bytes while the
// store is still sending the rest, all readers of the block share one
// fetch, and the block is cached whole afterwards.
func TestOpenBlockStreams(t *testing.T) {
	_, ms, c, data := openStreamEnv(t, nil)
	ctx := context.Background()
	info, err := c.Stat(ctx, "obj")
	if err != nil {
		t.Fatal(err)
	}
	const readers = 5
	blocks := make([]*cache.Block, readers)
	for i := range blocks {
		if blocks[i], err = c.OpenBlock(ctx, "obj", info, 1); err != nil {
			t.Fatal(err)
		}
		defer blocks[i].Close()
	}
	// The store has sent 256 KiB of the block and holds the rest.
	head := make([]byte, 200<<10)
	if n, err := blocks[0].ReadAt(head, 0); n != len(head) || err != nil || !bytes.Equal(head, data[1<<20:1<<20+len(head)]) {
		t.Fatalf("first bytes while the load waits: %d, %v", n, err)
	}
	var wg sync.WaitGroup
	outs := make([]bytes.Buffer, readers)
	errs := make([]error, readers)
	for i, b := range blocks {
		wg.Add(1)
		go func() { defer wg.Done(); _, errs[i] = b.WriteRange(&outs[i], 0, b.Size()) }()
	}
	time.Sleep(50 * time.Millisecond)
	close(ms.gate)
	wg.Wait()
	for i := range outs {
		if errs[i] != nil || !bytes.Equal(outs[i].Bytes(), data[1<<20:2<<20]) {
			t.Fatalf("reader %d: %d bytes, %v; want the whole block", i, outs[i].Len(), errs[i])
		}
	}
	if ms.reads != 1 {
		t.Fatalf("%d store reads for %d streaming readers of one block, want 1", ms.reads, readers)
	}
	b, err := c.OpenBlock(ctx, "obj", info, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var again bytes.Buffer
	if _, err := b.WriteRange(&again, 0, b.Size()); err != nil || !bytes.Equal(again.Bytes(), data[1<<20:2<<20]) || ms.reads != 1 {
		t.Fatalf("second read: %v, %d store reads; want a hit", err, ms.reads)
	}
}

// TestOpenBlockFailsMidStream: when the store fails after the first bytes,
// a streaming reader gets an error after a short body (never a short block
// taken for a whole one), and nothing is cached: no block file, no
// temporary file, and the next read fetches again.
func TestOpenBlockFailsMidStream(t *testing.T) {
	e, ms, c, data := openStreamEnv(t, errors.New("connection reset by peer"))
	ctx := context.Background()
	info, err := c.Stat(ctx, "obj")
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.OpenBlock(ctx, "obj", info, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	close(ms.gate)
	var out bytes.Buffer
	n, err := b.WriteRange(&out, 0, b.Size())
	if err == nil || n >= b.Size() || !bytes.Equal(out.Bytes(), data[:n]) {
		t.Fatalf("WriteRange after a failure mid-stream: %d of %d bytes, err %v; want an error after correct bytes", n, b.Size(), err)
	}
	if _, err := b.ReadAt(make([]byte, 1<<20), 0); err == nil {
		t.Fatal("ReadAt of the whole failed block succeeded")
	}
	waitFor(t, func() bool {
		blocks, temps := cacheFiles(t, e.cacheDir)
		capy, _ := e.st.Status()
		return len(blocks) == 0 && len(temps) == 0 && capy.InflightLoads == 0
	})
	ms.failErr = nil
	before := ms.reads
	got, err := readBlock(t, c, "obj", 0)
	if err != nil || !bytes.Equal(got, data[:1<<20]) || ms.reads != before+1 {
		t.Fatalf("read after the failure: %v, %d new store reads; want a fresh, whole load", err, ms.reads-before)
	}
}

// TestPrefetch: read-ahead loads a block once, in the background, without
// counting a lookup; a later read of it is a hit with no second fetch;
// and no more than MaxPrefetches run at once. The charge (the warm-up
// budget) is taken only by loads that start: never by a prefetch past
// MaxPrefetches, of a loading or of a resident block; a charge that
// refuses leaves the load unstarted.
func TestPrefetch(t *testing.T) {
	e := newEnv(t)
	data := pattern(3, 4<<20)
	e.put(t, "obj", data)
	c, err := cache.Open(cache.Config{Dir: e.cacheDir, Capacity: 64 << 20, BlockSize: 1 << 20, Source: e.src, Stats: e.st, Logger: testLogger(t), Clock: e.clock, MaxPrefetches: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	info, err := c.Stat(ctx, "obj")
	if err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	e.src.setGate(gate)
	if c.PrefetchSlots() != 2 {
		t.Fatalf("%d prefetch slots, want MaxPrefetches 2", c.PrefetchSlots())
	}
	if c.Prefetch("obj", info, 3, func() bool { return false }) || c.PrefetchSlots() != 2 {
		t.Fatal("a prefetch whose charge refused started a load")
	}
	started, charged := 0, 0
	charge := func() bool { charged++; return true }
	for i := range int64(4) {
		if c.Prefetch("obj", info, i, charge) {
			started++
		}
	}
	if started != 2 || c.Prefetch("obj", info, 0, charge) || c.PrefetchSlots() != 0 {
		t.Fatalf("%d prefetches started with MaxPrefetches 2 (and a second of block 0 started again?)", started)
	}
	if charged != started {
		t.Fatalf("%d prefetches charged, %d started: a prefetch that does not start must not be charged", charged, started)
	}
	e.src.setGate(nil)
	close(gate)
	waitFor(t, func() bool { capy, _ := e.st.Status(); return capy.InflightLoads == 0 && capy.Blocks == 2 })
	if c.Prefetch("obj", info, 0, charge) || charged != 2 {
		t.Fatal("a prefetch of a resident block started a load or was charged")
	}
	reads := e.src.reads.Load()
	wantBlock(t, c, "obj", 0, data[:1<<20])
	if _, cnt := e.st.Status(); cnt.HitsTotal != 1 || cnt.MissesTotal != 0 || e.src.reads.Load() != reads || e.st.Prefetches() != 2 {
		t.Fatalf("after prefetching: %+v, %d more store reads, %d prefetches; want the read a hit without a fetch", cnt, e.src.reads.Load()-reads, e.st.Prefetches())
	}
}
