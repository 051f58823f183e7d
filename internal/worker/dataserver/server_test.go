package dataserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/talonhq/talon/internal/blob"
	"github.com/talonhq/talon/internal/datav1"
	"github.com/talonhq/talon/internal/worker/cache"
	"github.com/talonhq/talon/internal/worker/dataserver"
	"github.com/talonhq/talon/internal/worker/stats"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const bs = 4096

// owners is a fake Ownership: every block is owned except those listed.
type owners struct {
	mu       sync.Mutex
	notOwned map[int64]bool
	version  uint64
	calls    atomic.Int64
}

func (o *owners) Owns(object string, block int64) (bool, uint64) {
	o.calls.Add(1)
	o.mu.Lock()
	defer o.mu.Unlock()
	return !o.notOwned[block], o.version
}

// failingStore fails reads of ranges at or past failFrom.
type failingStore struct {
	blob.Store
	reads    atomic.Int64
	stats    atomic.Int64 // Stat calls: the store's HEADs
	failFrom atomic.Int64
	// breakAfter, when positive, makes every read's body fail after that
	// many bytes (a connection reset mid-body).
	breakAfter atomic.Int64
	// holdFrom, when not negative, holds reads of ranges at or past it
	// until hold is closed.
	holdFrom atomic.Int64
	hold     chan struct{}
}

// Stat and ReadVersion pass the file store's versions through.
func (s *failingStore) Stat(ctx context.Context, object string) (blob.Info, error) {
	s.stats.Add(1)
	return blob.Stat(ctx, s.Store, object)
}

func (s *failingStore) ReadVersion(ctx context.Context, object, version string, off, n int64) (io.ReadCloser, error) {
	s.reads.Add(1)
	if hf := s.holdFrom.Load(); hf >= 0 && off >= hf {
		select {
		case <-s.hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if ff := s.failFrom.Load(); ff >= 0 && off >= ff {
		return nil, fmt.Errorf("%w: injected failure", blob.ErrBackend)
	}
	rc, err := blob.ReadVersion(ctx, s.Store, object, version, off, n)
	if k := s.breakAfter.Load(); err == nil && k > 0 {
		return breakingReader{io.LimitReader(rc, k), rc}, nil
	}
	return rc, err
}

// breakingReader ends with an error where its limit cuts the body.
type breakingReader struct {
	r io.Reader
	io.Closer
}

func (b breakingReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		err = fmt.Errorf("%w: connection reset mid-body", blob.ErrBackend)
	}
	return n, err
}

func (s *failingStore) ReadRange(ctx context.Context, object string, off, n int64) (io.ReadCloser, error) {
	return s.ReadVersion(ctx, object, "", off, n)
}

type env struct {
	blobDir  string
	src      *failingStore
	cache    *cache.Cache
	st       *stats.Stats
	own      *owners
	ready    atomic.Bool
	srv      *httptest.Server
	addr     string
	client   *http.Client
	observed sync.Map     // outcome -> count
	opened   atomic.Int64 // connections the server accepted
}

func newEnv(t testing.TB, blockSize, capacity int64) *env {
	t.Helper()
	return newEnvOn(t, blockSize, capacity, nil)
}

// newEnvOn is newEnv with the server on ln, when not nil.
func newEnvOn(t testing.TB, blockSize, capacity int64, ln net.Listener) *env {
	t.Helper()
	return newEnvWith(t, blockSize, capacity, ln, func(*dataserver.Config) {})
}

// newEnvWith is newEnvOn with the data server's configuration changed by
// mutate.
func newEnvWith(t testing.TB, blockSize, capacity int64, ln net.Listener, mutate func(*dataserver.Config)) *env {
	t.Helper()
	e := &env{blobDir: t.TempDir(), st: stats.New(), own: &owners{notOwned: map[int64]bool{}, version: 0x0123456789abcdef}}
	fs, err := blob.NewFile(e.blobDir)
	if err != nil {
		t.Fatal(err)
	}
	e.src = &failingStore{Store: fs, hold: make(chan struct{})}
	e.src.failFrom.Store(-1)
	e.src.holdFrom.Store(-1)
	log := slog.New(slog.DiscardHandler)
	e.cache, err = cache.Open(cache.Config{Dir: t.TempDir(), Capacity: capacity, BlockSize: blockSize, Source: e.src, Stats: e.st, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.cache.Close() })
	e.ready.Store(true)
	cfg := dataserver.Config{
		Cache: e.cache, Ownership: e.own, Stats: e.st, Logger: log, Ready: e.ready.Load,
		Observe: func(op, outcome string, _ time.Duration) {
			v, _ := e.observed.LoadOrStore(op+"/"+outcome, new(atomic.Int64))
			v.(*atomic.Int64).Add(1)
		},
	}
	mutate(&cfg)
	h, err := dataserver.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = httptest.NewUnstartedServer(h)
	if ln != nil {
		e.srv.Listener.Close()
		e.srv.Listener = ln
	}
	e.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			e.opened.Add(1)
		}
	}
	e.srv.Start()
	t.Cleanup(e.srv.Close)
	e.addr = strings.TrimPrefix(e.srv.URL, "http://")
	e.client = e.srv.Client()
	return e
}

// settle waits until the handler has finished n requests: a client can
// have the whole body before the handler records it.
func (e *env) settle(t testing.TB, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var total int64
		e.observed.Range(func(_, v any) bool { total += v.(*atomic.Int64).Load(); return true })
		if total >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d requests finished in 10s", total, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func (e *env) observedCount(key string) int64 {
	if v, ok := e.observed.Load(key); ok {
		return v.(*atomic.Int64).Load()
	}
	return 0
}

func (e *env) put(t testing.TB, key string, data []byte) {
	t.Helper()
	p := filepath.Join(e.blobDir, filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func pattern(seed, n int) []byte {
	b := make([]byte, n)
	x := uint32(seed*2654435761 + 7)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

func (e *env) fetch(object string, off, n int64) (*datav1.Result, error) {
	return datav1.Fetch(context.Background(), e.client, datav1.Request{
		Addr: e.addr, Object: object, Offset: off, Length: n, Replicas: 2, Version: e.own.version,
	})
}

func TestServeRanges(t *testing.T) {
	e := newEnv(t, bs, 1<<20)
	const size = 3*bs + 100
	data := pattern(1, size)
	e.put(t, "dir/obj name#1", data)
	tests := []struct {
		name   string
		off, n int64
	}{
		{"first block", 0, bs},
		{"inside a block", 10, 100},
		{"across one boundary", bs - 10, 20},
		{"across two boundaries", bs - 1, bs + 2},
		{"whole object", 0, size},
		{"short last block", 3 * bs, bs},
		{"last byte", size - 1, 1},
		{"cut at the end", 2*bs + 50, 10 * bs},
	}
	var served int64
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := e.fetch("dir/obj name#1", tt.off, tt.n)
			if err != nil {
				t.Fatal(err)
			}
			end := min(tt.off+tt.n, size)
			if !bytes.Equal(res.Data, data[tt.off:end]) || res.N != end-tt.off {
				t.Fatalf("got %d bytes, want bytes %d..%d of the object", len(res.Data), tt.off, end)
			}
			if res.ObjectSize != size || res.Version != e.own.version {
				t.Fatalf("object size %d version %x, want %d and %x", res.ObjectSize, res.Version, size, e.own.version)
			}
			served += res.N
		})
	}
	e.settle(t, int64(len(tests)))
	waitLoaded(t, e.st)
	capy, c := e.st.Status()
	if c.BytesServedTotal != uint64(served) || c.RequestsTotal != uint64(len(tests)) || c.ErrorsTotal != 0 {
		t.Fatalf("stats %+v; want %d bytes served in %d requests without errors", c, served, len(tests))
	}
	// Four blocks, each loaded once, by a miss or by read-ahead. A request
	// that comes while a block is still being committed (a miss streams:
	// the client can finish first) waits for that load and counts a miss
	// too, but never fetches.
	if c.MissesTotal+e.st.Prefetches() < 4 || e.src.reads.Load() != 4 || capy.Blocks != 4 {
		t.Fatalf("stats %+v %+v, backend reads %d; want at least 4 misses and exactly 4 reads", c, capy, e.src.reads.Load())
	}
	if c.HitsTotal+c.MissesTotal <= 4 {
		t.Fatal("no block was read twice")
	}
	if n := e.observedCount("get/ok"); n != int64(len(tests)) {
		t.Fatalf("Observe saw %d ok requests, want %d", n, len(tests))
	}
}

func TestSecondReadIsHit(t *testing.T) {
	e := newEnv(t, bs, 1<<20)
	data := pattern(2, bs)
	e.put(t, "obj", data)
	for i := range 2 {
		res, err := e.fetch("obj", 0, bs)
		if err != nil || !bytes.Equal(res.Data, data) {
			t.Fatalf("read %d: %v", i, err)
		}
		// A miss streams: the client can have the block before the
		// load has committed it (fsync, rename). Wait for the commit.
		e.settle(t, int64(i+1))
		waitLoaded(t, e.st)
	}
	if _, c := e.st.Status(); c.HitsTotal != 1 || c.MissesTotal != 1 || e.src.reads.Load() != 1 {
		t.Fatalf("after two reads: %+v, %d backend reads; want 1 miss, 1 hit, 1 read", c, e.src.reads.Load())
	}
}

func TestDefaultsAndHead(t *testing.T) {
	e := newEnv(t, bs, 1<<20)
	data := pattern(3, 2*bs+10)
	e.put(t, "obj", data)
	e.put(t, "empty", nil)
	get := func(method, path string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, e.srv.URL+path, nil)
		resp, err := e.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	t.Run("no length: to the end of the block", func(t *testing.T) {
		resp := get("GET", "/v1/objects/obj?offset=100")
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || !bytes.Equal(body, data[100:bs]) || resp.ContentLength != bs-100 {
			t.Fatalf("status %d, %d bytes", resp.StatusCode, len(body))
		}
		if resp.Header.Get(datav1.VersionHeader) != "0123456789abcdef" || resp.Header.Get(datav1.ObjectSizeHeader) != "8202" {
			t.Fatalf("headers %v", resp.Header)
		}
	})
	t.Run("no parameters: block 0", func(t *testing.T) {
		resp := get("GET", "/v1/objects/obj")
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || !bytes.Equal(body, data[:bs]) {
			t.Fatalf("status %d, %d bytes", resp.StatusCode, len(body))
		}
	})
	t.Run("head loads nothing", func(t *testing.T) {
		waitLoaded(t, e.st) // the GETs' read-ahead
		reads := e.src.reads.Load()
		resp := get("HEAD", "/v1/objects/obj?offset=2&length=9000")
		if resp.StatusCode != 200 || resp.ContentLength != 2*bs+10-2 || resp.Header.Get(datav1.ObjectSizeHeader) != "8202" {
			t.Fatalf("HEAD: status %d length %d headers %v", resp.StatusCode, resp.ContentLength, resp.Header)
		}
		if e.src.reads.Load() != reads {
			t.Fatal("HEAD loaded blocks")
		}
	})
	t.Run("empty object", func(t *testing.T) {
		res, err := e.fetch("empty", 0, bs)
		if err != nil || len(res.Data) != 0 || res.ObjectSize != 0 {
			t.Fatalf("Fetch(empty) = %+v, %v", res, err)
		}
	})
}

// apiErr reads an error answer's JSON.
func apiErr(t *testing.T, resp *http.Response) (code, msg, version string) {
	t.Helper()
	var body struct {
		Error struct {
			Code, Message, PlacementVersion string
		}
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("error answer has Content-Type %q", ct)
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return body.Error.Code, body.Error.Message, body.Error.PlacementVersion
}

func TestErrors(t *testing.T) {
	e := newEnv(t, bs, 1<<20)
	e.put(t, "obj", pattern(4, 2*bs))
	tests := []struct {
		name    string
		method  string
		path    string
		header  map[string]string
		status  int
		code    string
		message string // substring
	}{
		{"missing object", "GET", "/v1/objects/nope?offset=0&length=10", nil, 404, "not_found", `"nope"`},
		{"unknown path", "GET", "/v2/x", nil, 404, "unknown_path", "/v1/objects/"},
		{"offset at end", "GET", "/v1/objects/obj?offset=8192&length=1", nil, 416, "range_not_satisfiable", "offset 8192"},
		{"offset past end", "GET", "/v1/objects/obj?offset=9000&length=1", nil, 416, "range_not_satisfiable", "8192 bytes"},
		{"dot-dot key", "GET", "/v1/objects/a/%2E%2E/b", nil, 400, "invalid_key", `".." segment`},
		{"empty segment", "GET", "/v1/objects/a//b", nil, 400, "invalid_key", "empty segment"},
		{"empty key", "GET", "/v1/objects/", nil, 400, "invalid_key", "must not be empty"},
		{"NUL in key", "GET", "/v1/objects/a%00b", nil, 400, "invalid_key", "NUL"},
		{"negative offset", "GET", "/v1/objects/obj?offset=-1", nil, 400, "invalid_parameter", "offset"},
		{"text offset", "GET", "/v1/objects/obj?offset=abc", nil, 400, "invalid_parameter", `offset="abc"`},
		{"zero length", "GET", "/v1/objects/obj?length=0", nil, 400, "invalid_parameter", "length"},
		{"length over the limit", "GET", "/v1/objects/obj?length=65537", nil, 400, "invalid_parameter", "from 1 to 65536"},
		{"twice", "GET", "/v1/objects/obj?offset=1&offset=2", nil, 400, "invalid_parameter", "given 2 times"},
		{"zero replicas", "GET", "/v1/objects/obj?replicas=0", nil, 400, "invalid_parameter", "replicas"},
		{"too many replicas", "GET", "/v1/objects/obj?replicas=17", nil, 400, "invalid_parameter", "from 1 to 16"},
		{"bad version", "GET", "/v1/objects/obj", map[string]string{datav1.VersionHeader: "0x12"}, 400, "invalid_parameter", datav1.VersionHeader},
		{"range header", "GET", "/v1/objects/obj", map[string]string{"Range": "bytes=0-1"}, 400, "invalid_parameter", "Range"},
		{"post", "POST", "/v1/objects/obj", nil, 405, "method_not_allowed", "POST"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, e.srv.URL+tt.path, nil)
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			resp, err := e.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.status)
			}
			code, msg, _ := apiErr(t, resp)
			if code != tt.code || !strings.Contains(msg, tt.message) {
				t.Fatalf("error %s %q, want %s containing %q", code, msg, tt.code, tt.message)
			}
			if tt.status == 416 && resp.Header.Get("Content-Range") != "bytes */8192" {
				t.Fatalf("416 without Content-Range: %v", resp.Header)
			}
		})
	}
	e.settle(t, int64(len(tests)))
	if _, c := e.st.Status(); c.ErrorsTotal != uint64(len(tests)) || c.BackendErrorsTotal != 0 {
		t.Fatalf("stats %+v: want %d errors, no backend errors", c, len(tests))
	}
	if n := e.observedCount("get/invalid_parameter"); n != 9 {
		t.Fatalf("Observe saw %d invalid_parameter outcomes, want 9", n)
	}
}

func TestWrongOwner(t *testing.T) {
	// No read-ahead: block 0's read would start loading block 2 (owned)
	// in the background, a store read this test would count as a
	// misdirected one whenever it landed after the count was taken.
	e := newEnvWith(t, bs, 1<<20, nil, func(c *dataserver.Config) { c.ReadAhead = -1 })
	e.put(t, "obj", pattern(5, 3*bs))
	e.own.mu.Lock()
	e.own.notOwned[1] = true
	e.own.mu.Unlock()

	// Block 0 alone is served.
	if _, err := e.fetch("obj", 0, bs); err != nil {
		t.Fatal(err)
	}
	reads := e.src.reads.Load()
	sizes := func() uint64 { _, c := e.st.Status(); return c.BackendFetchesTotal }
	fetches := sizes()
	for _, r := range []struct{ off, n int64 }{{bs, bs}, {bs - 1, 2}, {0, 3 * bs}, {2*bs - 1, 1}} {
		_, err := e.fetch("obj", r.off, r.n)
		var de *datav1.Error
		if !errors.Is(err, datav1.ErrWrongOwner) || !errors.As(err, &de) {
			t.Fatalf("range %d+%d: %v, want ErrWrongOwner", r.off, r.n, err)
		}
		if de.Status != 421 || de.Code != "wrong_owner" || !de.HasVersion || de.Version != e.own.version {
			t.Fatalf("wrong owner answer %+v", de)
		}
		if !strings.Contains(de.Message, `"obj#1"`) {
			t.Fatalf("message %q does not name the placement key", de.Message)
		}
	}
	if e.src.reads.Load() != reads || sizes() != fetches {
		t.Fatal("a misdirected request reached the blob store")
	}
	// The raw answer carries the version in the header and the body.
	resp, err := e.client.Get(e.srv.URL + "/v1/objects/obj?offset=4096")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	code, _, version := apiErr(t, resp)
	if resp.StatusCode != http.StatusMisdirectedRequest || code != "wrong_owner" || version != "0123456789abcdef" ||
		resp.Header.Get(datav1.VersionHeader) != "0123456789abcdef" {
		t.Fatalf("421 answer: status %d code %q body version %q headers %v", resp.StatusCode, code, version, resp.Header)
	}
}

func TestUnavailableAndBackendErrors(t *testing.T) {
	e := newEnv(t, bs, 1<<20)
	data := pattern(6, 2*bs)
	e.put(t, "obj", data)

	e.ready.Store(false)
	_, err := e.fetch("obj", 0, 10)
	var de *datav1.Error
	if !errors.Is(err, datav1.ErrUnavailable) || !errors.As(err, &de) || de.Code != "not_ready" {
		t.Fatalf("not ready: %v, want ErrUnavailable not_ready", err)
	}
	e.ready.Store(true)

	// Block 1 fails in the blob store: a range over both blocks gets 502
	// before any byte is sent, and nothing is cached for block 1.
	e.src.failFrom.Store(bs)
	if _, err := e.fetch("obj", 0, 2*bs); !errors.Is(err, datav1.ErrBackend) {
		t.Fatalf("failing backend: %v, want ErrBackend", err)
	}
	e.settle(t, 2)
	if _, c := e.st.Status(); c.BackendErrorsTotal != 1 || c.BytesServedTotal != 0 {
		t.Fatalf("stats %+v: want 1 backend error and nothing served", c)
	}
	e.src.failFrom.Store(-1)
	res, err := e.fetch("obj", 0, 2*bs)
	if err != nil || !bytes.Equal(res.Data, data) {
		t.Fatalf("after the backend recovered: %v", err)
	}

	if _, err := e.fetch("missing", 0, 1); !errors.Is(err, datav1.ErrNotFound) {
		t.Fatalf("missing: %v, want ErrNotFound", err)
	}
	if _, err := e.fetch("obj", 2*bs, 1); !errors.Is(err, datav1.ErrRangeNotSatisfiable) {
		t.Fatalf("past the end: %v, want ErrRangeNotSatisfiable", err)
	}

	e.cache.Close()
	if _, err := e.fetch("obj", 0, 1); !errors.Is(err, datav1.ErrUnavailable) {
		t.Fatalf("closed cache: %v, want ErrUnavailable", err)
	}
}

func TestBlockKey(t *testing.T) {
	tests := []struct {
		object string
		index  int64
		want   string
	}{
		{"a", 0, "a#0"},
		{"dir/file.bin", 12, "dir/file.bin#12"},
		{"a#1", 2, "a#1#2"},
		{"a", 12, "a#12"},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		got := datav1.BlockKey(tt.object, tt.index)
		if got != tt.want {
			t.Errorf("BlockKey(%q, %d) = %q, want %q", tt.object, tt.index, got, tt.want)
		}
		if seen[got] {
			t.Errorf("BlockKey(%q, %d) = %q collides", tt.object, tt.index, got)
		}
		seen[got] = true
	}
	if k := datav1.BlockKey(strings.Repeat("k", blob.MaxKeyBytes), 1<<62); len(k) > 1024 {
		t.Fatalf("the longest block key is %d bytes, over the protocol's 1024", len(k))
	}
}

// TestErrorBodiesHideInternals: a blob-store failure whose text names a
// file and an OS error reaches the client as a generic message (the old
// body echoed it), and client-caused errors (a bad name, a missing object,
// a range past the end) never count as backend errors, so they never mark
// the worker degraded.
func TestErrorBodiesHideInternals(t *testing.T) {
	e := newEnv(t, bs, 1<<20)
	e.put(t, "obj", pattern(9, bs))
	secret := filepath.Join(e.blobDir, "obj")
	e.src.Store = pathLeakingStore{e.src.Store, secret}
	_, err := e.fetch("obj", 0, 10)
	var de *datav1.Error
	if !errors.As(err, &de) || de.Code != datav1.CodeBackend {
		t.Fatalf("failing blob store: %v", err)
	}
	if strings.Contains(de.Message, secret) || strings.Contains(de.Message, "permission denied") {
		t.Fatalf("error body leaks internals: %q", de.Message)
	}
	e.settle(t, 1)
	_, before := e.st.Status()
	for _, bad := range []struct{ key string }{{"missing"}, {"../etc/passwd"}, {"a//b"}} {
		_, _ = datav1.Fetch(context.Background(), e.client, datav1.Request{Addr: e.addr, Object: bad.key, Offset: 0, Length: 1})
		// an invalid key may be refused by the client before it is sent
		resp, err := e.client.Get("http://" + e.addr + datav1.PathPrefix + bad.key + "?offset=0&length=1")
		if err == nil {
			resp.Body.Close()
		}
	}
	_, _ = e.fetch("obj", 10*bs, 1) // past the end
	time.Sleep(50 * time.Millisecond)
	if _, after := e.st.Status(); after.BackendErrorsTotal != before.BackendErrorsTotal {
		t.Fatalf("client-caused errors counted as backend errors: %d -> %d", before.BackendErrorsTotal, after.BackendErrorsTotal)
	}
}

// pathLeakingStore fails every read with an error naming a file, as the
// file blob store does when the OS refuses it.
type pathLeakingStore struct {
	blob.Store
	path string
}

func (s pathLeakingStore) ReadRange(context.Context, string, int64, int64) (io.ReadCloser, error) {
	return nil, fmt.Errorf("%w: open %s: permission denied", blob.ErrBackend, s.path)
}

// plainWriter has only Write, so FetchTo copies through its own buffer,
// as it does for most writers.
type plainWriter struct{ b *bytes.Buffer }

func (w plainWriter) Write(p []byte) (int, error) { return w.b.Write(p) }

// TestConcurrentReadsOfOneBlock: many clients reading the same resident
// block, and ranges spanning it and its neighbours, at once: each gets
// exactly its bytes (every response is sent with sendfile from a block
// file, each request with descriptors of its own).
func TestConcurrentReadsOfOneBlock(t *testing.T) {
	const blockSize = 64 << 10
	e := newEnv(t, blockSize, 1<<20)
	const size = 4*blockSize + 123
	data := pattern(5, size)
	e.put(t, "hot", data)
	ranges := [][2]int64{
		{blockSize, blockSize},           // block 1 whole
		{blockSize + 100, 1000},          // inside block 1
		{blockSize - 7, blockSize + 14},  // across blocks 0, 1 and 2
		{0, size},                        // the whole object, five blocks
		{2*blockSize - 1, 2 * blockSize}, // blocks 1 to 3
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 16 {
		wg.Go(func() {
			for i := range 20 {
				r := ranges[(g+i)%len(ranges)]
				var buf bytes.Buffer
				req := datav1.Request{Addr: e.addr, Object: "hot", Offset: r[0], Length: r[1], Version: e.own.version}
				var res *datav1.Result
				var err error
				if g%2 == 0 {
					res, err = datav1.Fetch(context.Background(), e.client, req)
				} else {
					res, err = datav1.FetchTo(context.Background(), e.client, req, plainWriter{&buf})
				}
				got := buf.Bytes()
				if err == nil && g%2 == 0 {
					got = res.Data
				}
				end := min(r[0]+r[1], size)
				if err != nil || res.N != end-r[0] || !bytes.Equal(got, data[r[0]:end]) {
					errs <- fmt.Errorf("client %d read %d, range %d+%d: %d bytes, error %v, or wrong bytes", g, i, r[0], r[1], len(got), err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestKeepAlive: a client reading block after block, single blocks and
// multi-block ranges, hits and misses, and an error answer, does it over
// one connection.
func TestKeepAlive(t *testing.T) {
	e := newEnv(t, bs, 1<<20)
	const size = 6*bs + 5
	data := pattern(6, size)
	e.put(t, "obj", data)
	for round := range 2 { // misses, then hits
		for off := int64(0); off < size; off += bs {
			if res, err := e.fetch("obj", off, bs); err != nil || !bytes.Equal(res.Data, data[off:min(off+bs, size)]) {
				t.Fatalf("round %d, block at %d: %v", round, off, err)
			}
		}
		var buf bytes.Buffer
		req := datav1.Request{Addr: e.addr, Object: "obj", Offset: bs / 2, Length: 4 * bs, Version: e.own.version}
		if _, err := datav1.FetchTo(context.Background(), e.client, req, plainWriter{&buf}); err != nil || !bytes.Equal(buf.Bytes(), data[bs/2:bs/2+4*bs]) {
			t.Fatalf("round %d, multi-block range: %v", round, err)
		}
		if _, err := e.fetch("missing", 0, bs); !errors.Is(err, datav1.ErrNotFound) {
			t.Fatalf("round %d, missing object: %v", round, err)
		}
	}
	if n := e.opened.Load(); n != 1 {
		t.Fatalf("the reads opened %d connections, want 1 (keep-alive)", n)
	}
}

// countingListener hands out connections that count the bytes they send
// through ReadFrom (sendfile, for a file) and through Write.
type countingListener struct {
	net.Listener
	viaReadFrom, viaWrite atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{TCPConn: c.(*net.TCPConn), l: l}, nil
}

type countingConn struct {
	*net.TCPConn
	l *countingListener
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.TCPConn.Write(p)
	c.l.viaWrite.Add(int64(n))
	return n, err
}

func (c *countingConn) ReadFrom(r io.Reader) (int64, error) {
	n, err := c.TCPConn.ReadFrom(r)
	c.l.viaReadFrom.Add(n)
	return n, err
}

// TestHitBodyAllThroughReadFrom checks that a hit's body goes to the
// connection's ReadFrom whole, which sends a block file with sendfile(2):
// none of it is copied through user space first (net/http copies 512
// bytes before its ReadFrom unless the header was flushed).
func TestHitBodyAllThroughReadFrom(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.13:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &countingListener{Listener: raw}
	e := newEnvOn(t, bs, 16*bs, ln)
	data := pattern(3, 2*bs+100)
	e.put(t, "obj", data)
	requests := int64(0)
	fetch := func(off, n int64) {
		t.Helper()
		requests++
		// The counters move when the handler has returned, which can be
		// after the client has the body.
		defer e.settle(t, requests)
		var buf bytes.Buffer
		res, err := datav1.FetchTo(context.Background(), e.client, datav1.Request{Addr: e.addr, Object: "obj", Offset: off, Length: n, Version: e.own.version}, &buf)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), data[off:off+res.N]) || res.N != n {
			t.Fatalf("fetch %d+%d: got %d bytes, not the object's", off, n, res.N)
		}
	}
	for i := range int64(3) {
		fetch(i*bs, 1) // misses: load the blocks
	}
	for _, r := range []struct{ off, n int64 }{{0, bs}, {100, bs - 100}, {bs, bs}, {2 * bs, 100}, {bs - 10, 20}} {
		before, wrote := ln.viaReadFrom.Load(), ln.viaWrite.Load()
		fetch(r.off, r.n)
		if got := ln.viaReadFrom.Load() - before; got != r.n {
			t.Errorf("hit %d+%d: %d body bytes through ReadFrom (and %d through Write), want all %d", r.off, r.n, got, ln.viaWrite.Load()-wrote, r.n)
		}
	}
}

// TestMidStreamFailure: a miss streams the store's bytes as they arrive;
// when the store fails mid-body the client gets an error, never a short
// body taken for the whole range, and nothing partial is cached.
func TestMidStreamFailure(t *testing.T) {
	e := newEnv(t, 4<<20, 64<<20)
	data := pattern(9, 4<<20)
	e.put(t, "obj", data)
	e.src.breakAfter.Store(3 << 20)
	if res, err := e.fetch("obj", 0, 4<<20); err == nil {
		t.Fatalf("a read whose store failed after 3 of 4 MiB succeeded with %d bytes", len(res.Data))
	}
	e.settle(t, 1)
	e.src.breakAfter.Store(0)
	reads := e.src.reads.Load()
	res, err := e.fetch("obj", 0, 4<<20)
	if err != nil || !bytes.Equal(res.Data, data) {
		t.Fatalf("after the store recovered: %v", err)
	}
	if e.src.reads.Load() != reads+1 {
		t.Fatalf("%d store reads after the failure, want 1: the failed load must not be cached", e.src.reads.Load()-reads)
	}
}

// waitLoaded waits until no block load is in flight and one is resident.
func waitLoaded(t *testing.T, st *stats.Stats) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, _ := st.Status()
		if c.InflightLoads == 0 && c.Blocks > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("loads still in flight after 30s: %+v", c)
		}
		time.Sleep(time.Millisecond)
	}
}
