package dataserver_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
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

// countingS3 starts a real S3 server (versitygw) with a bucket "talon"
// behind a proxy that counts its requests by method, and returns the
// s3:// store of that bucket through the proxy, the counts (GET: object
// reads, HEAD: stats) and a function that uploads an object.
func countingS3(t *testing.T) (blob.Store, map[string]*atomic.Int64, func(key string, data []byte)) {
	t.Helper()
	testenv.SkipIfShort(t)
	srv := testenv.StartS3(t)
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	srv.CreateBucket(t, "talon")
	target, _ := url.Parse(srv.Endpoint)
	proxy := httputil.NewSingleHostReverseProxy(target)
	counts := map[string]*atomic.Int64{http.MethodGet: {}, http.MethodHead: {}}
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n := counts[r.Method]; n != nil {
			n.Add(1)
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	store, err := s3store.New("s3://talon?use_path_style=true&endpoint="+url.QueryEscape(front.URL), blob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	put := func(key string, data []byte) {
		t.Helper()
		if _, err := srv.Client().PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String("talon"), Key: aws.String(key),
			Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data)))}); err != nil {
			t.Fatal(err)
		}
	}
	return store, counts, put
}

// serveStore runs a data server with own's ownership over a new cache of
// store and returns its address and stats.
func serveStore(t *testing.T, store blob.Store, own dataserver.Ownership) (string, *stats.Stats) {
	t.Helper()
	st := stats.New()
	log := slog.New(slog.DiscardHandler)
	c, err := cache.Open(cache.Config{Dir: t.TempDir(), Capacity: 64 << 20, BlockSize: bs, Source: store, Stats: st, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	h, err := dataserver.New(dataserver.Config{Cache: c, Ownership: own, Stats: st, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(func() { hs.Close(); c.Close() })
	return strings.TrimPrefix(hs.URL, "http://"), st
}

// readAheadCase is one access pattern: the blocks one client reads of a
// 40-block object, in order, from this worker (which owns the blocks
// owned reports true for: the client reads the others from other
// workers).
type readAheadCase struct {
	name  string
	owned func(block int64) bool
	// first reports the blocks this worker is the first owner of, the
	// one readers ask (nil: every block it owns, placement-replicas 1).
	first func(block int64) bool
	reads []int64
	// sequential: read-ahead must load blocks before they are read;
	// else it must load none.
	sequential bool
}

const readAheadBlocks = 40

func readAheadCases() []readAheadCase {
	all := func(int64) bool { return true }
	third := func(b int64) bool { return b%3 == 0 }
	seq := func(from, to, step int64) []int64 {
		var out []int64
		for b := from; b < to; b += step {
			out = append(out, b)
		}
		return out
	}
	return []readAheadCase{
		{name: "sparse, one worker", owned: all, reads: seq(0, readAheadBlocks, 10)},
		{name: "sparse, every other block", owned: all, reads: seq(0, 20, 2)},
		{name: "sparse, a third owned", owned: third, reads: seq(0, readAheadBlocks, 9)},
		{name: "sequential, one worker", owned: all, reads: seq(0, readAheadBlocks, 1), sequential: true},
		{name: "sequential, a third owned", owned: third, reads: seq(0, readAheadBlocks, 3), sequential: true},
		// placement-replicas 2 on two workers: this worker owns every
		// block and is the first owner of every other one, which the
		// client reads here; it read ahead on 23 of 64 blocks before.
		{name: "sequential, first owner of every other block (replicas 2)", owned: all, first: func(b int64) bool { return b%2 == 0 },
			reads: seq(0, readAheadBlocks, 2), sequential: true},
	}
}

// runReadAhead reads tc's pattern through the server at addr, each read
// after the loads the one before started have ended, and returns the
// store reads per block read, the prefetches and the reads that found
// their block resident (hits).
func runReadAhead(t *testing.T, tc readAheadCase, addr string, st *stats.Stats, storeReads func() int64, data []byte) (perRead float64, prefetches, hits uint64) {
	t.Helper()
	hc := &http.Client{Timeout: 30 * time.Second}
	defer hc.CloseIdleConnections()
	before := storeReads()
	for _, b := range tc.reads {
		res, err := datav1.Fetch(context.Background(), hc, datav1.Request{Addr: addr, Object: "obj", Offset: b * bs, Length: bs, Replicas: 1})
		if err != nil || !bytes.Equal(res.Data, data[b*bs:(b+1)*bs]) {
			t.Fatalf("read of block %d: %v", b, err)
		}
		waitIdle(t, st)
	}
	_, c := st.Status()
	return float64(storeReads()-before) / float64(len(tc.reads)), st.Prefetches(), c.HitsTotal
}

// waitIdle waits until no block load is in flight.
func waitIdle(t *testing.T, st *stats.Stats) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for c, _ := st.Status(); c.InflightLoads != 0; c, _ = st.Status() {
		if time.Now().After(deadline) {
			t.Fatalf("loads still in flight after 30s: %+v", c)
		}
		time.Sleep(time.Millisecond)
	}
}

// checkReadAhead holds a pattern's outcome to the rule: a sparse read
// costs one store read per block read (issue 47: read-ahead made it 3.9)
// and prefetches nothing; a sequential one still reads ahead: every block
// after the first two is loaded before the client asks for it (its read
// is a hit, or joins the load), and each block once.
func checkReadAhead(t *testing.T, tc readAheadCase, perRead float64, prefetches, hits uint64) {
	t.Helper()
	t.Logf("%s: %.2f store reads per block read, %d prefetches, %d of %d reads hits", tc.name, perRead, prefetches, hits, len(tc.reads))
	switch {
	case !tc.sequential && (perRead > 1.1 || prefetches != 0):
		t.Fatalf("sparse reads: %.2f store reads per block read and %d prefetches; want at most 1.1 and none", perRead, prefetches)
	case tc.sequential && (perRead > 1.0 || int(prefetches) < len(tc.reads)-2):
		t.Fatalf("sequential reads: %.2f store reads per block read, %d prefetches for %d reads; want one store read per block, every block but the first two loaded ahead of its read", perRead, prefetches, len(tc.reads))
	}
}

// TestReadAheadOnlyForSequentialReads, on the file store: reading blocks
// 0, 10, 20... (or every other block) loads only those blocks; reading in
// order (alone, or every third block as a worker of three sees it) loads
// the blocks ahead of the reader, each once.
func TestReadAheadOnlyForSequentialReads(t *testing.T) {
	data := pattern(5, readAheadBlocks*bs)
	for _, tc := range readAheadCases() {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnvWith(t, bs, 1<<20, nil, func(c *dataserver.Config) { c.Ownership = tc.ownership() })
			e.put(t, "obj", data)
			perRead, prefetches, hits := runReadAhead(t, tc, e.addr, e.st, e.src.reads.Load, data)
			checkReadAhead(t, tc, perRead, prefetches, hits)
		})
	}
}

// TestReadAheadAtS3: the same patterns counted in GETs at a real S3
// server (versitygw).
func TestReadAheadAtS3(t *testing.T) {
	store, counts, put := countingS3(t)
	data := pattern(6, readAheadBlocks*bs)
	put("obj", data)
	for _, tc := range readAheadCases() {
		t.Run(tc.name, func(t *testing.T) {
			addr, st := serveStore(t, store, tc.ownership())
			perRead, prefetches, hits := runReadAhead(t, tc, addr, st, counts[http.MethodGet].Load, data)
			checkReadAhead(t, tc, perRead, prefetches, hits)
		})
	}
}

// ownedBy is an Ownership of the blocks owned reports true for.
type ownedBy func(block int64) bool

func (o ownedBy) Owns(_ string, block int64) (bool, uint64) { return o(block), 0 }

// firstOwnedBy is an Ownership that also tells the blocks this worker is
// the first owner of (dataserver.FirstOwnership).
type firstOwnedBy struct{ owned, first func(block int64) bool }

func (o firstOwnedBy) Owns(_ string, block int64) (bool, uint64) { return o.owned(block), 0 }
func (o firstOwnedBy) OwnsFirst(_ string, block int64) bool      { return o.first(block) }

// ownership is the case's Ownership.
func (tc readAheadCase) ownership() dataserver.Ownership {
	if tc.first == nil {
		return ownedBy(tc.owned)
	}
	return firstOwnedBy{owned: tc.owned, first: tc.first}
}
