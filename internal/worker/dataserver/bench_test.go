package dataserver_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/datav1"
)

// sink discards bytes. It deliberately has no ReadFrom, so both paths
// below copy through an ordinary 64 KiB buffer.
type sink struct{}

func (sink) Write(p []byte) (int, error) { return len(p), nil }

// BenchmarkHitVsDisk compares reading a 64 MiB object whose 4 MiB blocks
// are all resident, through the data server over loopback TCP (one
// request per block, as a client reading by placement does), with reading
// the same bytes from the blob store's file directly. Both sources sit in
// the page cache after the warm-up, so this measures the data path's
// overhead (HTTP, loopback TCP, sendfile) over a plain read(2) loop.
//
// Sub-benchmarks "dataserver" and "disk" report MB/s each; "ratio" reads
// the object both ways in every iteration and reports server-MB/s,
// disk-MB/s and server/disk from the same run.
func BenchmarkHitVsDisk(b *testing.B) {
	const (
		blockSize = 4 << 20
		objSize   = 64 << 20
		blocks    = objSize / blockSize
	)
	e := newEnv(b, blockSize, 2*objSize)
	e.put(b, "bench/obj", pattern(1, objSize))
	path := filepath.Join(e.blobDir, "bench", "obj")
	ctx := context.Background()

	viaServer := func(b *testing.B) {
		for i := range int64(blocks) {
			res, err := datav1.FetchTo(ctx, e.client, datav1.Request{
				Addr: e.addr, Object: "bench/obj", Offset: i * blockSize, Length: blockSize, Version: e.own.version,
			}, sink{})
			if err != nil || res.N != blockSize {
				b.Fatalf("block %d: %v", i, err)
			}
		}
	}
	buf := make([]byte, 64<<10)
	fromDisk := func(b *testing.B) {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		n, err := io.CopyBuffer(sink{}, struct{ io.Reader }{f}, buf)
		if err != nil || n != objSize {
			b.Fatalf("read %d bytes: %v", n, err)
		}
	}
	// Warm up: load every block, and bring both files into the page cache.
	viaServer(b)
	fromDisk(b)
	_, warm := e.st.Status()

	b.Run("dataserver", func(b *testing.B) {
		b.SetBytes(objSize)
		for b.Loop() {
			viaServer(b)
		}
	})
	b.Run("disk", func(b *testing.B) {
		b.SetBytes(objSize)
		for b.Loop() {
			fromDisk(b)
		}
	})
	b.Run("ratio", func(b *testing.B) {
		var server, disk time.Duration
		var n int
		for b.Loop() {
			t0 := time.Now()
			viaServer(b)
			t1 := time.Now()
			fromDisk(b)
			server += t1.Sub(t0)
			disk += time.Since(t1)
			n++
		}
		mbps := func(d time.Duration) float64 { return float64(n) * objSize / 1e6 / d.Seconds() }
		b.ReportMetric(mbps(server), "server-MB/s")
		b.ReportMetric(mbps(disk), "disk-MB/s")
		b.ReportMetric(mbps(server)/mbps(disk), "server/disk")
	})
	if _, c := e.st.Status(); c.MissesTotal != warm.MissesTotal {
		b.Fatalf("the benchmark missed the cache %d times after the warm-up", c.MissesTotal-warm.MissesTotal)
	}
}
