package cache_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/blob"
	"github.com/talonhq/talon/internal/worker/cache"
)

// openVersioned opens a cache over the file store itself (which has
// versions: size and mtime), not the counting wrapper.
func (e *env) openVersioned(t *testing.T, capacity, blockSize int64) *cache.Cache {
	t.Helper()
	fs, err := blob.NewFile(e.blobDir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := cache.Open(cache.Config{
		Dir: e.cacheDir, Capacity: capacity, BlockSize: blockSize, Source: fs,
		Stats: e.st, Logger: testLogger(t), Clock: e.clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestSameSizeRewriteIsAnotherVersion: a block is tied to the version it
// was loaded from. After an in-place rewrite of the same size, a reader
// that revalidates (and, once the size TTL passed, every reader) gets the
// new bytes, never the old block; a restart keeps the version.
func TestSameSizeRewriteIsAnotherVersion(t *testing.T) {
	e := newEnv(t)
	c := e.openVersioned(t, 1<<20, bs)
	old := pattern(1, 2*bs)
	e.put(t, "obj", old)
	wantBlock(t, c, "obj", 1, old)
	info, err := c.Stat(context.Background(), "obj")
	if err != nil || info.Version == "" {
		t.Fatalf("Stat = %+v, %v; want a version", info, err)
	}
	changed := pattern(2, 2*bs)
	e.put(t, "obj", changed)
	// Make sure the mtime moved even on a coarse filesystem clock.
	p := filepath.Join(e.blobDir, "obj")
	if err := os.Chtimes(p, time.Now(), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	// The old version's block is refused by the store when it is read
	// for the old version, and dropped when the new one is asked for.
	fresh, err := c.Revalidate(context.Background(), "obj")
	if err != nil || fresh.Version == info.Version || fresh.Size != info.Size {
		t.Fatalf("Revalidate = %+v, %v; old version %q", fresh, err, info.Version)
	}
	b, err := c.ReadBlockOf(context.Background(), "obj", fresh, 1)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, b.Size())
	_, _ = b.ReadAt(got, 0)
	b.Close()
	if string(got) != string(changed[bs:]) || b.Version() != fresh.Version {
		t.Fatalf("block 1 after a same-size rewrite: version %q, new bytes %t", b.Version(), string(got) == string(changed[bs:]))
	}
	// Block 0 was never loaded: asking for it at the old version fails
	// loudly rather than caching the new bytes under the old version.
	if _, err := c.ReadBlockOf(context.Background(), "obj", info, 0); !errors.Is(err, blob.ErrVersionChanged) {
		t.Fatalf("ReadBlockOf at the old version = %v, want ErrVersionChanged", err)
	}
	wantBlock(t, c, "obj", 0, changed) // the size cache holds the new version now
	// A restart restores blocks with their versions.
	c.Close()
	c = e.openVersioned(t, 1<<20, bs)
	b, err = c.ReadBlockOf(context.Background(), "obj", fresh, 1)
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	if blocks, _ := cacheFiles(t, e.cacheDir); len(blocks) != 2 {
		t.Fatalf("block files after restart = %d, want 2", len(blocks))
	}
}

// TestPeekDoesNotCache: blocks read for answers about blocks this worker
// does not own are read through, never admitted.
func TestPeekDoesNotCache(t *testing.T) {
	e := newEnv(t)
	c := e.openVersioned(t, 1<<20, bs)
	data := pattern(3, 3*bs)
	e.put(t, "obj", data)
	info, err := c.Stat(context.Background(), "obj")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		b, err := c.Peek(context.Background(), "obj", info, 2)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, b.Size())
		_, _ = b.ReadAt(got, 0)
		b.Close()
		if string(got) != string(data[2*bs:]) {
			t.Fatal("Peek returned other bytes")
		}
	}
	if blocks, _ := cacheFiles(t, e.cacheDir); len(blocks) != 0 {
		t.Fatalf("Peek cached %d block files", len(blocks))
	}
	wantBlock(t, c, "obj", 2, data)
	if b, err := c.Peek(context.Background(), "obj", info, 2); err != nil || b.Version() != info.Version {
		t.Fatalf("Peek of a resident block = %v", err)
	} else {
		b.Close()
	}
}
