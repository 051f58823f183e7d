package cache_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/talonhq/talon/internal/blob"
	"github.com/talonhq/talon/internal/worker/cache"
	"github.com/talonhq/talon/internal/worker/stats"
)

// benchCache opens a cache of 1 MiB blocks over objects of 8 blocks each.
func benchCache(b *testing.B, objects int) (*cache.Cache, blob.Info) {
	b.Helper()
	blobDir, cacheDir := b.TempDir(), b.TempDir()
	src, err := blob.NewFile(blobDir)
	if err != nil {
		b.Fatal(err)
	}
	data := pattern(1, 8<<20)
	for i := range objects {
		if err := os.WriteFile(filepath.Join(blobDir, fmt.Sprintf("obj%d", i)), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	c, err := cache.Open(cache.Config{
		Dir: cacheDir, Capacity: 1 << 30, BlockSize: 1 << 20, Source: src,
		Stats: stats.New(), Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	info, err := c.Stat(context.Background(), "obj0")
	if err != nil {
		b.Fatal(err)
	}
	return c, info
}

// BenchmarkHit is a resident block's ReadBlock, a small read and Close,
// from every P at once.
func BenchmarkHit(b *testing.B) {
	c, _ := benchCache(b, 1)
	for i := range int64(8) {
		if _, _, err := c.Load(context.Background(), "obj0", mustStat(b, c), i); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		buf := make([]byte, 4096)
		i := int64(0)
		for pb.Next() {
			blk, err := c.ReadBlock(context.Background(), "obj0", i%8)
			if err != nil {
				b.Error(err)
				return
			}
			if _, err := blk.ReadAt(buf, 0); err != nil {
				b.Error(err)
			}
			blk.Close()
			i++
		}
	})
}

// BenchmarkStreamedLoad loads an 8 MiB object block by block through
// OpenBlock with four streaming readers per block and 16 KiB load writes
// (each write publishes progress), while other goroutines hit resident
// blocks of another object.
func BenchmarkStreamedLoad(b *testing.B) {
	c, info := benchCache(b, 2)
	c.SetLoadBuffer(16 << 10)
	info1, err := c.Stat(context.Background(), "obj1")
	if err != nil {
		b.Fatal(err)
	}
	for i := range int64(8) {
		if _, _, err := c.Load(context.Background(), "obj1", info1, i); err != nil {
			b.Fatal(err)
		}
	}
	stop := make(chan struct{})
	var hitters sync.WaitGroup
	for range 2 {
		hitters.Add(1)
		go func() {
			defer hitters.Done()
			for i := int64(0); ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if blk, err := c.OpenBlock(context.Background(), "obj1", info1, i%8); err == nil {
					blk.Close()
				}
			}
		}()
	}
	b.SetBytes(8 << 20)
	b.ResetTimer()
	for range b.N {
		c.Free(func(o string) bool { return o == "obj0" })
		var wg sync.WaitGroup
		for i := range int64(8) {
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					blk, err := c.OpenBlock(context.Background(), "obj0", info, i)
					if err != nil {
						b.Error(err)
						return
					}
					defer blk.Close()
					if _, err := blk.WriteRange(io.Discard, 0, blk.Size()); err != nil {
						b.Error(err)
					}
				}()
			}
		}
		wg.Wait()
	}
	b.StopTimer()
	close(stop)
	hitters.Wait()
}

func mustStat(b *testing.B, c *cache.Cache) blob.Info {
	b.Helper()
	info, err := c.Stat(context.Background(), "obj0")
	if err != nil {
		b.Fatal(err)
	}
	return info
}
