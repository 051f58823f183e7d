package integration

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/bench"
	"github.com/talonhq/talon/internal/blob"
	"github.com/talonhq/talon/internal/blob/azure"
	"github.com/talonhq/talon/internal/blob/gcs"
	"github.com/talonhq/talon/internal/blob/s3"
	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/datav1"
	"github.com/talonhq/talon/internal/testenv"
	"github.com/talonhq/talon/internal/testsupport/talontest"
	"github.com/talonhq/talon/internal/worker/cache"
	"github.com/talonhq/talon/internal/worker/dataserver"
	"github.com/talonhq/talon/internal/worker/stats"
)

// dataPathRows are issue 40's rows: a cold read through a worker against
// reading the same object straight from the store, on real S3, Google
// Cloud Storage and Azure Blob emulators on loopback, and talon get's
// parallel read of a 64 MiB object over three workers against one.
func dataPathRows(t *testing.T, pairs int) []reportRow {
	t.Helper()
	var rows []reportRow
	for _, st := range []struct {
		name string
		open func(t *testing.T) (blob.Store, func(key string, data []byte))
	}{{"S3 (versitygw)", reportS3}, {"GCS (fake-gcs-server)", reportGCS}, {"Azure Blob (Azurite)", reportAzure}} {
		s, put := st.open(t)
		rows = append(rows, coldReadRow(t, st.name, s, put, pairs))
	}
	return append(rows, getSpreadRow(t, pairs))
}

func reportS3(t *testing.T) (blob.Store, func(string, []byte)) {
	srv := testenv.StartS3(t)
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	srv.CreateBucket(t, "bench")
	s, err := s3.New(srv.URL("bench", ""), blob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s, func(key string, data []byte) { srv.Put(t, "bench", key, data) }
}

func reportGCS(t *testing.T) (blob.Store, func(string, []byte)) {
	g := testenv.StartGCS(t)
	g.CreateBucket(t, "bench")
	s, err := gcs.New(g.URL("bench", ""), blob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s, func(key string, data []byte) { g.Put(t, "bench", key, data) }
}

func reportAzure(t *testing.T) (blob.Store, func(string, []byte)) {
	a := testenv.StartAzurite(t)
	t.Setenv(azure.EnvConnectionString, a.ConnectionString)
	a.CreateContainer(t, "bench")
	s, err := azure.New(a.URL("bench", ""), blob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s, func(key string, data []byte) { a.Put(t, "bench", key, data) }
}

type ownsAll struct{}

func (ownsAll) Owns(string, int64) (bool, uint64) { return true, 1 }

// coldReadRow reads a 32 MiB object in 4 MiB blocks, one at a time, in
// interleaved pairs: straight from the store (ranged reads), then through
// a worker (a cache over the store and its data server on loopback) whose
// cache is new, so every block is loaded from the store (streamed, with
// read-ahead). The ratio is the median of the pairs' cold/direct.
func coldReadRow(t *testing.T, name string, s blob.Store, put func(string, []byte), pairs int) reportRow {
	t.Helper()
	const blockSize, size = 4 << 20, 32 << 20
	put("cold.bin", pattern64(size))
	ctx := context.Background()
	direct := func() time.Duration {
		start := time.Now()
		for off := int64(0); off < size; off += blockSize {
			rc, err := s.ReadRange(ctx, "cold.bin", off, blockSize)
			if err != nil {
				t.Fatal(err)
			}
			n, err := io.CopyBuffer(io.Discard, rc, make([]byte, datav1.CopyBufferSize))
			rc.Close()
			if err != nil || n != blockSize {
				t.Fatalf("%s direct read at %d: %d bytes, %v", name, off, n, err)
			}
		}
		return time.Since(start)
	}
	hc := &http.Client{Timeout: time.Minute}
	cold := func() time.Duration {
		st := stats.New()
		c, err := cache.Open(cache.Config{Dir: t.TempDir(), Capacity: 2 * size, BlockSize: blockSize, Source: s, Stats: st, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		h, err := dataserver.New(dataserver.Config{Cache: c, Ownership: ownsAll{}, Stats: st, Logger: slog.New(slog.DiscardHandler), WarmupRate: -1})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h)
		defer srv.Close()
		defer hc.CloseIdleConnections()
		addr := strings.TrimPrefix(srv.URL, "http://")
		start := time.Now()
		for off := int64(0); off < size; off += blockSize {
			res, err := datav1.FetchTo(ctx, hc, datav1.Request{Addr: addr, Object: "cold.bin", Offset: off, Length: blockSize, Version: 1}, io.Discard)
			if err != nil || res.N != blockSize {
				t.Fatalf("%s cold read at %d: %v", name, off, err)
			}
		}
		return time.Since(start)
	}
	direct() // warm the server and the connections
	var ratios, coldMB, directMB []float64
	for range max(pairs, 3) {
		d, c := direct(), cold()
		directMB, coldMB = append(directMB, size/1e6/d.Seconds()), append(coldMB, size/1e6/c.Seconds())
		ratios = append(ratios, d.Seconds()/c.Seconds())
	}
	r := bench.SpreadOf(ratios)
	return reportRow{path: "cold read of 32 MiB (4 MiB blocks, one at a time) through a worker, " + name + " on loopback (direct ranged reads as the limit)",
		talon: fmt.Sprintf("%.0f MB/s", bench.SpreadOf(coldMB).Median), limit: fmt.Sprintf("%.0f MB/s", bench.SpreadOf(directMB).Median),
		ratio: r.String(), goal: ">=0.9x direct", met: r.Median >= 0.9}
}

// getSpreadRow reads a 64 MiB object, cached, through a three-worker and
// a one-worker cluster (worker processes, 1 MiB blocks) as talon get does
// (4 blocks in flight), in interleaved pairs.
func getSpreadRow(t *testing.T, pairs int) reportRow {
	t.Helper()
	blobs := t.TempDir()
	const size = 64 << 20
	talontest.WriteBlob(t, blobs, "big.bin", size, 5)
	read := func(c *talontest.Cluster3) time.Duration {
		cl, err := client.New(client.Options{Coordinators: []string{c.Ctl}, CacheTTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		rd := &client.ObjectReader{Client: cl, HTTP: &http.Client{Timeout: time.Minute}, BlockSize: talontest.BlockSize, Replicas: 1, Parallel: 4}
		start := time.Now()
		n, err := rd.ReadObject(context.Background(), "big.bin", io.Discard)
		if err != nil || n != size {
			t.Fatalf("read: %d bytes, %v", n, err)
		}
		return time.Since(start)
	}
	three := talontest.StartCluster(t, blobs, 3, "--cache-capacity", "256MiB", "--warmup-rate", "0")
	one := talontest.StartCluster(t, blobs, 1, "--cache-capacity", "256MiB", "--warmup-rate", "0")
	read(three) // load the caches
	read(one)
	var ratios, threeMB, oneMB []float64
	for range max(pairs, 3) {
		a, b := read(three), read(one)
		threeMB, oneMB = append(threeMB, size/1e6/a.Seconds()), append(oneMB, size/1e6/b.Seconds())
		ratios = append(ratios, b.Seconds()/a.Seconds())
	}
	r := bench.SpreadOf(ratios)
	return reportRow{path: "talon get of a cached 64 MiB object, 4 blocks in flight, 3 workers (one worker as the limit)",
		talon: fmt.Sprintf("%.0f MB/s", bench.SpreadOf(threeMB).Median), limit: fmt.Sprintf("%.0f MB/s", bench.SpreadOf(oneMB).Median),
		ratio: r.String(), goal: ">=2x one worker", met: r.Median >= 2}
}

// pattern64 is n bytes of a fixed pattern.
func pattern64(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>9)
	}
	return b
}

// TestBenchReportDataPath measures only the data path rows (make
// bench-report measures them with the rest).
func TestBenchReportDataPath(t *testing.T) {
	if os.Getenv(benchReportEnv) == "" {
		t.Skipf("measurement: set %s=1 (make bench-report)", benchReportEnv)
	}
	for _, r := range dataPathRows(t, reportPairs(t)) {
		t.Logf("%s: talon %s | limit %s | ratio %s | goal %s met=%t", r.path, r.talon, r.limit, r.ratio, r.goal, r.met)
	}
}
