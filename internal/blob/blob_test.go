package blob_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/talonhq/talon/internal/blob"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestValidateKey(t *testing.T) {
	long := strings.Repeat("a", blob.MaxKeyBytes)
	tests := []struct {
		key  string
		rule string // substring of the error; "" means valid
	}{
		{"a", ""},
		{"dir/sub/file.bin", ""},
		{"a b/c%d#e?f", ""},
		{"..a/b..", ""},
		{"ünïcode/ok", ""},
		{long, ""},
		{long + "a", "longer than the limit of 1000"},
		{"", "must not be empty"},
		{"/abs", "relative path"},
		{"a/../b", `".." segment`},
		{"..", `".." segment`},
		{"./a", `"." segment`},
		{"a//b", "empty segment"},
		{"a/", "empty segment"},
		{"a\x00b", "NUL at byte 1"},
		{`a\b`, "backslash at byte 1"},
		{"a\nb", "control character 0x0a"},
		{"a\x7f", "control character 0x7f"},
		{"a\xffb", "valid UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			err := blob.ValidateKey(tt.key)
			if tt.rule == "" {
				if err != nil {
					t.Fatalf("ValidateKey(%q) = %v, want nil", tt.key, err)
				}
				return
			}
			if !errors.Is(err, blob.ErrInvalidKey) {
				t.Fatalf("ValidateKey(%q) = %v, want ErrInvalidKey", tt.key, err)
			}
			var ke *blob.KeyError
			if !errors.As(err, &ke) || ke.Key != tt.key {
				t.Fatalf("error %v does not carry the key", err)
			}
			if !strings.Contains(err.Error(), tt.rule) {
				t.Fatalf("error %q does not name the rule %q", err, tt.rule)
			}
		})
	}
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	writeFile(t, file, []byte("x"))
	tests := []struct {
		name    string
		url     string
		wantErr string // substring; "" means success
	}{
		{"file", "file://" + dir, ""},
		{"file localhost", "file://localhost" + dir, ""},
		{"http", "http://127.0.0.1:1/prefix/", ""},
		{"https", "https://example.com", ""},
		{"file missing dir", "file://" + dir + "/nope", "no such file"},
		{"file not dir", "file://" + file, "not a directory"},
		{"file host", "file://host/dir", "host must be empty"},
		{"file empty", "file://", "directory is empty"},
		{"no scheme", dir, "no scheme"},
		{"bad scheme", "ftp://bucket/x", `scheme "ftp" is not one of file, http, https, s3, gs, az`},
		{"creds", "https://user:hunter2@example.com/x", "credentials"},
		{"query", "https://example.com/x?sig=1", "query"},
		{"no host", "http:///x", "no host"},
		{"unparseable", "http://user:hunter2@[::1", "does not parse"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := open(tt.url, blob.Options{})
			if tt.wantErr == "" {
				if err != nil || s == nil {
					t.Fatalf("Open(%q) = %v, %v", tt.url, s, err)
				}
				return
			}
			if !errors.Is(err, blob.ErrInvalidURL) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Open(%q) error = %v, want ErrInvalidURL containing %q", tt.url, err, tt.wantErr)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("error leaks the password: %v", err)
			}
		})
	}
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

func readAll(t *testing.T, s blob.Store, key string, off, n int64) ([]byte, error) {
	t.Helper()
	rc, err := s.ReadRange(context.Background(), key, off, n)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// rangeCases are run against every backend holding pattern(1000) at "dir/obj".
var rangeCases = []struct {
	name     string
	off, n   int64
	from, to int // expected slice of the object
}{
	{"whole", 0, 1000, 0, 1000},
	{"prefix", 0, 10, 0, 10},
	{"middle", 100, 250, 100, 350},
	{"tail cut at end", 900, 500, 900, 1000},
	{"last byte", 999, 1, 999, 1000},
	{"at end", 1000, 10, 0, 0},
	{"past end", 5000, 10, 0, 0},
	{"empty", 10, 0, 0, 0},
}

func checkRanges(t *testing.T, s blob.Store) {
	t.Helper()
	obj := pattern(1000)
	for _, tt := range rangeCases {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readAll(t, s, "dir/obj", tt.off, tt.n)
			if err != nil {
				t.Fatalf("ReadRange(%d, %d): %v", tt.off, tt.n, err)
			}
			if want := obj[tt.from:tt.to]; !bytes.Equal(got, want) {
				t.Fatalf("ReadRange(%d, %d) = %d bytes, want %d bytes %d..%d", tt.off, tt.n, len(got), len(want), tt.from, tt.to)
			}
		})
	}
	t.Run("size", func(t *testing.T) {
		n, err := s.Size(context.Background(), "dir/obj")
		if err != nil || n != 1000 {
			t.Fatalf("Size = %d, %v; want 1000", n, err)
		}
	})
	t.Run("not found", func(t *testing.T) {
		if _, err := s.Size(context.Background(), "dir/missing"); !errors.Is(err, blob.ErrNotFound) {
			t.Fatalf("Size(missing) = %v, want ErrNotFound", err)
		}
		if _, err := readAll(t, s, "nodir/missing", 0, 10); !errors.Is(err, blob.ErrNotFound) {
			t.Fatalf("ReadRange(missing) = %v, want ErrNotFound", err)
		}
	})
	t.Run("invalid key", func(t *testing.T) {
		if _, err := s.Size(context.Background(), "../etc/passwd"); !errors.Is(err, blob.ErrInvalidKey) {
			t.Fatalf("Size(../etc/passwd) = %v, want ErrInvalidKey", err)
		}
		if _, err := readAll(t, s, "/etc/passwd", 0, 10); !errors.Is(err, blob.ErrInvalidKey) {
			t.Fatalf("ReadRange(/etc/passwd) = %v, want ErrInvalidKey", err)
		}
	})
	t.Run("negative range", func(t *testing.T) {
		if _, err := readAll(t, s, "dir/obj", -1, 10); !errors.Is(err, blob.ErrInvalidRange) {
			t.Fatalf("ReadRange(-1, 10) = %v, want ErrInvalidRange", err)
		}
	})
}

func TestFile(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "store")
	writeFile(t, filepath.Join(dir, "dir", "obj"), pattern(1000))
	writeFile(t, filepath.Join(root, "secret"), []byte("outside the store"))
	if err := os.Symlink(filepath.Join(root, "secret"), filepath.Join(dir, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../secret", filepath.Join(dir, "dir", "relescape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("obj", filepath.Join(dir, "dir", "inside")); err != nil {
		t.Fatal(err)
	}
	s, err := open("file://"+dir, blob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkRanges(t, s)

	for _, key := range []string{"escape", "dir/relescape"} {
		t.Run("symlink out "+key, func(t *testing.T) {
			if _, err := s.Size(context.Background(), key); !errors.Is(err, blob.ErrNotFound) {
				t.Fatalf("Size(%q) = %v, want ErrNotFound", key, err)
			}
			got, err := readAll(t, s, key, 0, 100)
			if !errors.Is(err, blob.ErrNotFound) || len(got) != 0 {
				t.Fatalf("ReadRange(%q) = %q, %v; want ErrNotFound", key, got, err)
			}
		})
	}
	t.Run("symlink inside", func(t *testing.T) {
		got, err := readAll(t, s, "dir/inside", 0, 1000)
		if err != nil || !bytes.Equal(got, pattern(1000)) {
			t.Fatalf("ReadRange(dir/inside) = %d bytes, %v", len(got), err)
		}
	})
	t.Run("directory is not an object", func(t *testing.T) {
		if _, err := s.Size(context.Background(), "dir"); !errors.Is(err, blob.ErrNotFound) {
			t.Fatalf("Size(dir) = %v, want ErrNotFound", err)
		}
	})
	t.Run("file as directory", func(t *testing.T) {
		if _, err := s.Size(context.Background(), "dir/obj/x"); !errors.Is(err, blob.ErrNotFound) {
			t.Fatalf("Size(dir/obj/x) = %v, want ErrNotFound", err)
		}
	})
	t.Run("ctx ended", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		rc, err := s.ReadRange(ctx, "dir/obj", 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		cancel()
		if _, err := io.ReadAll(rc); !errors.Is(err, context.Canceled) || errors.Is(err, blob.ErrBackend) {
			t.Fatalf("read after cancel = %v, want context.Canceled and not ErrBackend", err)
		}
	})
}

// objectServer serves objects with http.ServeContent, which honours Range.
func objectServer(t *testing.T, objects map[string][]byte, wrap func(http.Handler) http.Handler) *httptest.Server {
	t.Helper()
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := strings.TrimPrefix(r.URL.Path, "/base/")
		data, ok := objects[key]
		if !ok || !strings.HasPrefix(r.URL.Path, "/base/") {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
	})
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func newHTTP(t *testing.T, srv *httptest.Server, opts blob.Options) blob.Store {
	t.Helper()
	if opts.HTTPClient == nil {
		opts.HTTPClient = srv.Client()
	}
	s, err := open(srv.URL+"/base/", opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestHTTP(t *testing.T) {
	objects := map[string][]byte{"dir/obj": pattern(1000), "odd name/a b%#?.bin": []byte("odd"), "empty": {}}
	srv := objectServer(t, objects, nil)
	s := newHTTP(t, srv, blob.Options{})
	checkRanges(t, s)

	t.Run("escaped key", func(t *testing.T) {
		got, err := readAll(t, s, "odd name/a b%#?.bin", 0, 10)
		if err != nil || string(got) != "odd" {
			t.Fatalf("ReadRange = %q, %v; want odd", got, err)
		}
	})
	t.Run("empty object", func(t *testing.T) {
		n, err := s.Size(context.Background(), "empty")
		if err != nil || n != 0 {
			t.Fatalf("Size(empty) = %d, %v", n, err)
		}
		got, err := readAll(t, s, "empty", 0, 10)
		if err != nil || len(got) != 0 {
			t.Fatalf("ReadRange(empty) = %q, %v", got, err)
		}
	})
}

// noHead refuses HEAD, so Size must fall back to a one-byte range.
func noHead(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func TestHTTPSizeWithoutHead(t *testing.T) {
	srv := objectServer(t, map[string][]byte{"dir/obj": pattern(1000), "empty": {}}, noHead)
	s := newHTTP(t, srv, blob.Options{})
	for key, want := range map[string]int64{"dir/obj": 1000, "empty": 0} {
		n, err := s.Size(context.Background(), key)
		if err != nil || n != want {
			t.Fatalf("Size(%q) = %d, %v; want %d", key, n, err, want)
		}
	}
	if _, err := s.Size(context.Background(), "missing"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("Size(missing) = %v, want ErrNotFound", err)
	}
}

// ignoreRange answers every GET with 200 and the whole object, counting
// the bytes the client actually accepted.
func ignoreRange(data []byte, written *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		if r.Method == http.MethodHead {
			return
		}
		for off := 0; off < len(data); off += 4096 {
			n, err := w.Write(data[off:min(off+4096, len(data))])
			written.Add(int64(n))
			if err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	})
}

func TestHTTPServerIgnoresRange(t *testing.T) {
	// Large enough that loopback socket buffers (several MiB with
	// autotuning) cannot absorb whole copies of it.
	data := pattern(32 << 20)
	var written atomic.Int64
	srv := httptest.NewServer(ignoreRange(data, &written))
	t.Cleanup(srv.Close)
	s, err := open(srv.URL, blob.Options{HTTPClient: srv.Client(), MaxDiscardBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		off, n  int64
		wantErr error
	}{
		{"prefix", 0, 1000, nil},
		{"skip within limit", 60 << 10, 1000, nil},
		{"past limit", 100 << 10, 1000, blob.ErrRangeNotSupported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readAll(t, s, "obj", tt.off, tt.n)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || !errors.Is(err, blob.ErrBackend) {
					t.Fatalf("ReadRange = %v, want %v (and ErrBackend)", err, tt.wantErr)
				}
				return
			}
			if err != nil || !bytes.Equal(got, data[tt.off:tt.off+tt.n]) {
				t.Fatalf("ReadRange(%d, %d) = %d bytes, %v", tt.off, tt.n, len(got), err)
			}
		})
	}
	if n, err := s.Size(context.Background(), "obj"); err != nil || n != int64(len(data)) {
		t.Fatalf("Size = %d, %v", n, err)
	}
	// The client stops reading once it has its bytes; the server cannot
	// have pushed the whole object three times (socket buffers allow some
	// slack beyond what was read).
	if w := written.Load(); w >= 3*int64(len(data)) {
		t.Fatalf("server wrote %d bytes for three small reads of a %d-byte object", w, len(data))
	}
}

func TestHTTPErrors(t *testing.T) {
	t.Run("500", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "boom", http.StatusInternalServerError)
		}))
		t.Cleanup(srv.Close)
		s := newHTTP(t, srv, blob.Options{})
		if _, err := s.Size(context.Background(), "obj"); !errors.Is(err, blob.ErrBackend) || !strings.Contains(err.Error(), "500") {
			t.Fatalf("Size = %v, want ErrBackend naming 500", err)
		}
		if _, err := readAll(t, s, "obj", 0, 10); !errors.Is(err, blob.ErrBackend) || errors.Is(err, blob.ErrNotFound) {
			t.Fatalf("ReadRange = %v, want ErrBackend", err)
		}
	})
	t.Run("wrong content-range", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Range", "bytes 0-9/100")
			w.WriteHeader(http.StatusPartialContent)
			w.Write(make([]byte, 10))
		}))
		t.Cleanup(srv.Close)
		s := newHTTP(t, srv, blob.Options{})
		if _, err := readAll(t, s, "obj", 50, 10); !errors.Is(err, blob.ErrBackend) {
			t.Fatalf("ReadRange = %v, want ErrBackend for a range at the wrong offset", err)
		}
	})
	t.Run("truncated body", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Range", "bytes 0-99/100")
			w.Header().Set("Content-Length", "100")
			w.WriteHeader(http.StatusPartialContent)
			w.Write(make([]byte, 10))
			panic(http.ErrAbortHandler)
		}))
		t.Cleanup(srv.Close)
		s := newHTTP(t, srv, blob.Options{})
		if _, err := readAll(t, s, "obj", 0, 100); !errors.Is(err, blob.ErrBackend) {
			t.Fatalf("ReadRange = %v, want ErrBackend for a short body", err)
		}
	})
	t.Run("ctx timeout", func(t *testing.T) {
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}))
		t.Cleanup(srv.Close)
		t.Cleanup(func() { close(release) })
		s := newHTTP(t, srv, blob.Options{})
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := s.Size(ctx, "obj")
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, blob.ErrBackend) {
			t.Fatalf("Size = %v, want DeadlineExceeded and not ErrBackend", err)
		}
	})
	t.Run("client timeout", func(t *testing.T) {
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}))
		t.Cleanup(srv.Close)
		t.Cleanup(func() { close(release) })
		c := srv.Client()
		c.Timeout = 50 * time.Millisecond
		s := newHTTP(t, srv, blob.Options{HTTPClient: c})
		if _, err := readAll(t, s, "obj", 0, 10); !errors.Is(err, blob.ErrBackend) {
			t.Fatalf("ReadRange = %v, want ErrBackend for the client's own timeout", err)
		}
	})
}

// TestFileFIFORefusedAtOnce: a FIFO in the store (which blocks an open
// until a writer comes) is refused as not found at once, pinning no
// goroutine or descriptor; a symlink to a device likewise.
func TestFileFIFORefusedAtOnce(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := open("file://"+dir, blob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 2)
	go func() { _, err := s.Size(context.Background(), "fifo"); done <- err }()
	go func() { _, err := readAll(t, s, "fifo", 0, 10); done <- err }()
	for range 2 {
		select {
		case err := <-done:
			if !errors.Is(err, blob.ErrNotFound) || !strings.Contains(err.Error(), "not a regular file") {
				t.Fatalf("a FIFO: %v, want not found, not a regular file", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a FIFO in the store blocked the read")
		}
	}
}

// TestOpenWithoutCloudStores: Open knows the cloud schemes it is given
// and no others, so a caller that wires in none refuses s3:// and links
// no SDK.
func TestOpenWithoutCloudStores(t *testing.T) {
	if _, err := blob.Open("s3://bucket/p", blob.Options{}, nil); !errors.Is(err, blob.ErrInvalidURL) || !strings.Contains(err.Error(), `scheme "s3" is not one of file, http, https`) {
		t.Errorf("Open(s3://) without cloud stores = %v, want ErrInvalidURL naming file, http, https", err)
	}
	if _, err := blob.Open("/dir", blob.Options{}, nil); err == nil || !strings.HasSuffix(err.Error(), "use file:///dir, http(s)://host/prefix") {
		t.Errorf("Open(/dir) without cloud stores = %v, want the file and http shapes only", err)
	}
	if _, err := open("/dir", blob.Options{}); err == nil || !strings.HasSuffix(err.Error(), "s3://bucket/prefix, gs://bucket/prefix, az://account/container/prefix") {
		t.Errorf("Open(/dir) = %v, want every shape", err)
	}
}
