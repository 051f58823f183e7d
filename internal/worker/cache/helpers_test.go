package cache_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/talonhq/talon/internal/blob"
	"github.com/talonhq/talon/internal/worker/cache"
	"github.com/talonhq/talon/internal/worker/stats"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		crashChild()
		return
	}
	goleak.VerifyTestMain(m)
}

// countingStore wraps a blob.Store, counting calls, and can hold reads at
// a gate or fail them.
type countingStore struct {
	blob.Store
	reads atomic.Int64
	sizes atomic.Int64

	mu      sync.Mutex
	gate    chan struct{} // when set, reads wait for it to close
	failErr error         // when set, reads fail with it
	failN   int           // how many more reads fail (<0: all)
}

func (s *countingStore) Size(ctx context.Context, object string) (int64, error) {
	s.sizes.Add(1)
	return s.Store.Size(ctx, object)
}

func (s *countingStore) ReadRange(ctx context.Context, object string, off, n int64) (io.ReadCloser, error) {
	s.reads.Add(1)
	s.mu.Lock()
	gate, failErr := s.gate, s.failErr
	if failErr != nil && s.failN != 0 {
		s.failN--
	} else {
		failErr = nil
	}
	s.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if failErr != nil {
		return nil, failErr
	}
	return s.Store.ReadRange(ctx, object, off, n)
}

func (s *countingStore) failNext(n int, err error) {
	s.mu.Lock()
	s.failErr, s.failN = err, n
	s.mu.Unlock()
}

func (s *countingStore) setGate(g chan struct{}) {
	s.mu.Lock()
	s.gate = g
	s.mu.Unlock()
}

// env is a blob directory, a counting store over it and a cache directory.
type env struct {
	blobDir  string
	cacheDir string
	src      *countingStore
	st       *stats.Stats
	now      atomic.Int64 // unix nanos of the fake clock
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{blobDir: t.TempDir(), cacheDir: t.TempDir(), st: stats.New()}
	fs, err := blob.NewFile(e.blobDir)
	if err != nil {
		t.Fatal(err)
	}
	e.src = &countingStore{Store: fs}
	e.now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return e
}

func (e *env) clock() time.Time { return time.Unix(0, e.now.Load()) }

func (e *env) advance(d time.Duration) { e.now.Add(int64(d)) }

func (e *env) open(t *testing.T, capacity, blockSize int64) *cache.Cache {
	t.Helper()
	c, err := cache.Open(cache.Config{
		Dir: e.cacheDir, Capacity: capacity, BlockSize: blockSize, Source: e.src,
		Stats: e.st, Logger: testLogger(t), Clock: e.clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// pattern returns n bytes that differ per object seed and position.
func pattern(seed, n int) []byte {
	b := make([]byte, n)
	x := uint32(seed*2654435761 + 1)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

func (e *env) put(t *testing.T, key string, data []byte) {
	t.Helper()
	p := filepath.Join(e.blobDir, filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// readBlock reads a whole block through the cache.
func readBlock(t *testing.T, c *cache.Cache, key string, index int64) ([]byte, error) {
	t.Helper()
	b, err := c.ReadBlock(context.Background(), key, index)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	var buf bytes.Buffer
	n, err := b.WriteRange(&buf, 0, b.Size())
	if err != nil || n != b.Size() {
		t.Fatalf("WriteRange = %d, %v; want %d", n, err, b.Size())
	}
	return buf.Bytes(), nil
}

func wantBlock(t *testing.T, c *cache.Cache, key string, index int64, data []byte) {
	t.Helper()
	got, err := readBlock(t, c, key, index)
	if err != nil {
		t.Fatalf("ReadBlock(%q, %d): %v", key, index, err)
	}
	bs := c.BlockSize()
	want := data[index*bs : min((index+1)*bs, int64(len(data)))]
	if !bytes.Equal(got, want) {
		t.Fatalf("ReadBlock(%q, %d) = %d bytes, differs from the object's %d bytes at %d", key, index, len(got), len(want), index*bs)
	}
}

// cacheFiles lists block and temporary files under dir with their sizes.
func cacheFiles(t *testing.T, dir string) (blocks, temps map[string]int64) {
	t.Helper()
	blocks, temps = map[string]int64{}, map[string]int64{}
	err := filepath.WalkDir(filepath.Join(dir, "blocks"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil // renamed or removed meanwhile
		}
		switch {
		case strings.HasPrefix(d.Name(), "tmp-"):
			temps[p] = fi.Size()
		case strings.HasSuffix(d.Name(), ".blk"):
			blocks[p] = fi.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return blocks, temps
}

func sum(m map[string]int64) (total int64) {
	for _, v := range m {
		total += v
	}
	return total
}
