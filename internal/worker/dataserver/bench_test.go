package dataserver_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/datav1"
	"github.com/talonhq/talon/internal/testsupport"
)

// sink discards bytes. It deliberately has no ReadFrom, so every reader
// below copies through its own user-space buffer, as a client writing the
// bytes somewhere does.
type sink struct{}

func (sink) Write(p []byte) (int, error) { return len(p), nil }

// BenchmarkHitVsDisk reads a 64 MiB object whose 4 MiB blocks are all
// resident, three ways, each into a sink:
//
//   - dataserver: through the data server over loopback TCP, one request
//     per block on one keep-alive connection (as a client reading by
//     placement does), with datav1.FetchTo (a datav1.CopyBufferSize
//     buffer);
//   - loopback: the ceiling of the network path alone: the same 16 x
//     4 MiB sent with sendfile(2) over a plain loopback TCP connection
//     (a one-byte request per block, no HTTP) and read with a buffer of
//     the same size;
//   - file: what a local reader does: read(2) of the blob store's file
//     into one reused buffer of the same size.
//
// Both files sit in the page cache after the warm-up, so nothing here
// touches a disk: "file" is a memory copy, "loopback" adds the kernel's
// TCP path (both directions run on this machine's CPUs), and
// "dataserver" adds HTTP and the cache lookup to that. Sub-benchmark
// "ratio" runs all three in every iteration and reports their MB/s and
// the ratios from the same run, which is what to compare on a busy
// machine.
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

	scratch := make([]byte, datav1.CopyBufferSize) // as the raw loopback's reader has its own
	viaServer := func(b *testing.B) {
		for i := range int64(blocks) {
			res, err := datav1.FetchTo(ctx, e.client, datav1.Request{
				Addr: e.addr, Object: "bench/obj", Offset: i * blockSize, Length: blockSize, Version: e.own.version, Buffer: scratch,
			}, sink{})
			if err != nil || res.N != blockSize {
				b.Fatalf("block %d: %v", i, err)
			}
		}
	}
	lb := testsupport.NewLoopback(b, path, blockSize, datav1.CopyBufferSize)
	viaLoopback := func(b *testing.B) {
		for range blocks {
			if _, err := lb.Next(sink{}); err != nil {
				b.Fatal(err)
			}
		}
	}
	buf := make([]byte, datav1.CopyBufferSize)
	fromFile := func(b *testing.B) {
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
	// Warm up: load every block, bring both files into the page cache
	// and let the loopback connection's windows grow.
	viaServer(b)
	viaLoopback(b)
	fromFile(b)
	_, warm := e.st.Status()

	for _, bm := range []struct {
		name string
		read func(*testing.B)
	}{{"dataserver", viaServer}, {"loopback", viaLoopback}, {"file", fromFile}} {
		b.Run(bm.name, func(b *testing.B) {
			b.SetBytes(objSize)
			for b.Loop() {
				bm.read(b)
			}
		})
	}
	b.Run("ratio", func(b *testing.B) {
		// Wall time, and the CPU time of the whole process (client and
		// server goroutines, kernel included): on a shared machine the
		// first swings with the neighbours' load, the second much less.
		var wall, cpu [3]time.Duration
		var n int
		for b.Loop() {
			for i, read := range []func(*testing.B){viaServer, viaLoopback, fromFile} {
				t0, c0 := time.Now(), cpuTime(b)
				read(b)
				wall[i] += time.Since(t0)
				cpu[i] += cpuTime(b) - c0
			}
			n++
		}
		mbps := func(d time.Duration) float64 { return float64(n) * objSize / 1e6 / d.Seconds() }
		for i, name := range []string{"server", "loopback", "file"} {
			b.ReportMetric(mbps(wall[i]), name+"-MB/s")
			b.ReportMetric(cpu[i].Seconds()*1e3/(float64(n)*objSize/1e9), name+"-cpu-ms/GB")
		}
		b.ReportMetric(mbps(wall[0])/mbps(wall[1]), "server/loopback")
		b.ReportMetric(mbps(wall[0])/mbps(wall[2]), "server/file")
	})
	if _, c := e.st.Status(); c.MissesTotal != warm.MissesTotal {
		b.Fatalf("the benchmark missed the cache %d times after the warm-up", c.MissesTotal-warm.MissesTotal)
	}
}

// cpuTime returns the CPU time (user and system) the process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
