package dataserver_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/talonhq/talon/internal/blob"
	s3store "github.com/talonhq/talon/internal/blob/s3"
	"github.com/talonhq/talon/internal/datav1"
	"github.com/talonhq/talon/internal/testenv"
	"github.com/talonhq/talon/internal/worker/cache"
	"github.com/talonhq/talon/internal/worker/dataserver"
	"github.com/talonhq/talon/internal/worker/stats"
)

// BenchmarkS3ColdVsDirect reads a 32 MiB object in 4 MiB blocks from a
// real S3 server (versitygw on loopback) three ways in every iteration,
// and reports each one's MB/s and the ratios from the same run:
//
//   - direct: ranged GETs of the blocks straight from the S3 server
//     through the s3:// backend (what a client without Talon does);
//   - cold: the same blocks through a worker whose cache is empty (a new
//     cache directory per iteration), so every block is loaded from S3:
//     a miss streams the store's bytes to the client as they arrive, and
//     read-ahead loads the next blocks meanwhile;
//   - hit: the same blocks through that worker again, all resident.
//
// cold/direct is what a miss costs over reading S3 directly; hit is the
// data server's hit path, which BenchmarkHitVsDisk compares with the
// loopback ceiling.
func BenchmarkS3ColdVsDirect(b *testing.B) {
	testenv.SkipIfShort(b)
	const (
		blockSize = 4 << 20
		objSize   = 32 << 20
		blocks    = objSize / blockSize
	)
	srv := testenv.StartS3(b)
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		b.Setenv(k, v)
	}
	srv.CreateBucket(b, "bench")
	data := pattern(7, objSize)
	sum := sha256.Sum256(data)
	ctx := context.Background()
	if _, err := srv.Client().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bench"), Key: aws.String("obj"), Body: bytes.NewReader(data),
		ContentLength: aws.Int64(objSize), ChecksumSHA256: aws.String(base64.StdEncoding.EncodeToString(sum[:]))}); err != nil {
		b.Fatal(err)
	}
	store, err := s3store.New(srv.URL("bench", ""), blob.Options{})
	if err != nil {
		b.Fatal(err)
	}
	direct := func(b *testing.B) {
		for i := range int64(blocks) {
			rc, err := store.ReadRange(ctx, "obj", i*blockSize, blockSize)
			if err != nil {
				b.Fatal(err)
			}
			n, err := io.CopyBuffer(sink{}, rc, make([]byte, datav1.CopyBufferSize))
			rc.Close()
			if err != nil || n != blockSize {
				b.Fatalf("direct block %d: %d bytes, %v", i, n, err)
			}
		}
	}
	hc := &http.Client{Timeout: time.Minute}
	// worker returns a data server over a new, empty cache.
	worker := func(b *testing.B) (addr string, st *stats.Stats, stop func()) {
		st = stats.New()
		c, err := cache.Open(cache.Config{Dir: b.TempDir(), Capacity: 2 * objSize, BlockSize: blockSize, Source: store, Stats: st, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		h, err := dataserver.New(dataserver.Config{Cache: c, Ownership: &owners{notOwned: map[int64]bool{}}, Stats: st, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		hs := httptest.NewServer(h)
		return strings.TrimPrefix(hs.URL, "http://"), st, func() { hc.CloseIdleConnections(); hs.Close(); c.Close() }
	}
	through := func(b *testing.B, addr string) {
		for i := range int64(blocks) {
			res, err := datav1.FetchTo(ctx, hc, datav1.Request{Addr: addr, Object: "obj", Offset: i * blockSize, Length: blockSize}, sink{})
			if err != nil || res.N != blockSize {
				b.Fatalf("block %d: %v", i, err)
			}
		}
	}
	direct(b) // warm the server's page cache and connections
	var wall [3]time.Duration
	var n int
	for b.Loop() {
		b.StopTimer()
		addr, st, stop := worker(b)
		b.StartTimer()
		t0 := time.Now()
		direct(b)
		t1 := time.Now()
		through(b, addr)
		t2 := time.Now()
		// A miss streams, so the client can have the last block before
		// the worker has committed it: let the loads finish first.
		b.StopTimer()
		waitLoadsDone(b, st)
		b.StartTimer()
		t2b := time.Now()
		through(b, addr)
		t3 := time.Now()
		wall[0] += t1.Sub(t0)
		wall[1] += t2.Sub(t1)
		wall[2] += t3.Sub(t2b)
		n++
		b.StopTimer()
		if _, c := st.Status(); c.MissesTotal+st.Prefetches() < blocks || c.HitsTotal < blocks || c.BackendFetchesTotal != blocks+1 {
			b.Fatalf("%d misses, %d read-ahead loads, %d hits, %d store calls; want every block loaded once (and one stat), then %d hits",
				c.MissesTotal, st.Prefetches(), c.HitsTotal, c.BackendFetchesTotal, blocks)
		}
		stop()
		b.StartTimer()
	}
	mbps := func(d time.Duration) float64 { return float64(n) * objSize / 1e6 / d.Seconds() }
	for i, name := range []string{"direct", "cold", "hit"} {
		b.ReportMetric(mbps(wall[i]), name+"-MB/s")
	}
	b.ReportMetric(mbps(wall[1])/mbps(wall[0]), "cold/direct")
	b.ReportMetric(mbps(wall[2])/mbps(wall[0]), "hit/direct")
}

// waitLoadsDone waits until the worker has no block load in flight.
func waitLoadsDone(b *testing.B, st *stats.Stats) {
	b.Helper()
	deadline := time.Now().Add(time.Minute)
	for c, _ := st.Status(); c.InflightLoads > 0; c, _ = st.Status() {
		if time.Now().After(deadline) {
			b.Fatal("block loads still in flight after a minute")
		}
		time.Sleep(time.Millisecond)
	}
}
