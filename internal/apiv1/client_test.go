package apiv1

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const secretToken = "s3cret-token-value"

// deadURL returns a base URL on which nothing listens.
func deadURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

func serveJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func newServer(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

func newClient(t *testing.T, urls []string, opts ClientOptions) *Client {
	t.Helper()
	c, err := NewClient(urls, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.hc.CloseIdleConnections)
	return c
}

func TestNewClientBaseURLs(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		tls     bool
		want    string
		wantErr string
	}{
		{"plain", "http://127.0.0.1:7401", false, "http://127.0.0.1:7401", ""},
		{"trailing slash", "http://h:1/", false, "http://h:1", ""},
		{"path prefix", "https://proxy.example/talon/admin/", false, "https://proxy.example/talon/admin", ""},
		{"bare host plain", "h:7401", false, "http://h:7401", ""},
		{"bare host tls", "h:7401", true, "https://h:7401", ""},
		{"empty", " ", false, "", "must not be empty"},
		{"bad scheme", "ftp://h:1", false, "", "scheme must be http or https"},
		{"credentials", "http://user:pw@h:1", false, "", "must not carry credentials"},
		{"query", "http://h:1/?a=b", false, "", "must not have a query"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts ClientOptions
			if tt.tls {
				opts.TLS = &tls.Config{}
			}
			c, err := NewClient([]string{tt.in}, opts)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				if strings.Contains(fmt.Sprint(err), "pw") {
					t.Fatalf("error %v echoes the password", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.BaseURLs()[0]; got != tt.want {
				t.Fatalf("base = %s, want %s", got, tt.want)
			}
		})
	}
	if _, err := NewClient(nil, ClientOptions{}); err == nil {
		t.Fatal("NewClient without URLs succeeded")
	}
}

func TestClientSendsTokenAndDecodes(t *testing.T) {
	var gotAuth, gotQuery atomic.Value
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		gotAuth.Store(r.Header.Get("Authorization"))
		gotQuery.Store(r.URL.RawQuery)
		switch r.URL.Path {
		case PathCluster:
			serveJSON(w, 200, Cluster{Meta: Meta{SchemaVersion: 1, Revision: "42"}, ClusterID: "c1", PlacementVersion: "00000000000000ff"})
		case PathPlacement:
			serveJSON(w, 200, Placement{Key: r.URL.Query().Get("key"), Replicas: 3, Owners: []Owner{{NodeID: "w1", Address: "a:1"}}})
		case PathNodes + "/w%2F1", PathNodes + "/w/1":
			serveJSON(w, 200, NodeResponse{Node: Node{NodeID: "w/1"}})
		default:
			http.NotFound(w, r)
		}
	})
	c := newClient(t, []string{s.URL}, ClientOptions{Token: secretToken})
	ctx := context.Background()
	cl, err := c.Cluster(ctx, AllowStale())
	if err != nil {
		t.Fatal(err)
	}
	if cl.ClusterID != "c1" || cl.Revision != "42" || cl.PlacementVersion != "00000000000000ff" {
		t.Fatalf("cluster %+v", cl)
	}
	if gotAuth.Load() != "Bearer "+secretToken || gotQuery.Load() != "allowStale=true" {
		t.Fatalf("auth %q query %q", gotAuth.Load(), gotQuery.Load())
	}
	p, err := c.Placement(ctx, "a/b c", 3)
	if err != nil {
		t.Fatal(err)
	}
	if p.Key != "a/b c" || len(p.Owners) != 1 || gotQuery.Load() != "key=a%2Fb+c&replicas=3" {
		t.Fatalf("placement %+v query %q", p, gotQuery.Load())
	}
	if _, err := c.Node(ctx, ""); err == nil {
		t.Fatal("Node with an empty ID succeeded")
	}
}

func TestClientErrors(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case PathCluster:
			w.Header().Set("Retry-After", "2")
			serveJSON(w, 503, ErrorResponse{Error: ErrorBody{Code: CodeNotReady, Message: "no snapshot", Retryable: true}})
		case PathNodes:
			serveJSON(w, 400, ErrorResponse{Error: ErrorBody{Code: CodeInvalidArgument, Message: "parameter limit \"0\": bad", Parameter: "limit"}})
		case PathNodes + "/gone":
			serveJSON(w, 404, ErrorResponse{Error: ErrorBody{Code: CodeNotFound, Message: "node gone"}})
		case PathStatus:
			w.Header().Set("WWW-Authenticate", "Bearer")
			serveJSON(w, 401, ErrorResponse{Error: ErrorBody{Code: CodeUnauthenticated, Message: "token"}})
		case PathPlacement:
			http.Error(w, "<html>bad gateway</html>", http.StatusBadGateway)
		case PathOpenAPI:
			w.WriteHeader(200)
			_, _ = w.Write([]byte("{not json"))
		}
	})
	c := newClient(t, []string{s.URL}, ClientOptions{Token: secretToken})
	ctx := context.Background()
	tests := []struct {
		name     string
		call     func() error
		sentinel error
		status   int
		code     string
		param    string
		retry    time.Duration
	}{
		{"503", func() error { _, err := c.Cluster(ctx); return err }, ErrUnavailable, 503, CodeNotReady, "", 2 * time.Second},
		{"400", func() error { _, err := c.Nodes(ctx, NodeFilter{}, 0, ""); return err }, ErrBadRequest, 400, CodeInvalidArgument, "limit", 0},
		{"404", func() error { _, err := c.Node(ctx, "gone"); return err }, ErrNotFound, 404, CodeNotFound, "", 0},
		{"401", func() error { _, err := c.Status(ctx); return err }, ErrUnauthorized, 401, CodeUnauthenticated, "", 0},
		{"non-JSON 502", func() error { _, err := c.Placement(ctx, "k", 1); return err }, nil, 502, CodeInternal, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			var ae *APIError
			if !errors.As(err, &ae) {
				t.Fatalf("err = %v, want *APIError", err)
			}
			if ae.HTTPStatus != tt.status || ae.Code != tt.code || ae.Parameter != tt.param || ae.RetryAfter != tt.retry || ae.Server != s.URL {
				t.Fatalf("APIError %+v", ae)
			}
			for _, sen := range []error{ErrUnavailable, ErrBadRequest, ErrNotFound, ErrUnauthorized} {
				if errors.Is(err, sen) != (sen == tt.sentinel) {
					t.Errorf("errors.Is(err, %v) = %v", sen, !(sen == tt.sentinel))
				}
			}
			if strings.Contains(err.Error(), secretToken) {
				t.Fatalf("error %q contains the token", err)
			}
		})
	}
	if _, err := c.OpenAPIDocument(ctx); err == nil || !strings.Contains(err.Error(), "decoding") {
		t.Fatalf("malformed body: err = %v", err)
	}
}

func TestClientFailover(t *testing.T) {
	var hitsA, hitsB atomic.Int64
	a := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		hitsA.Add(1)
		serveJSON(w, 503, ErrorResponse{Error: ErrorBody{Code: CodeNotReady, Message: "store down", Retryable: true}})
	})
	b := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		hitsB.Add(1)
		serveJSON(w, 200, Cluster{ClusterID: "from-b"})
	})
	dead := deadURL(t)
	ctx := context.Background()

	t.Run("connection refused then 503 then ok", func(t *testing.T) {
		c := newClient(t, []string{dead, a.URL, b.URL}, ClientOptions{})
		cl, err := c.Cluster(ctx)
		if err != nil || cl.ClusterID != "from-b" {
			t.Fatalf("cluster %+v, %v", cl, err)
		}
		// The answering server is preferred next time.
		before := hitsA.Load()
		if _, err := c.Cluster(ctx); err != nil {
			t.Fatal(err)
		}
		if hitsA.Load() != before {
			t.Fatal("second call did not go straight to the server that answered")
		}
	})
	t.Run("every server down", func(t *testing.T) {
		c := newClient(t, []string{dead, deadURL(t)}, ClientOptions{Token: secretToken})
		_, err := c.Cluster(ctx)
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("err = %v, want ErrUnavailable", err)
		}
		if strings.Contains(err.Error(), secretToken) {
			t.Fatalf("error %q contains the token", err)
		}
	})
	t.Run("last server 503", func(t *testing.T) {
		c := newClient(t, []string{dead, a.URL}, ClientOptions{})
		_, err := c.Cluster(ctx)
		var ae *APIError
		if !errors.Is(err, ErrUnavailable) || !errors.As(err, &ae) || ae.Code != CodeNotReady || !ae.Retryable {
			t.Fatalf("err = %v, want the 503 APIError", err)
		}
	})
	t.Run("4xx does not fail over", func(t *testing.T) {
		nf := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			serveJSON(w, 404, ErrorResponse{Error: ErrorBody{Code: CodeNotFound, Message: "x"}})
		})
		before := hitsB.Load()
		c := newClient(t, []string{nf.URL, b.URL}, ClientOptions{})
		if _, err := c.Cluster(ctx); !errors.Is(err, ErrNotFound) {
			t.Fatalf("err = %v, want ErrNotFound", err)
		}
		if hitsB.Load() != before {
			t.Fatal("a 404 failed over to the next server")
		}
	})
	t.Run("caller context ends", func(t *testing.T) {
		c := newClient(t, []string{a.URL}, ClientOptions{})
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := c.Cluster(cctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	})
}

func TestClientTimeoutPerAttempt(t *testing.T) {
	release := make(chan struct{})
	slow := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	fast := newServer(t, func(w http.ResponseWriter, r *http.Request) { serveJSON(w, 200, Cluster{ClusterID: "fast"}) })
	c := newClient(t, []string{slow.URL, fast.URL}, ClientOptions{Timeout: 100 * time.Millisecond})
	cl, err := c.Cluster(context.Background())
	if err != nil || cl.ClusterID != "fast" {
		t.Fatalf("cluster %+v, %v; want failover after the slow server's timeout", cl, err)
	}
}

func TestClientDoesNotFollowRedirects(t *testing.T) {
	var leaked atomic.Value
	other := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		leaked.Store(r.Header.Get("Authorization"))
		serveJSON(w, 200, Cluster{})
	})
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusFound)
	})
	c := newClient(t, []string{s.URL}, ClientOptions{Token: secretToken})
	if _, err := c.Cluster(context.Background()); err == nil {
		t.Fatal("a redirect answer was accepted")
	}
	if leaked.Load() != nil {
		t.Fatal("the client followed a redirect")
	}
}

func TestNodesQueryAndAllNodes(t *testing.T) {
	const total = 2500
	var mu sync.Mutex
	var queries []string // guarded by mu
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		mu.Lock()
		queries = append(queries, r.URL.RawQuery)
		mu.Unlock()
		limit, _ := strconv.Atoi(q.Get("limit"))
		start := 0
		if c := q.Get("continue"); c != "" {
			start, _ = strconv.Atoi(c)
		}
		out := NodeList{Meta: Meta{Revision: strconv.Itoa(start)}, Items: []Node{}}
		for i := start; i < total && len(out.Items) < limit; i++ {
			out.Items = append(out.Items, Node{NodeID: fmt.Sprintf("w%05d", i)})
		}
		if next := start + len(out.Items); next < total {
			out.Continue = strconv.Itoa(next)
		}
		serveJSON(w, 200, out)
	})
	c := newClient(t, []string{s.URL}, ClientOptions{})
	ready := true
	all, err := c.AllNodes(context.Background(), NodeFilter{Role: "worker", Health: "healthy", Ready: &ready, Labels: map[string]string{"zone": "a", "rack": "r1"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Items) != total || all.Items[0].NodeID != "w00000" || all.Items[total-1].NodeID != "w02499" || all.Continue != "" {
		t.Fatalf("AllNodes: %d items, first %s", len(all.Items), all.Items[0].NodeID)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(queries) != 3 {
		t.Fatalf("%d pages fetched, want 3", len(queries))
	}
	if want := "health=healthy&label=rack%3Dr1&label=zone%3Da&limit=1000&ready=true&role=worker"; queries[0] != want {
		t.Fatalf("first query %q, want %q", queries[0], want)
	}
	if all.Revision != "2000" {
		t.Fatalf("AllNodes meta is not the last page's: revision %q", all.Revision)
	}
}

func TestAllNodesRejectsRepeatedToken(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		serveJSON(w, 200, NodeList{Items: []Node{{NodeID: "x"}}, Continue: "same"})
	})
	c := newClient(t, []string{s.URL}, ClientOptions{})
	if _, err := c.AllNodes(context.Background(), NodeFilter{}); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("err = %v, want a repeated-token error", err)
	}
}

func TestProbes(t *testing.T) {
	ready := atomic.Bool{}
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case PathHealthz:
			serveJSON(w, 200, Health{Status: StatusOK})
		case PathReadyz:
			if ready.Load() {
				serveJSON(w, 200, Health{Status: StatusReady})
			} else {
				serveJSON(w, 503, Health{Status: StatusNotReady, Reasons: []string{"draining: shutting down"}})
			}
		}
	})
	c := newClient(t, []string{s.URL}, ClientOptions{})
	ctx := context.Background()
	h, err := c.Healthz(ctx)
	if err != nil || h.Status != StatusOK {
		t.Fatalf("healthz %+v, %v", h, err)
	}
	h, err = c.Readyz(ctx)
	if err != nil || h.Ready() || len(h.Reasons) != 1 {
		t.Fatalf("readyz not ready: %+v, %v", h, err)
	}
	ready.Store(true)
	h, err = c.Readyz(ctx)
	if err != nil || !h.Ready() {
		t.Fatalf("readyz ready: %+v, %v", h, err)
	}
}

// TestClientMarksWrites: a write carries HeaderRequest, which the admin
// listener requires of every write (another site's page cannot send it);
// a read does not need it. The operator actions go to the node's action
// path at the coordinator, persist only on cordon.
func TestClientMarksWrites(t *testing.T) {
	got := map[string]string{}
	var paths []string
	var mu sync.Mutex
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got[r.Method] = r.Header.Get(HeaderRequest)
		paths = append(paths, r.Method+" "+r.URL.RequestURI())
		mu.Unlock()
		switch r.URL.Path {
		case NodeActionPath("w1", SuffixCordon), NodeActionPath("w1", SuffixUncordon):
			serveJSON(w, 200, Cordon{NodeID: "w1", Cordoned: strings.HasSuffix(r.URL.Path, SuffixCordon)})
		case PathStatus:
			serveJSON(w, 200, Status{})
		default:
			http.NotFound(w, r)
		}
	})
	c := newClient(t, []string{s.URL}, ClientOptions{Token: secretToken})
	ctx := context.Background()
	if res, err := c.CordonNode(ctx, "w1", true); err != nil || !res.Cordoned {
		t.Fatalf("CordonNode = %+v, %v", res, err)
	}
	if res, err := c.UncordonNode(ctx, "w1"); err != nil || res.Cordoned {
		t.Fatalf("UncordonNode = %+v, %v", res, err)
	}
	if _, err := c.Status(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got[http.MethodPost] != "1" || got[http.MethodGet] != "" {
		t.Fatalf("%s by method: %v, want 1 on POST only", HeaderRequest, got)
	}
	want := []string{"POST /api/v1/nodes/w1/cordon?persist=true", "POST /api/v1/nodes/w1/uncordon", "GET /api/v1/status"}
	if !slices.Equal(paths, want) {
		t.Fatalf("requests %q, want %q", paths, want)
	}
}

// TestAttemptTimeoutFailsOverFromAHungServer: the first base URL accepts
// connections and never answers (a stopped process); a call costs one
// attempt deadline, then the next answers, and the next call goes to the
// one that answered first (issue 38: 10 s per command before).
func TestAttemptTimeoutFailsOverFromAHungServer(t *testing.T) {
	hung, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hung.Close()
	go func() {
		for {
			c, err := hung.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()
	good := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(Cluster{Meta: Meta{SchemaVersion: 1}, ClusterID: "c", ServedBy: "coord-b"})
	}))
	defer good.Close()
	const attempt = 300 * time.Millisecond
	c, err := NewClient([]string{"http://" + hung.Addr().String(), good.URL}, ClientOptions{Timeout: 10 * time.Second, AttemptTimeout: attempt})
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	cl, err := c.Cluster(context.Background())
	first := time.Since(began)
	if err != nil || cl.ServedBy != "coord-b" {
		t.Fatalf("Cluster = %+v, %v", cl, err)
	}
	if first < attempt || first > attempt+2*time.Second {
		t.Fatalf("first call took %s: want one attempt deadline (%s) and the answer", first, attempt)
	}
	began = time.Now()
	if _, err := c.Cluster(context.Background()); err != nil {
		t.Fatal(err)
	}
	if second := time.Since(began); second >= attempt {
		t.Fatalf("second call took %s: it should go straight to the server that answered", second)
	}
}
