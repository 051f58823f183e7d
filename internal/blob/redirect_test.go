package blob_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/talonhq/talon/internal/blob"
	"github.com/talonhq/talon/internal/blob/azure"
	"github.com/talonhq/talon/internal/testenv"
)

// redirectingFront answers every request with a 307 to another server, a
// proxy to target that counts what reaches it.
func redirectingFront(t *testing.T, target string) (*httptest.Server, *atomic.Int64) {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(&url.URL{Scheme: u.Scheme, Host: u.Host}) }}
	var elsewhere atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(other.Close)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	}))
	t.Cleanup(front.Close)
	return front, &elsewhere
}

// TestCloudStoresRefuseRedirectsElsewhere: a gs:// or az:// store that
// answers with a redirect to another host fails the call (ErrBackend
// naming the 307); the other host never sees a request.
func TestCloudStoresRefuseRedirectsElsewhere(t *testing.T) {
	testenv.SkipIfShort(t)
	check := func(t *testing.T, s blob.Store, elsewhere *atomic.Int64) {
		t.Helper()
		closeStore(t, s)
		if _, err := s.Size(context.Background(), "obj"); !errors.Is(err, blob.ErrBackend) || !strings.Contains(err.Error(), "307") {
			t.Fatalf("Size through a redirect to another host = %v, want ErrBackend with HTTP 307", err)
		}
		if _, err := readAll(t, s, "obj", 0, 5); !errors.Is(err, blob.ErrBackend) || !strings.Contains(err.Error(), "307") {
			t.Fatalf("ReadRange through a redirect to another host = %v, want ErrBackend with HTTP 307", err)
		}
		if n := elsewhere.Load(); n != 0 {
			t.Fatalf("the other host got %d requests", n)
		}
	}
	t.Run("gcs", func(t *testing.T) {
		g := testenv.StartGCS(t)
		g.CreateBucket(t, "talon")
		g.Put(t, "talon", "obj", []byte("hello, world"))
		front, elsewhere := redirectingFront(t, g.Endpoint)
		s, err := open("gs://talon?anonymous=true&max_attempts=1&endpoint="+url.QueryEscape(front.URL), blob.Options{})
		if err != nil {
			t.Fatal(err)
		}
		check(t, s, elsewhere)
	})
	t.Run("azure", func(t *testing.T) {
		a := testenv.StartAzurite(t)
		a.CreateContainer(t, "talon")
		a.Put(t, "talon", "obj", []byte("hello, world"))
		front, elsewhere := redirectingFront(t, a.Endpoint)
		t.Setenv(azure.EnvConnectionString, strings.Replace(a.ConnectionString, a.Endpoint, front.URL+"/"+testenv.AzuriteAccount, 1))
		s, err := open(a.URL("talon", "")+"?max_attempts=1", blob.Options{})
		if err != nil {
			t.Fatal(err)
		}
		check(t, s, elsewhere)
	})
}
