package datapath

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/datav1"
	"github.com/talonhq/talon/internal/testenv"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 9))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestS3BlobStore runs workers against a real S3 server (versitygw over a
// directory): cold reads checked against the store's SHA-256, hits, range
// reads across block boundaries, a missing object, a same-size rewrite, a
// store that is down (the read fails with the retryable backend error,
// the workers stay healthy and keep serving what they cache), a store
// that throttles (503 SlowDown: the worker backs off and retries), and a
// worker with a wrong secret (the read fails and no credential shows in
// its log, its metrics or get's errors).
func TestS3BlobStore(t *testing.T) {
	talontest.SkipShort(t)
	s3 := testenv.StartS3(t)
	s3.CreateBucket(t, "talon")
	big := randomBytes(5*talontest.BlockSize+17, 1)
	small := randomBytes(3000, 2)
	s3.Put(t, "talon", "data/big.bin", big)
	s3.Put(t, "talon", "data/dir/small.bin", small)
	blobURL := s3.URL("talon", "data") + "&max_attempts=2&request_timeout=5s"
	env := s3.Env()

	ctl := talontest.FreeAddr(t)
	coord := talontest.Start(t, "coordinator", talontest.CoordinatorArgs("coord", ctl, talontest.FreeAddr(t))...)
	testsupport.WaitFor(t, 20*time.Second, "coordinator ready", func() bool { return talontest.Ready(t, coord) })
	workers := map[string]*talontest.Proc{}
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("worker-%d", i)
		args := talontest.WorkerArgs(id, talontest.FreeAddr(t), talontest.FreeAddr(t), []string{ctl}, "/unused", t.TempDir())
		args[slices.Index(args, "--blob-store")+1] = blobURL
		workers[id] = talontest.StartWithEnv(t, id, env, args...)
	}
	testsupport.WaitFor(t, 30*time.Second, "three eligible workers", func() bool {
		cl, err := coord.API(t).Cluster(context.Background())
		return err == nil && cl.EligibleWorkers == 3
	})
	get := func(t *testing.T, object string, extra ...string) (talontest.Result, []byte) {
		t.Helper()
		out := filepath.Join(t.TempDir(), "out")
		res := talontest.RunTalon(t, env, append([]string{"get", object, "-o", out, "--coordinators", ctl, "--block-size", "1MiB", "--insecure-control-plane", "--timeout", "40s"}, extra...)...)
		got, _ := os.ReadFile(out)
		return res, got
	}
	usage := func(t *testing.T) (hits, misses uint64) {
		for id, w := range workers {
			st, err := w.API(t).Status(context.Background())
			if err != nil || st.Current == nil {
				t.Fatalf("status of %s: %v", id, err)
			}
			hits += st.Current.Counters.HitsTotal
			misses += st.Current.Counters.MissesTotal
		}
		return hits, misses
	}

	t.Run("cold read checked against the store's checksum", func(t *testing.T) {
		res, got := get(t, "big.bin", "--source", blobURL)
		if res.Code != 0 || !bytes.Equal(got, big) {
			t.Fatalf("get: exit %d, right bytes %t\n%s", res.Code, bytes.Equal(got, big), res.Stderr)
		}
		if !strings.Contains(res.Stderr, "matches the store's sha256 checksum") {
			t.Fatalf("get does not say it checked the store's checksum:\n%s", res.Stderr)
		}
		if _, misses := usage(t); misses == 0 {
			t.Fatal("a cold read counted no miss")
		}
	})
	t.Run("second read hits", func(t *testing.T) {
		h0, m0 := usage(t)
		res, got := get(t, "big.bin")
		if res.Code != 0 || !bytes.Equal(got, big) {
			t.Fatalf("get: exit %d\n%s", res.Code, res.Stderr)
		}
		h1, m1 := usage(t)
		if h1-h0 < 6 || m1 != m0 {
			t.Fatalf("second read: %d hits, %d misses; want every block a hit", h1-h0, m1-m0)
		}
		if !strings.Contains(res.Stderr, "no store checksum checked") {
			t.Fatalf("get without --source does not say what it did not verify:\n%s", res.Stderr)
		}
	})
	t.Run("range across a block boundary", func(t *testing.T) {
		ctx := context.Background()
		p0, err := coord.API(t).Placement(ctx, datav1.BlockKey("big.bin", 1), 2)
		if err != nil {
			t.Fatal(err)
		}
		p1, err := coord.API(t).Placement(ctx, datav1.BlockKey("big.bin", 2), 2)
		if err != nil {
			t.Fatal(err)
		}
		addr := ""
		for _, a := range p0.Owners {
			for _, b := range p1.Owners {
				if a.NodeID == b.NodeID {
					addr = a.Address
				}
			}
		}
		if addr == "" {
			t.Fatal("blocks 1 and 2 share no owner among 3 workers with 2 replicas")
		}
		off := int64(2*talontest.BlockSize - 1000)
		res, err := datav1.Fetch(ctx, &http.Client{Timeout: 30 * time.Second}, datav1.Request{Addr: addr, Object: "big.bin", Offset: off, Length: 5000})
		if err != nil || !bytes.Equal(res.Data, big[off:off+5000]) {
			t.Fatalf("range %d+5000 across blocks 1 and 2: %v", off, err)
		}
	})
	t.Run("missing object", func(t *testing.T) {
		res, _ := get(t, "no/such.bin")
		if res.Code == 0 || !strings.Contains(res.Stderr, "not there") {
			t.Fatalf("get of a missing object: exit %d\n%s", res.Code, res.Stderr)
		}
		res, _ = get(t, "no/such.bin", "--source", blobURL)
		if res.Code == 0 || !strings.Contains(res.Stderr, "object not found") {
			t.Fatalf("get --source of a missing object: exit %d\n%s", res.Code, res.Stderr)
		}
	})
	t.Run("same-size rewrite", func(t *testing.T) {
		changed := bytes.Clone(small)
		changed[100] ^= 0xff
		res, got := get(t, "dir/small.bin")
		if res.Code != 0 || !bytes.Equal(got, small) {
			t.Fatalf("get: exit %d\n%s", res.Code, res.Stderr)
		}
		s3.Put(t, "talon", "data/dir/small.bin", changed)
		res, got = get(t, "dir/small.bin")
		if res.Code != 0 || !bytes.Equal(got, changed) {
			t.Fatalf("get after a same-size rewrite: exit %d, new bytes %t\n%s", res.Code, bytes.Equal(got, changed), res.Stderr)
		}
		s3.Put(t, "talon", "data/dir/small.bin", small)
		res, got = get(t, "dir/small.bin", "--source", blobURL)
		if res.Code != 0 || !bytes.Equal(got, small) {
			t.Fatalf("get --source after a second rewrite: exit %d\n%s", res.Code, res.Stderr)
		}
	})
	t.Run("store down", func(t *testing.T) {
		s3.Put(t, "talon", "data/uncached.bin", small)
		s3.Stop()
		defer s3.Start()
		res, _ := get(t, "uncached.bin")
		if res.Code == 0 || !strings.Contains(res.Stderr, "blob store failed") {
			t.Fatalf("get with the store down: exit %d\n%s", res.Code, res.Stderr)
		}
		for id, w := range workers {
			if !talontest.Live(t, w) || !talontest.Ready(t, w) {
				t.Fatalf("%s is not live and ready with the store down", id)
			}
		}
		// What the workers cache stays readable.
		res, got := get(t, "big.bin")
		if res.Code != 0 || !bytes.Equal(got, big) {
			t.Fatalf("get of a cached object with the store down: exit %d\n%s", res.Code, res.Stderr)
		}
	})
	t.Run("throttled", func(t *testing.T) {
		// A proxy in front of the real server answers 503 SlowDown to two
		// requests of every three: a worker behind it backs off and
		// retries, and get succeeds.
		target, _ := url.Parse(s3.Endpoint)
		proxy := httputil.NewSingleHostReverseProxy(target)
		var seen, throttled atomic.Int64
		front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if seen.Add(1)%3 != 0 {
				throttled.Add(1)
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`)
				return
			}
			proxy.ServeHTTP(w, r)
		}))
		defer front.Close()
		throttledURL := "s3://talon/data?use_path_style=true&max_attempts=5&endpoint=" + url.QueryEscape(front.URL)
		ctl3 := talontest.FreeAddr(t)
		coord3 := talontest.Start(t, "coordinator-3", talontest.CoordinatorArgs("coord-3", ctl3, talontest.FreeAddr(t), "--placement-replicas", "1")...)
		testsupport.WaitFor(t, 20*time.Second, "coordinator-3 ready", func() bool { return talontest.Ready(t, coord3) })
		args := talontest.WorkerArgs("worker-slow", talontest.FreeAddr(t), talontest.FreeAddr(t), []string{ctl3}, "/unused", t.TempDir(), "--placement-replicas", "1")
		args[slices.Index(args, "--blob-store")+1] = throttledURL
		talontest.StartWithEnv(t, "worker-slow", env, args...)
		testsupport.WaitFor(t, 30*time.Second, "worker-slow eligible", func() bool {
			cl, err := coord3.API(t).Cluster(context.Background())
			return err == nil && cl.EligibleWorkers == 1
		})
		out := filepath.Join(t.TempDir(), "out")
		res := talontest.RunTalon(t, env, "get", "dir/small.bin", "-o", out, "--coordinators", ctl3, "--block-size", "1MiB", "--insecure-control-plane",
			"--replicas", "1", "--verify=false", "--timeout", "40s")
		got, _ := os.ReadFile(out)
		if res.Code != 0 || !bytes.Equal(got, small) {
			t.Fatalf("get through a throttling store: exit %d\n%s", res.Code, res.Stderr)
		}
		if throttled.Load() < 2 {
			t.Fatalf("only %d throttled answers: the test proves nothing", throttled.Load())
		}
	})
	t.Run("wrong credentials", func(t *testing.T) {
		const wrongSecret = "not-the-secret-Kq29xw"
		bad := slices.Clone(env)
		for i, kv := range bad {
			if strings.HasPrefix(kv, "AWS_SECRET_ACCESS_KEY=") {
				bad[i] = "AWS_SECRET_ACCESS_KEY=" + wrongSecret
			}
		}
		ctl2 := talontest.FreeAddr(t)
		coord2 := talontest.Start(t, "coordinator-2", talontest.CoordinatorArgs("coord-2", ctl2, talontest.FreeAddr(t), "--placement-replicas", "1")...)
		testsupport.WaitFor(t, 20*time.Second, "coordinator-2 ready", func() bool { return talontest.Ready(t, coord2) })
		args := talontest.WorkerArgs("worker-bad", talontest.FreeAddr(t), talontest.FreeAddr(t), []string{ctl2}, "/unused", t.TempDir(), "--placement-replicas", "1")
		args[slices.Index(args, "--blob-store")+1] = blobURL
		w := talontest.StartWithEnv(t, "worker-bad", bad, args...)
		testsupport.WaitFor(t, 30*time.Second, "worker-bad eligible", func() bool {
			cl, err := coord2.API(t).Cluster(context.Background())
			return err == nil && cl.EligibleWorkers == 1
		})
		out := filepath.Join(t.TempDir(), "out")
		res := talontest.RunTalon(t, bad, "get", "big.bin", "-o", out, "--coordinators", ctl2, "--block-size", "1MiB", "--insecure-control-plane",
			"--replicas", "1", "--verify=false", "--timeout", "20s")
		if res.Code == 0 {
			t.Fatal("get through a worker with a wrong secret succeeded")
		}
		res2 := talontest.RunTalon(t, bad, "get", "big.bin", "-o", out, "--coordinators", ctl2, "--block-size", "1MiB", "--insecure-control-plane",
			"--replicas", "1", "--verify=false", "--source", blobURL, "--timeout", "20s")
		if res2.Code == 0 || !strings.Contains(res2.Stderr, "403") {
			t.Fatalf("get --source with a wrong secret: exit %d\n%s", res2.Code, res2.Stderr)
		}
		cfg := talontest.RunTalon(t, bad, "config", "print", "worker", "--blob-store", blobURL)
		logs := w.Out.String()
		if !strings.Contains(logs, "403") {
			t.Fatalf("the worker's log does not show the refusal:\n%s", talontest.Tail(logs, 3000))
		}
		for what, text := range map[string]string{"worker log": logs, "get stderr": res.Stderr + res2.Stderr, "metrics": talontest.ScrapeText(t, w), "config print": cfg.Stdout + cfg.Stderr} {
			for _, secret := range []string{wrongSecret, s3.SecretKey, s3.AccessKey} {
				if strings.Contains(text, secret) {
					t.Errorf("%s shows a credential (%q)", what, secret[:6])
				}
			}
		}
	})
}
