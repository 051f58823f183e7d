package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/datav1"
	"github.com/talonhq/talon/internal/placement"
	"github.com/talonhq/talon/internal/protocol"
	"github.com/talonhq/talon/internal/testsupport"
)

// fakeCoordinator speaks the control protocol on loopback and answers
// each request with what answer returns; a nil answer means never answer.
type fakeCoordinator struct {
	addr string
}

func startFake(t *testing.T, answer func(req protocol.Message) protocol.Message) *fakeCoordinator {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, nc)
			mu.Unlock()
			wg.Go(func() {
				dec, enc := protocol.NewDecoder(nc), protocol.NewEncoder(nc)
				for {
					f, err := dec.ReadFrame()
					if err != nil {
						return
					}
					req, err := f.Message()
					if err != nil {
						return
					}
					if resp := answer(req); resp != nil {
						if enc.Encode(f.RequestID, resp) != nil {
							return
						}
					}
				}
			})
		}
	})
	return &fakeCoordinator{addr: ln.Addr().String()}
}

// TestLookupAnswerNeverMovesTheVersionBack: a push of a new version
// arrives while a lookup is in flight, and the lookup then answers with
// the version it was computed from. The client keeps the pushed version
// and does not cache the older answer (the old client adopted the answer's
// version and cached old owners until the TTL).
func TestLookupAnswerNeverMovesTheVersionBack(t *testing.T) {
	const oldV, newV = 0x1111, 0x2222
	release := make(chan struct{})
	fake := startFake(t, func(req protocol.Message) protocol.Message {
		if _, ok := req.(*protocol.PlacementLookup); ok {
			<-release
			return &protocol.PlacementResponse{Version: oldV, Owners: []protocol.Owner{{NodeID: "w-old", DataAddress: "127.0.0.1:1"}}}
		}
		return &protocol.Pong{}
	})
	c, err := client.New(client.Options{Coordinators: []string{fake.addr}, CacheTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	done := make(chan client.Placement, 1)
	go func() {
		p, err := c.Lookup(context.Background(), "k", 1)
		if err != nil {
			t.Error(err)
		}
		done <- p
	}()
	time.Sleep(50 * time.Millisecond) // the lookup is in flight
	c.ObserveVersion(newV)            // a push arrives
	close(release)
	p := <-done
	if p.Version != oldV || p.Cached {
		t.Fatalf("answer %+v", p)
	}
	if v, _ := c.Version(); v != newV {
		t.Fatalf("client version %x after a late answer, want the pushed %x", v, newV)
	}
	if again, err := c.Lookup(context.Background(), "k", 1); err != nil || again.Cached {
		t.Fatalf("the older answer was cached: %+v, %v", again, err)
	}
}

// TestWatchLeavesASilentCoordinator: the first address accepts but never
// answers; the watch must move on to the next coordinator (the old watch
// waited forever for the subscription's answer).
func TestWatchLeavesASilentCoordinator(t *testing.T) {
	silent := startFake(t, func(protocol.Message) protocol.Message { return nil })
	live := startFake(t, func(req protocol.Message) protocol.Message {
		if _, ok := req.(*protocol.Subscribe); ok {
			return &protocol.EpochBump{Version: 42}
		}
		return &protocol.Pong{}
	})
	c, err := client.New(client.Options{Coordinators: []string{silent.addr, live.addr},
		WatchProbeInterval: 100 * time.Millisecond, WatchProbeTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got := make(chan uint64, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Watch(ctx, func(v uint64) { got <- v }) }()
	select {
	case v := <-got:
		if v != 42 {
			t.Fatalf("version %d, want 42", v)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the watch never left the silent coordinator")
	}
	cancel()
	<-done
}

// TestWatchLeavesACoordinatorThatStopsAnswering: the first coordinator
// answers the subscription, then stops answering; the watch's probe notices
// and it moves to the next one.
func TestWatchLeavesACoordinatorThatStopsAnswering(t *testing.T) {
	stalls := startFake(t, func(req protocol.Message) protocol.Message {
		if _, ok := req.(*protocol.Subscribe); ok {
			return &protocol.EpochBump{Version: 1}
		}
		return nil // pings go unanswered
	})
	live := startFake(t, func(req protocol.Message) protocol.Message {
		if _, ok := req.(*protocol.Subscribe); ok {
			return &protocol.EpochBump{Version: 2}
		}
		return &protocol.Pong{}
	})
	c, err := client.New(client.Options{Coordinators: []string{stalls.addr, live.addr},
		WatchProbeInterval: 100 * time.Millisecond, WatchProbeTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Watch(ctx, nil) }()
	testsupport.WaitFor(t, 5*time.Second, "the watch on the live coordinator", func() bool {
		v, ok := c.Version()
		return ok && v == 2
	})
	cancel()
	<-done
}

// dataServer answers block reads as a worker would: wrongOwner answers 421
// with its own (older) placement version; otherwise it serves data.
func dataServer(t *testing.T, data []byte, wrongOwner bool, hits *sync.Map) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Store(r.Host, true)
		if wrongOwner {
			w.Header().Set(datav1.VersionHeader, placement.Version(0x0bad).String())
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusMisdirectedRequest)
			var body datav1.ErrorBody
			body.Error.Code, body.Error.Message = datav1.CodeWrongOwner, "not mine"
			_ = json.NewEncoder(w).Encode(body)
			return
		}
		off, _ := strconv.ParseInt(r.URL.Query().Get("offset"), 10, 64)
		n, _ := strconv.ParseInt(r.URL.Query().Get("length"), 10, 64)
		end := min(off+n, int64(len(data)))
		w.Header().Set(datav1.ObjectSizeHeader, strconv.Itoa(len(data)))
		w.Header().Set(datav1.ObjectVersionHeader, "v1") // a store that names versions
		w.Header().Set(datav1.VersionHeader, placement.Version(0x5eed).String())
		w.Header().Set("Content-Length", strconv.FormatInt(end-off, 10))
		_, _ = w.Write(data[off:end])
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestWrongOwnerTriesTheNextReplica: the first owner disowns the block;
// the reader skips it, reads from the second replica, and does not adopt
// the worker's version (the old reader adopted it, looked the key up again
// and gave up after three wrong-owner answers without trying the second).
func TestWrongOwnerTriesTheNextReplica(t *testing.T) {
	data := []byte(strings.Repeat("talon", 100))
	var hits sync.Map
	bad := dataServer(t, data, true, &hits)
	good := dataServer(t, data, false, &hits)
	const coordV = 0x5eed
	fake := startFake(t, func(req protocol.Message) protocol.Message {
		if _, ok := req.(*protocol.PlacementLookup); ok {
			return &protocol.PlacementResponse{Version: coordV, Owners: []protocol.Owner{
				{NodeID: "bad", DataAddress: strings.TrimPrefix(bad.URL, "http://")},
				{NodeID: "good", DataAddress: strings.TrimPrefix(good.URL, "http://")},
			}}
		}
		return &protocol.Pong{}
	})
	c, err := client.New(client.Options{Coordinators: []string{fake.addr}, CacheTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := &client.ObjectReader{Client: c, HTTP: http.DefaultClient, BlockSize: 1 << 20, Replicas: 2}
	var out strings.Builder
	n, err := r.ReadObject(context.Background(), "obj", &out)
	if err != nil || n != int64(len(data)) || out.String() != string(data) {
		t.Fatalf("ReadObject = %d, %v", n, err)
	}
	if v, _ := c.Version(); v != coordV {
		t.Fatalf("client version %x after a wrong-owner answer, want the coordinator's %x", v, coordV)
	}
	for _, srv := range []*httptest.Server{bad, good} {
		if _, asked := hits.Load(strings.TrimPrefix(srv.URL, "http://")); !asked {
			t.Fatalf("owner %s was never asked", srv.URL)
		}
	}
}

// rangeServer serves data as a worker would and records the ranges asked
// ("offset+length"); with wrongOwner it disowns everything.
func rangeServer(t *testing.T, data []byte, wrongOwner bool) (*httptest.Server, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var asked []string
	srv := dataServer(t, data, wrongOwner, &sync.Map{})
	inner := srv.Config.Handler
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.URL.Query().Get("offset")+"+"+r.URL.Query().Get("length"))
		mu.Unlock()
		inner.ServeHTTP(w, r)
	})
	return srv, func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(asked) }
}

// TestReadObjectJoinsBlocksOfOneOwner: consecutive blocks with the same
// owners are read in one request (at most four blocks), once the first
// block has told the object's size; a run falls back to the next owner
// whole.
func TestReadObjectJoinsBlocksOfOneOwner(t *testing.T) {
	const blockSize = 1000
	data := make([]byte, 9*blockSize+10) // ten blocks, the last short
	for i := range data {
		data[i] = byte(i * 7)
	}
	a, askedA := rangeServer(t, data, false)
	b, askedB := rangeServer(t, data, false)
	bad, askedBad := rangeServer(t, data, true)
	addr := func(s *httptest.Server) string { return strings.TrimPrefix(s.URL, "http://") }
	// Owners by block: A A A A A A B B, then blocks 8 and 9 B after a
	// first owner that disowns them.
	owners := map[string][]protocol.Owner{}
	for i, o := range "AAAAAABB" {
		s := map[rune]*httptest.Server{'A': a, 'B': b}[o]
		owners[datav1.BlockKey("obj", int64(i))] = []protocol.Owner{{NodeID: string(o), DataAddress: addr(s)}}
	}
	for i := range int64(2) {
		owners[datav1.BlockKey("obj", 8+i)] = []protocol.Owner{{NodeID: "bad", DataAddress: addr(bad)}, {NodeID: "B", DataAddress: addr(b)}}
	}
	fake := startFake(t, func(req protocol.Message) protocol.Message {
		if l, ok := req.(*protocol.PlacementLookup); ok {
			o := owners[string(l.Key)]
			return &protocol.PlacementResponse{Version: 0x5eed, Owners: o[:min(len(o), int(l.Replicas))]}
		}
		return &protocol.Pong{}
	})
	c, err := client.New(client.Options{Coordinators: []string{fake.addr}, CacheTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := &client.ObjectReader{Client: c, HTTP: http.DefaultClient, BlockSize: blockSize, Replicas: 2}
	var out bytes.Buffer
	n, err := r.ReadObject(context.Background(), "obj", &out)
	if err != nil || n != int64(len(data)) || !bytes.Equal(out.Bytes(), data) {
		t.Fatalf("ReadObject = %d, %v (%d bytes written)", n, err, out.Len())
	}
	for _, tt := range []struct {
		name      string
		got, want []string
	}{
		// Block 0 alone (the size is not known yet), then blocks 1-4
		// (the cap), 5 (6 has other owners); 6-7; 8-9 (the end) from
		// the second owner after the first disowned them.
		{"A", askedA(), []string{"0+1000", "1000+4000", "5000+1000"}},
		{"B", askedB(), []string{"6000+2000", "8000+2000"}},
		{"bad", askedBad(), []string{"8000+2000"}},
	} {
		if !slices.Equal(tt.got, tt.want) {
			t.Errorf("worker %s was asked %q, want %q", tt.name, tt.got, tt.want)
		}
	}
}
