package dataserver_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
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

// TestForcedStoreReadsPerClient: 500 fresh=1 reads from one client cost
// at most the configured rate of store requests (its burst plus the rate
// over the time taken), the rest answered 429 resource_exhausted with
// Retry-After; so do versions the worker does not know and a missing key.
// Reads the worker answers from what it knows are not limited, nor is
// another client. Before, each such read was one store request: 500
// fresh=1 reads were 500 S3 HEADs in 0.61 s.
func TestForcedStoreReadsPerClient(t *testing.T) {
	const perSecond = 10
	e := newEnvWith(t, bs, 1<<20, nil, func(c *dataserver.Config) { c.StoreReadRate = perSecond })
	e.put(t, "obj", pattern(9, 2*bs))
	get := func(hc *http.Client, query string) (int, string) {
		t.Helper()
		resp, err := hc.Get("http://" + e.addr + "/v1/objects/" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		code := ""
		if resp.StatusCode != http.StatusOK {
			code, _, _ = apiErr(t, resp)
			if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") != "1" {
				t.Fatalf("429 without Retry-After: %v", resp.Header)
			}
		}
		return resp.StatusCode, code
	}
	for _, tt := range []struct {
		name, query string
		okStatus    int
	}{
		{"fresh=1", "obj?offset=0&length=10&fresh=1", http.StatusOK},
		{"unknown version", "obj?offset=0&length=10&version=v-unknown", http.StatusPreconditionFailed},
		{"missing key", "missing?offset=0&length=10", http.StatusNotFound},
	} {
		t.Run(tt.name, func(t *testing.T) {
			time.Sleep(2 * time.Second) // a full burst again
			before := e.src.stats.Load()
			start := time.Now()
			served, refused := 0, 0
			for range 500 {
				switch status, code := get(e.client, tt.query); {
				case status == tt.okStatus:
					served++
				case status == http.StatusTooManyRequests && code == datav1.CodeResourceExhausted:
					refused++
				default:
					t.Fatalf("answer %d %s", status, code)
				}
			}
			elapsed := time.Since(start)
			stats := e.src.stats.Load() - before
			bound := int64(2*perSecond + perSecond*elapsed.Seconds() + 1)
			t.Logf("500 reads in %s: %d store requests (bound %d), %d served, %d refused", elapsed.Round(time.Millisecond), stats, bound, served, refused)
			if stats > bound || refused == 0 || int64(served) > bound {
				t.Fatalf("500 reads cost %d store requests in %s, want at most %d (rate %d/s, burst %d)", stats, elapsed, bound, perSecond, 2*perSecond)
			}
		})
	}
	// What the worker knows is answered without the store, and unlimited.
	before := e.src.stats.Load()
	for range 200 {
		if status, code := get(e.client, "obj?offset=0&length=10"); status != http.StatusOK {
			t.Fatalf("a cached read after the floods: %d %s", status, code)
		}
	}
	if n := e.src.stats.Load() - before; n > 1 {
		t.Fatalf("200 cached reads cost %d store requests", n)
	}
	// Another client has its own budget.
	other := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext}}
	defer other.CloseIdleConnections()
	if status, code := get(other, "obj?offset=0&length=10&fresh=1"); status != http.StatusOK {
		t.Fatalf("another client's fresh read: %d %s", status, code)
	}
}

// TestForcedStoreReadsAtS3: the same, counted at a real S3 server (behind
// a proxy that counts its HEADs): 500 fresh=1 reads from one client cost
// at most the burst plus the configured rate of HEADs (they were 500).
func TestForcedStoreReadsAtS3(t *testing.T) {
	testenv.SkipIfShort(t)
	srv := testenv.StartS3(t)
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	srv.CreateBucket(t, "talon")
	data := pattern(3, bs)
	if _, err := srv.Client().PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String("talon"), Key: aws.String("obj"),
		Body: bytes.NewReader(data), ContentLength: aws.Int64(bs)}); err != nil {
		t.Fatal(err)
	}
	target, _ := url.Parse(srv.Endpoint)
	proxy := httputil.NewSingleHostReverseProxy(target)
	var heads atomic.Int64
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead {
			heads.Add(1)
		}
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()
	store, err := s3store.New("s3://talon?use_path_style=true&endpoint="+url.QueryEscape(front.URL), blob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st := stats.New()
	c, err := cache.Open(cache.Config{Dir: t.TempDir(), Capacity: 1 << 20, BlockSize: bs, Source: store, Stats: st, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const perSecond = 10
	h, err := dataserver.New(dataserver.Config{Cache: c, Ownership: &owners{notOwned: map[int64]bool{}}, Stats: st, Logger: slog.New(slog.DiscardHandler), StoreReadRate: perSecond})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	defer hs.Close()
	hc := hs.Client()
	start := time.Now()
	served, refused := 0, 0
	for range 500 {
		resp, err := hc.Get(hs.URL + "/v1/objects/obj?offset=0&length=10&fresh=1")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			served++
		case http.StatusTooManyRequests:
			refused++
		default:
			t.Fatalf("answer %d", resp.StatusCode)
		}
	}
	elapsed := time.Since(start)
	bound := int64(2*perSecond + perSecond*elapsed.Seconds() + 1)
	t.Logf("500 fresh=1 reads in %s: %d S3 HEADs (bound %d), %d served, %d refused", elapsed.Round(time.Millisecond), heads.Load(), bound, served, refused)
	if heads.Load() > bound || refused == 0 {
		t.Fatalf("500 fresh=1 reads cost %d S3 HEADs in %s, want at most %d", heads.Load(), elapsed, bound)
	}
}
