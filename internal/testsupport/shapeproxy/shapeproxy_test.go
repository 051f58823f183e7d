package shapeproxy_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/talonhq/talon/internal/blob"
	s3store "github.com/talonhq/talon/internal/blob/s3"
	"github.com/talonhq/talon/internal/testenv"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/shapeproxy"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// upstream starts an HTTP server on 127.0.0.21 with handler h.
func upstream(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	ln, err := net.Listen("tcp", shapeproxy.ListenAddr)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// client is an HTTP client of its own connections, closed at the end;
// with keepAlive false each request has a connection of its own.
func client(t *testing.T, keepAlive bool) *http.Client {
	t.Helper()
	tr := &http.Transport{DisableKeepAlives: !keepAlive}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: time.Minute}
}

func get(t *testing.T, hc *http.Client, url string) []byte {
	t.Helper()
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d, %v", url, resp.StatusCode, err)
	}
	return b
}

func TestShapeDefaults(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   shapeproxy.Shape
		want shapeproxy.Shape
		str  string
	}{
		{"zero takes the defaults", shapeproxy.Shape{}, shapeproxy.Shape{Latency: 30 * time.Millisecond, Bandwidth: 100_000_000, MaxConns: 256},
			"30 ms to first byte, 100 MB/s per connection, at most 256 connections"},
		{"set values stay", shapeproxy.Shape{Latency: time.Second, Bandwidth: 5e6, MaxConns: 3}, shapeproxy.Shape{Latency: time.Second, Bandwidth: 5e6, MaxConns: 3},
			"1000 ms to first byte, 5 MB/s per connection, at most 3 connections"},
		{"negative turns a part off", shapeproxy.Shape{Latency: -1, Bandwidth: -1, MaxConns: -1}, shapeproxy.Shape{Latency: -1, Bandwidth: -1, MaxConns: -1},
			"no added latency, unlimited bandwidth, no connection cap"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.in.WithDefaults(); got != tt.want {
				t.Fatalf("WithDefaults() = %+v, want %+v", got, tt.want)
			}
			if got := tt.in.String(); got != tt.str {
				t.Fatalf("String() = %q, want %q", got, tt.str)
			}
		})
	}
	if got := shapeproxy.DefaultShape(); got != (shapeproxy.Shape{}).WithDefaults() {
		t.Fatalf("DefaultShape() = %+v", got)
	}
}

// TestLatency: every request, each of several on one keep-alive
// connection, takes at least the latency, and reaches the upstream with
// the Host the client sent (what a signature covers).
func TestLatency(t *testing.T) {
	const latency = 150 * time.Millisecond
	var hosts sync.Map
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		hosts.Store(r.Host, true)
		io.WriteString(w, "ok")
	})
	p := shapeproxy.Start(t, up.URL, shapeproxy.Shape{Latency: latency, Bandwidth: -1})
	hc := client(t, true)
	for i := range 3 {
		start := time.Now()
		if b := get(t, hc, p.URL+"/x"); string(b) != "ok" {
			t.Fatalf("body %q", b)
		}
		if took := time.Since(start); took < latency {
			t.Fatalf("request %d took %v, less than the latency %v", i, took, latency)
		}
	}
	if st := p.Stats(); st.Requests != 3 || st.PeakConns != 1 {
		t.Fatalf("stats %+v: want 3 requests over 1 connection", st)
	}
	want := strings.TrimPrefix(p.URL, "http://")
	hosts.Range(func(k, _ any) bool {
		if k != want {
			t.Errorf("upstream saw Host %q, want the proxy's %q", k, want)
		}
		return true
	})
}

// TestBandwidth: a download and an upload of size bytes over one
// connection each take at least what the bandwidth allows, less the
// token bucket's first burst, and arrive whole.
func TestBandwidth(t *testing.T) {
	const size, bw = 1 << 20, 2_000_000
	body := bytes.Repeat([]byte("shape"), size/5+1)[:size]
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			n, _ := io.Copy(io.Discard, r.Body)
			io.WriteString(w, strconv.FormatInt(n, 10))
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(size))
		w.Write(body)
	})
	p := shapeproxy.Start(t, up.URL, shapeproxy.Shape{Latency: -1, Bandwidth: bw})
	// At most 10 ms of the rate passes at once (burstFor).
	least := time.Duration(size-bw/100) * time.Second / bw
	hc := client(t, true)
	start := time.Now()
	if b := get(t, hc, p.URL+"/down"); !bytes.Equal(b, body) {
		t.Fatalf("download: %d bytes, not the %d sent", len(b), size)
	}
	if took := time.Since(start); took < least {
		t.Fatalf("download of %d bytes at %d B/s took %v, less than %v", size, bw, took, least)
	}
	start = time.Now()
	req, err := http.NewRequest(http.MethodPut, p.URL+"/up", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(got) != strconv.Itoa(size) {
		t.Fatalf("upload: upstream read %s bytes, want %d", got, size)
	}
	if took := time.Since(start); took < least {
		t.Fatalf("upload of %d bytes at %d B/s took %v, less than %v", size, bw, took, least)
	}
}

// TestConnectionCap: with a cap of 2 and 5 clients on connections of
// their own, whose requests the upstream holds, never more than 2 reach
// it; once released, every one is served.
func TestConnectionCap(t *testing.T) {
	const limit, clients = 2, 5
	release := make(chan struct{})
	var inFlight, most atomic.Int64
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-release
		inFlight.Add(-1)
		io.WriteString(w, "ok")
	})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free) // before the upstream closes: it waits for its handlers
	p := shapeproxy.Start(t, up.URL, shapeproxy.Shape{Latency: -1, Bandwidth: -1, MaxConns: limit})
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for range clients {
		// A connection holds its slot until it closes: without
		// keep-alive each closes once answered.
		hc := client(t, false)
		wg.Go(func() {
			resp, err := hc.Get(p.URL + "/held")
			if err == nil {
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			errs <- err
		})
	}
	t.Cleanup(func() { free(); wg.Wait() })
	testsupport.WaitFor(t, 10*time.Second, "the first connections' requests at the upstream", func() bool { return inFlight.Load() >= limit })
	// Time for the other clients' requests to get through, if the cap
	// let them: a broken cap shows as more than limit at once.
	time.Sleep(300 * time.Millisecond)
	if m, st := most.Load(), p.Stats(); m != limit || st.PeakConns != limit {
		t.Fatalf("%d requests at the upstream at once over %d connections, want %d", m, st.PeakConns, limit)
	}
	free()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if st := p.Stats(); st.Requests != clients {
		t.Fatalf("%d requests served, want %d", st.Requests, clients)
	}
}

// TestS3ThroughProxy reads ranges of an object from a real S3 server
// (versitygw) through the proxy with the s3:// blob store: requests
// signed for the proxy's address verify at the server, and the bytes are
// the object's.
func TestS3ThroughProxy(t *testing.T) {
	testenv.SkipIfShort(t)
	srv := testenv.StartS3(t)
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	srv.CreateBucket(t, "shape")
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	srv.Put(t, "shape", "obj", data)
	p := shapeproxy.Start(t, srv.Endpoint, shapeproxy.Shape{})
	s, err := s3store.New(srv.URLVia(p.URL, "shape", ""), blob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, off := range []int64{0, 300_000, int64(len(data)) - 1000} {
		rc, err := s.ReadRange(ctx, "obj", off, 1000)
		if err != nil {
			t.Fatalf("read at %d through the proxy: %v", off, err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(b, data[off:off+1000]) {
			t.Fatalf("read at %d: %d bytes, %v; not the object's", off, len(b), err)
		}
	}
	if st := p.Stats(); st.Requests < 3 {
		t.Fatalf("%d requests through the proxy, want at least 3", st.Requests)
	}
}
