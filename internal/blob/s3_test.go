package blob_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/blob"
	"github.com/talonhq/talon/internal/blob/s3"
	"github.com/talonhq/talon/internal/testenv"
)

func TestS3URL(t *testing.T) {
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	tests := []struct {
		url, want string
	}{
		{"s3://", "no bucket"},
		{"s3://user:pw@bucket/p", "must not carry credentials"},
		{"s3://b/p?regoin=x", `unknown parameter "regoin"`},
		{"s3://b/p?region=a&region=b", "parameter region is given 2 times"},
		{"s3://b/p?use_path_style=maybe", `use_path_style="maybe": must be true or false`},
		{"s3://b/p?endpoint=ftp://x", `endpoint="ftp://x": must be an http:// or https:// URL`},
		{"s3://b/p?endpoint=http://u:hunter2@x", `endpoint="http://u:xxxxx@x"`},
		{"s3://b/p?request_timeout=1ms", `request_timeout="1ms": must be a duration from 100ms to 1h`},
		{"s3://b/p?max_attempts=0", `max_attempts="0": must be an integer from 1 to 20`},
		{"s3://b/p?ca_file=/nonexistent", `ca_file="/nonexistent"`},
		{"s3://b/a/../p", `has a ".." segment`},
	}
	for _, tt := range tests {
		_, err := open(tt.url, blob.Options{})
		if !errors.Is(err, blob.ErrInvalidURL) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Open(%q) = %v, want ErrInvalidURL containing %q", tt.url, err, tt.want)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Open(%q) error shows the password: %v", tt.url, err)
		}
	}
	s, err := open("s3://bucket/some/prefix/?region=eu-west-1&use_path_style=true&endpoint=http://127.0.0.20:9", blob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.(*s3.Store).String(); got != "s3://bucket/some/prefix/" {
		t.Fatalf("String = %q", got)
	}
}

// s3Setup starts a real S3 server with bucket "talon" and returns it and
// the credential environment set for this test.
func s3Setup(t *testing.T) *testenv.S3 {
	t.Helper()
	testenv.SkipIfShort(t)
	srv := testenv.StartS3(t)
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	srv.CreateBucket(t, "talon")
	return srv
}

func readS3(t *testing.T, s blob.Store, key string, off, n int64) ([]byte, error) {
	t.Helper()
	rc, err := s.ReadRange(context.Background(), key, off, n)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func TestS3Store(t *testing.T) {
	srv := s3Setup(t)
	data := make([]byte, 3<<20+11)
	for i := range data {
		data[i] = byte(i*7 + i>>9)
	}
	srv.Put(t, "talon", "pre/fix/obj.bin", data)
	s, err := open(srv.URL("talon", "pre/fix"), blob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	v := s.(blob.Versioned)
	info, err := v.Stat(ctx, "obj.bin")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if info.Size != int64(len(data)) || !strings.HasPrefix(info.Version, "etag:") || info.Checksum.Algorithm != blob.SHA256 || !bytes.Equal(info.Checksum.Value, sum[:]) {
		t.Fatalf("Stat = %+v (checksum %s), want size %d, an etag version, sha256 %x", info, info.Checksum, len(data), sum)
	}
	for _, r := range []struct{ off, n int64 }{{0, 10}, {1 << 20, 1 << 20}, {int64(len(data)) - 5, 100}, {int64(len(data)), 10}, {int64(len(data)) + 100, 10}, {5, 0}} {
		got, err := readS3(t, s, "obj.bin", r.off, r.n)
		end := min(r.off+r.n, int64(len(data)))
		want := data[min(r.off, end):end]
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("ReadRange(%d, %d) = %d bytes, %v; want %d bytes", r.off, r.n, len(got), err, len(want))
		}
	}
	if _, err := v.Stat(ctx, "missing"); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("Stat(missing) = %v, want ErrNotFound", err)
	}
	if _, err := readS3(t, s, "missing", 0, 1); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("ReadRange(missing) = %v, want ErrNotFound", err)
	}
	// A same-size rewrite is another version: reads of the old one fail.
	changed := bytes.Clone(data)
	changed[0] ^= 0xff
	srv.Put(t, "talon", "pre/fix/obj.bin", changed)
	if _, err := v.ReadVersion(ctx, "obj.bin", info.Version, 0, 10); !errors.Is(err, blob.ErrVersionChanged) {
		t.Fatalf("ReadVersion of the old version after a rewrite = %v, want ErrVersionChanged", err)
	}
	info2, err := v.Stat(ctx, "obj.bin")
	if err != nil || info2.Version == info.Version || info2.Size != info.Size {
		t.Fatalf("Stat after a same-size rewrite = %+v, %v; old version %s", info2, err, info.Version)
	}
	rc, err := v.ReadVersion(ctx, "obj.bin", info2.Version, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if len(b) != 1 || b[0] != changed[0] {
		t.Fatalf("ReadVersion of the new version = %x", b)
	}
}

func TestS3Failures(t *testing.T) {
	srv := s3Setup(t)
	srv.Put(t, "talon", "obj", []byte("hello"))
	ctx := context.Background()

	t.Run("wrong credentials", func(t *testing.T) {
		const secret = "wrong-secret-value-Zq81"
		t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
		s, err := open(srv.URL("talon", "")+"&max_attempts=1", blob.Options{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Size(ctx, "obj")
		if !errors.Is(err, blob.ErrBackend) || errors.Is(err, blob.ErrNotFound) || !strings.Contains(err.Error(), "403") {
			t.Fatalf("Size with a wrong secret = %v, want ErrBackend with HTTP 403", err)
		}
		_, rerr := readS3(t, s, "obj", 0, 5)
		for _, e := range []error{err, rerr} {
			if e == nil || strings.Contains(e.Error(), secret) || strings.Contains(e.Error(), srv.AccessKey) {
				t.Fatalf("error shows a credential: %v", e)
			}
		}
	})

	t.Run("store down", func(t *testing.T) {
		s, err := open(srv.URL("talon", "")+"&max_attempts=2&request_timeout=2s", blob.Options{})
		if err != nil {
			t.Fatal(err)
		}
		srv.Stop()
		defer srv.Start()
		if _, err := s.Size(ctx, "obj"); !errors.Is(err, blob.ErrBackend) {
			t.Fatalf("Size with the store down = %v, want ErrBackend", err)
		}
		if _, err := readS3(t, s, "obj", 0, 5); !errors.Is(err, blob.ErrBackend) {
			t.Fatalf("ReadRange with the store down = %v, want ErrBackend", err)
		}
	})

	t.Run("redirect to another host", func(t *testing.T) {
		// A front answers every request with a 307 to another server
		// (a real S3 server behind a proxy that counts what reaches it):
		// the client must not follow it. The SDK's client did, so the
		// other host got the request and answered it.
		target, _ := url.Parse(srv.Endpoint)
		proxy := httputil.NewSingleHostReverseProxy(target)
		var elsewhere atomic.Int64
		other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			elsewhere.Add(1)
			proxy.ServeHTTP(w, r)
		}))
		defer other.Close()
		front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+r.URL.RequestURI(), http.StatusTemporaryRedirect)
		}))
		defer front.Close()
		s, err := open("s3://talon?use_path_style=true&max_attempts=1&endpoint="+url.QueryEscape(front.URL), blob.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Size(ctx, "obj"); !errors.Is(err, blob.ErrBackend) || !strings.Contains(err.Error(), "307") {
			t.Fatalf("Size through a redirect to another host = %v, want ErrBackend with HTTP 307", err)
		}
		if _, err := readS3(t, s, "obj", 0, 5); !errors.Is(err, blob.ErrBackend) {
			t.Fatalf("ReadRange through a redirect to another host = %v, want ErrBackend", err)
		}
		if n := elsewhere.Load(); n != 0 {
			t.Fatalf("the other host got %d requests; a redirect to another host must not be followed", n)
		}
	})

	t.Run("throttled", func(t *testing.T) {
		// A proxy in front of the real server answers 503 SlowDown to
		// the first two requests of each kind: the reads succeed after
		// backing off.
		target, _ := url.Parse(srv.Endpoint)
		proxy := httputil.NewSingleHostReverseProxy(target)
		var seen, throttled atomic.Int64
		front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if seen.Add(1)%3 != 0 {
				throttled.Add(1)
				w.Header().Set("Content-Type", "application/xml")
				w.WriteHeader(http.StatusServiceUnavailable)
				io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`)
				return
			}
			proxy.ServeHTTP(w, r)
		}))
		defer front.Close()
		s, err := open("s3://talon?use_path_style=true&endpoint="+url.QueryEscape(front.URL), blob.Options{})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		n, err := s.Size(ctx, "obj")
		if err != nil || n != 5 {
			t.Fatalf("Size through throttling = %d, %v", n, err)
		}
		got, err := readS3(t, s, "obj", 1, 3)
		if err != nil || string(got) != "ell" {
			t.Fatalf("ReadRange through throttling = %q, %v", got, err)
		}
		if throttled.Load() != 4 {
			t.Fatalf("%d throttled answers, want 4 (two per request)", throttled.Load())
		}
		t.Logf("two requests through 4 SlowDown answers in %v", time.Since(start))
	})
}

// TestHTTPVersions: the http(s) backend names versions by strong ETag and
// makes ranged reads conditional on it.
func TestHTTPVersions(t *testing.T) {
	etag := `"v1"`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if im := r.Header.Get("If-Match"); im != "" && im != etag {
			w.WriteHeader(http.StatusPreconditionFailed)
			return
		}
		w.Header().Set("ETag", etag)
		http.ServeContent(w, r, "obj", time.Unix(1, 0), strings.NewReader("hello world"))
	}))
	defer srv.Close()
	s, err := open(srv.URL, blob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	v := s.(blob.Versioned)
	ctx := context.Background()
	info, err := v.Stat(ctx, "obj")
	if err != nil || info.Size != 11 || info.Version != `etag:"v1"` {
		t.Fatalf("Stat = %+v, %v", info, err)
	}
	rc, err := v.ReadVersion(ctx, "obj", info.Version, 6, 5)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "world" {
		t.Fatalf("ReadVersion = %q", b)
	}
	etag = `"v2"`
	if _, err := v.ReadVersion(ctx, "obj", info.Version, 0, 5); !errors.Is(err, blob.ErrVersionChanged) {
		t.Fatalf("ReadVersion after a change = %v, want ErrVersionChanged", err)
	}
}
