package datav1_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/talonhq/talon/internal/blob"
	"github.com/talonhq/talon/internal/datav1"
)

func TestFetchVerifiesAnswers(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		want    error
	}{
		{"content-length too short", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set(datav1.ObjectSizeHeader, "1000")
			w.Header().Set("Content-Length", "50")
			w.Write(make([]byte, 50))
		}, datav1.ErrProtocol},
		{"object size missing", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "100")
			w.Write(make([]byte, 100))
		}, datav1.ErrProtocol},
		{"no content-length", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set(datav1.ObjectSizeHeader, "1000")
			w.(http.Flusher).Flush() // chunked
			w.Write(make([]byte, 100))
		}, datav1.ErrProtocol},
		{"body cut short", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set(datav1.ObjectSizeHeader, "1000")
			w.Header().Set("Content-Length", "100")
			w.Write(make([]byte, 10))
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}, datav1.ErrProtocol},
		{"unknown error status", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "teapot", http.StatusTeapot)
		}, datav1.ErrServer},
		{"404 for a path, not an object", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(404)
			w.Write([]byte(`{"error":{"code":"unknown_path","message":"x"}}`))
		}, datav1.ErrServer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
			defer srv.Close()
			_, err := datav1.Fetch(context.Background(), srv.Client(), datav1.Request{
				Addr: strings.TrimPrefix(srv.URL, "http://"), Object: "obj", Offset: 0, Length: 100,
			})
			if !errors.Is(err, tt.want) {
				t.Fatalf("Fetch = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestFetchRequest(t *testing.T) {
	var got *http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		w.Header().Set(datav1.ObjectSizeHeader, "3")
		w.Header().Set(datav1.VersionHeader, "00000000000000ff")
		w.Write([]byte("abc"))
	}))
	defer srv.Close()
	res, err := datav1.Fetch(context.Background(), srv.Client(), datav1.Request{
		Addr: strings.TrimPrefix(srv.URL, "http://"), Object: "a dir/b%c?#d", Offset: 0, Length: 10, Version: 0xabc,
	})
	if err != nil || string(res.Data) != "abc" || res.Version != 0xff || res.ObjectSize != 3 {
		t.Fatalf("Fetch = %+v, %v", res, err)
	}
	if got.URL.Path != "/v1/objects/a dir/b%c?#d" || got.URL.RawQuery != "offset=0&length=10&replicas=1" {
		t.Fatalf("request path %q query %q", got.URL.Path, got.URL.RawQuery)
	}
	if v := got.Header.Get(datav1.VersionHeader); v != "0000000000000abc" {
		t.Fatalf("version header %q", v)
	}
}

func TestFetchLocalErrors(t *testing.T) {
	hc := &http.Client{}
	// A port nobody listens on: a connection error, not an *Error, so the
	// client library falls back to a replica.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, err = datav1.Fetch(context.Background(), hc, datav1.Request{Addr: addr, Object: "o", Length: 1})
	var de *datav1.Error
	if err == nil || errors.As(err, &de) {
		t.Fatalf("Fetch from a closed port = %v, want a connection error", err)
	}
	tests := []struct {
		req  datav1.Request
		want error
	}{
		{datav1.Request{Addr: addr, Object: "../x", Length: 1}, blob.ErrInvalidKey},
		{datav1.Request{Addr: addr, Object: "o", Length: 0}, datav1.ErrBadRequest},
		{datav1.Request{Addr: addr, Object: "o", Offset: -1, Length: 1}, datav1.ErrBadRequest},
		{datav1.Request{Addr: addr, Object: "o", Length: 1, Replicas: 17}, datav1.ErrBadRequest},
	}
	for _, tt := range tests {
		if _, err := datav1.Fetch(context.Background(), hc, tt.req); !errors.Is(err, tt.want) {
			t.Errorf("Fetch(%+v) = %v, want %v", tt.req, err, tt.want)
		}
	}
}

// writerOnly hides every method but Write, as most writers a caller
// passes to FetchTo (an io.Pipe, a hash, a network stream) do.
type writerOnly struct{ w io.Writer }

func (w writerOnly) Write(p []byte) (int, error) { return w.w.Write(p) }

// TestFetchReusesConnections: reads of whole bodies, into memory or
// through a plain writer, leave the connection to the keep-alive pool, so
// a client reading block after block from one worker opens one connection.
func TestFetchReusesConnections(t *testing.T) {
	const size = 3<<20 + 17 // several socket buffers, not a multiple of any buffer
	body := make([]byte, size)
	for i := range body {
		body[i] = byte(i*31 + i>>11)
	}
	var opened atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(datav1.ObjectSizeHeader, strconv.Itoa(size))
		w.Header().Set("Content-Length", strconv.Itoa(size))
		w.Write(body)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	req := datav1.Request{Addr: strings.TrimPrefix(srv.URL, "http://"), Object: "obj", Length: size}
	for i := range 6 {
		if i%2 == 0 {
			res, err := datav1.Fetch(context.Background(), srv.Client(), req)
			if err != nil || !bytes.Equal(res.Data, body) {
				t.Fatalf("Fetch %d: %d bytes, %v", i, len(res.Data), err)
			}
			// The buffer was sized for the body: never grown (a copy of
			// everything read so far) when the last read saw EOF.
			if cap(res.Data) > size+size/8 {
				t.Fatalf("Fetch %d: a %d-byte body in a buffer of %d", i, size, cap(res.Data))
			}
			continue
		}
		var got bytes.Buffer
		res, err := datav1.FetchTo(context.Background(), srv.Client(), req, writerOnly{&got})
		if err != nil || res.N != size || !bytes.Equal(got.Bytes(), body) {
			t.Fatalf("FetchTo %d: %d bytes, %v", i, got.Len(), err)
		}
	}
	if n := opened.Load(); n != 1 {
		t.Fatalf("6 sequential fetches opened %d connections, want 1 (keep-alive)", n)
	}
}
