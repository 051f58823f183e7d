package client_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/datav1"
	"github.com/talonhq/talon/internal/protocol"
)

// TestParallelReadInOrder: with Parallel 4, 40 blocks answered after
// random delays come out whole and in order, at most 4 requests are in
// flight at once, and more than one is (issue 40: talon get read one
// block at a time).
func TestParallelReadInOrder(t *testing.T) {
	const bs, blocks, par = 1000, 40, 4
	body := make([]byte, bs*blocks-7)
	for i := range body {
		body[i] = byte(i * 7)
	}
	var inflight, peak atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inflight.Add(1)
		defer inflight.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
		off, _ := strconv.ParseInt(r.URL.Query().Get("offset"), 10, 64)
		ln, _ := strconv.ParseInt(r.URL.Query().Get("length"), 10, 64)
		end := min(off+ln, int64(len(body)))
		w.Header().Set(datav1.ObjectSizeHeader, strconv.Itoa(len(body)))
		w.Header().Set(datav1.ObjectVersionHeader, "v1")
		w.Header().Set("Content-Length", strconv.FormatInt(end-off, 10))
		_, _ = w.Write(body[off:end])
	}))
	defer srv.Close()
	owners := []protocol.Owner{{NodeID: "w0", DataAddress: strings.TrimPrefix(srv.URL, "http://")}}
	fake := startFake(t, func(req protocol.Message) protocol.Message {
		if _, ok := req.(*protocol.PlacementLookup); ok {
			return &protocol.PlacementResponse{Version: 0x5eed, Owners: owners}
		}
		return &protocol.Pong{}
	})
	c, err := client.New(client.Options{Coordinators: []string{fake.addr}, CacheTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := &client.ObjectReader{Client: c, HTTP: &http.Client{Timeout: 10 * time.Second}, BlockSize: bs, Replicas: 1, Parallel: par}
	var out bytes.Buffer
	res, err := r.Read(context.Background(), "obj", &out)
	if err != nil || !bytes.Equal(out.Bytes(), body) {
		t.Fatalf("Read = %+v, %v; right bytes %t", res, err, bytes.Equal(out.Bytes(), body))
	}
	if res.Blocks != blocks {
		t.Errorf("%d blocks counted, want %d", res.Blocks, blocks)
	}
	if p := peak.Load(); p > par || p < 2 {
		t.Errorf("at most %d requests in flight at once, want 2 to %d", p, par)
	}
}
