package datav1_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
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
