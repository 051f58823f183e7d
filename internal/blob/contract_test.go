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
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/blob"
	"github.com/talonhq/talon/internal/blob/azure"
	"github.com/talonhq/talon/internal/testenv"
)

// contractStore is one backend under the blob-store contract: the store,
// how to write an object behind its back, and whether it keeps a
// checksum of every object.
type contractStore struct {
	store    blob.Store
	put      func(t *testing.T, key string, data []byte)
	checksum bool
}

// TestBlobStoreContract runs one contract against every backend: file,
// http, S3 (versitygw), Google Cloud Storage (fake-gcs-server) and Azure
// Blob (Azurite), the servers real processes on loopback.
func TestBlobStoreContract(t *testing.T) {
	for name, open := range map[string]func(t *testing.T) contractStore{
		"file": fileContract, "http": httpContract, "s3": s3Contract, "gcs": gcsContract, "azure": azureContract,
	} {
		t.Run(name, func(t *testing.T) {
			c := open(t)
			runContract(t, c)
			runListContract(t, c, name != "http")
		})
	}
}

func runContract(t *testing.T, c contractStore) {
	ctx := context.Background()
	data := pattern(3<<20 + 11)
	c.put(t, "dir/obj.bin", data)
	v, ok := c.store.(blob.Versioned)
	if !ok {
		t.Fatalf("%T is not blob.Versioned", c.store)
	}
	info, err := v.Stat(ctx, "dir/obj.bin")
	if err != nil || info.Size != int64(len(data)) || info.Version == "" {
		t.Fatalf("Stat = %+v, %v; want size %d and a version", info, err, len(data))
	}
	if n, err := c.store.Size(ctx, "dir/obj.bin"); err != nil || n != int64(len(data)) {
		t.Fatalf("Size = %d, %v", n, err)
	}
	if c.checksum && info.Checksum.IsZero() {
		t.Fatalf("Stat gave no checksum; this store keeps one")
	}
	if h := info.Checksum.NewHash(); h != nil {
		h.Write(data)
		if !bytes.Equal(h.Sum(nil), info.Checksum.Value) {
			t.Fatalf("checksum %s does not match the object's bytes", info.Checksum)
		}
	}
	size := int64(len(data))
	for _, r := range []struct{ off, n int64 }{{0, 10}, {1 << 20, 1 << 20}, {size - 5, 100}, {size, 10}, {size + 100, 10}, {5, 0}} {
		got, err := readAll(t, c.store, "dir/obj.bin", r.off, r.n)
		end := min(r.off+r.n, size)
		want := data[min(r.off, end):end]
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("ReadRange(%d, %d) = %d bytes, %v; want %d bytes", r.off, r.n, len(got), err, len(want))
		}
	}
	if again, err := v.Stat(ctx, "dir/obj.bin"); err != nil || again.Version != info.Version {
		t.Errorf("a second Stat gave version %q (%v), the first %q: a version must be stable", again.Version, err, info.Version)
	}
	if _, err := v.Stat(ctx, "missing"); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("Stat(missing) = %v, want ErrNotFound", err)
	}
	if _, err := readAll(t, c.store, "missing", 0, 1); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("ReadRange(missing) = %v, want ErrNotFound", err)
	}
	if _, err := v.Stat(ctx, "../escape"); !errors.Is(err, blob.ErrInvalidKey) {
		t.Errorf("Stat(../escape) = %v, want ErrInvalidKey", err)
	}
	if _, err := c.store.ReadRange(ctx, "a//b", 0, 1); !errors.Is(err, blob.ErrInvalidKey) {
		t.Errorf("ReadRange(a//b) = %v, want ErrInvalidKey", err)
	}
	// A same-size rewrite is another version: reads of the old one fail.
	changed := bytes.Clone(data)
	changed[0] ^= 0xff
	c.put(t, "dir/obj.bin", changed)
	if _, err := v.ReadVersion(ctx, "dir/obj.bin", info.Version, 0, 10); !errors.Is(err, blob.ErrVersionChanged) {
		t.Fatalf("ReadVersion of the old version after a rewrite = %v, want ErrVersionChanged", err)
	}
	info2, err := v.Stat(ctx, "dir/obj.bin")
	if err != nil || info2.Version == info.Version || info2.Size != info.Size {
		t.Fatalf("Stat after a same-size rewrite = %+v, %v; old version %s", info2, err, info.Version)
	}
	rc, err := v.ReadVersion(ctx, "dir/obj.bin", info2.Version, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(b, changed[:2]) {
		t.Fatalf("ReadVersion of the new version = %x, want %x", b, changed[:2])
	}
}

// runListContract checks blob.List: the keys under a prefix in key
// order, none outside it, the bound with more set; a store that cannot
// list (http) answers ErrNoList.
func runListContract(t *testing.T, c contractStore, lists bool) {
	ctx := context.Background()
	for _, k := range []string{"list/a", "list/b/c", "list/d", "listing/e", "other/f"} {
		c.put(t, k, []byte(k))
	}
	keys, more, err := blob.List(ctx, c.store, "list/", 10)
	if !lists {
		if !errors.Is(err, blob.ErrNoList) {
			t.Fatalf("List on a store that cannot list = %v, want ErrNoList", err)
		}
		return
	}
	if err != nil || more || strings.Join(keys, ",") != "list/a,list/b/c,list/d" {
		t.Fatalf("List(list/) = %q, more %v, %v; want list/a, list/b/c, list/d", keys, more, err)
	}
	if keys, more, err := blob.List(ctx, c.store, "list", 2); err != nil || !more || len(keys) != 2 || keys[0] != "list/a" {
		t.Fatalf("List(list, 2) = %q, more %v, %v; want the first 2 and more", keys, more, err)
	}
	if keys, more, err := blob.List(ctx, c.store, "none/", 10); err != nil || more || len(keys) != 0 {
		t.Fatalf("List(none/) = %q, %v, %v; want nothing", keys, more, err)
	}
}

// putFile writes data under dir, then moves its modification time past
// the last one, so that a same-size rewrite is another version.
func putFile(dir string) func(t *testing.T, key string, data []byte) {
	var mu sync.Mutex
	next := time.Now().Add(-time.Hour)
	return func(t *testing.T, key string, data []byte) {
		t.Helper()
		p := filepath.Join(dir, filepath.FromSlash(key))
		writeFile(t, p, data)
		mu.Lock()
		next = next.Add(2 * time.Second)
		mtime := next
		mu.Unlock()
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
}

func fileContract(t *testing.T) contractStore {
	dir := t.TempDir()
	s, err := open("file://"+dir, blob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return contractStore{store: s, put: putFile(dir)}
}

func httpContract(t *testing.T) contractStore {
	dir := t.TempDir()
	srv := httptest.NewServer(http.StripPrefix("/base/", http.FileServer(http.Dir(dir))))
	t.Cleanup(srv.Close)
	s, err := open(srv.URL+"/base/", blob.Options{HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return contractStore{store: s, put: putFile(dir)}
}

func s3Contract(t *testing.T) contractStore {
	srv := s3Setup(t)
	s, err := open(srv.URL("talon", "pre/fix"), blob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return contractStore{store: s, put: func(t *testing.T, key string, data []byte) { srv.Put(t, "talon", "pre/fix/"+key, data) }, checksum: true}
}

func gcsContract(t *testing.T) contractStore {
	testenv.SkipIfShort(t)
	g := testenv.StartGCS(t)
	g.CreateBucket(t, "talon")
	s, err := open(g.URL("talon", "pre/fix"), blob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	closeStore(t, s)
	return contractStore{store: s, put: func(t *testing.T, key string, data []byte) { g.Put(t, "talon", "pre/fix/"+key, data) }, checksum: true}
}

func azureContract(t *testing.T) contractStore {
	testenv.SkipIfShort(t)
	a := testenv.StartAzurite(t)
	t.Setenv(azure.EnvConnectionString, a.ConnectionString)
	a.CreateContainer(t, "talon")
	s, err := open(a.URL("talon", "pre/fix"), blob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return contractStore{store: s, put: func(t *testing.T, key string, data []byte) { a.Put(t, "talon", "pre/fix/"+key, data) }, checksum: true}
}

func closeStore(t *testing.T, s blob.Store) {
	if c, ok := s.(interface{ Close() error }); ok {
		t.Cleanup(func() { c.Close() })
	}
}

// TestCloudURLs: s3://, gs:// and az:// URLs are checked by one parser
// before any request (the common parameters, and each scheme's own);
// errors name the URL (no query) and the rule, and never a credential.
func TestCloudURLs(t *testing.T) {
	t.Setenv(azure.EnvConnectionString, "")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	for url, want := range map[string]string{
		"gs://b/p?anonymous=true":                              "",
		"gs://b/p?endpoint=http://127.0.0.1:1&anonymous=1":     "",
		"gs://b/p?regoin=x":                                    `unknown parameter "regoin": the parameters are endpoint, anonymous, request_timeout, max_attempts`,
		"gs://b/p?max_attempts=99&anonymous=true":              `max_attempts="99": must be an integer from 1 to 20`,
		"gs://key:secret@b/p":                                  "must not carry credentials",
		"gs:///p":                                              "no bucket: write gs://bucket/prefix",
		"gs://b/p?endpoint=http://u:PLANTED@h/&anonymous=true": `endpoint="http://u:xxxxx@h/": must be an http:// or https:// URL without credentials or query`,
		"az://acct/cont/p?anonymous=true":                      "",
		"az://acct?anonymous=true":                             "no container: write az://account/container/prefix",
		"az://acct/cont/p?request_timeout=1ms":                 `request_timeout="1ms": must be a duration from 100ms to 1h`,
		"az://k:s@acct/cont":                                   "must not carry credentials",
		"s3://b/p?anonymous=true":                              `unknown parameter "anonymous": the parameters are endpoint, region, use_path_style, profile, ca_file, request_timeout, max_attempts`,
		"gs://b/p?use_path_style=true":                         `unknown parameter "use_path_style": the parameters are endpoint, anonymous, request_timeout, max_attempts`,
		"s3://b/p?endpoint=http://127.0.0.1:1/&max_attempts=3": "",
	} {
		s, err := open(url, blob.Options{})
		if c, ok := s.(interface{ Close() error }); ok && err == nil {
			c.Close()
		}
		switch {
		case want == "" && err != nil:
			t.Errorf("Open(%q) = %v, want no error", url, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, blob.ErrInvalidURL)):
			t.Errorf("Open(%q) = %v, want ErrInvalidURL with %q", url, err, want)
		case err != nil && (strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "PLANTED")):
			t.Errorf("Open(%q) error names a credential: %v", url, err)
		}
	}
	t.Setenv(azure.EnvConnectionString, "AccountName=other;AccountKey=PLANTED")
	if _, err := open("az://acct/cont", blob.Options{}); err == nil || !strings.Contains(err.Error(), `names account "other"`) || strings.Contains(err.Error(), "PLANTED") {
		t.Errorf("az:// with another account's connection string: %v", err)
	}
}
