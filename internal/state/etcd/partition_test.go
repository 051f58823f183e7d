package etcd

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/testenv"
)

// proxy forwards TCP connections from a loopback port to target until it
// is cut: cutting closes every connection and refuses new ones, like a
// network partition between the store and etcd.
type proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex // guards the fields below
	cut   bool
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func startProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, conns: make(map[net.Conn]struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.setCut(true)
		p.wg.Wait()
	})
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.wg.Add(2)
		p.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			defer p.wg.Done()
			io.Copy(dst, src)
			dst.Close()
			src.Close()
		}
		go pipe(up, c)
		go pipe(c, up)
	}
}

// setCut cuts (closing every connection) or heals the link.
func (p *proxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			c.Close()
		}
		clear(p.conns)
	}
}

// TestCacheRecoversFromCompaction cuts the store off from etcd, writes and
// compacts past the snapshot cache's revision meanwhile, and heals the
// link: the cache's watch resumes at a compacted revision, so the cache
// lists again; snapshots fail while cut off and then show the new data.
func TestCacheRecoversFromCompaction(t *testing.T) {
	testenv.SkipIfShort(t)
	e := testenv.StartEtcd(t, testenv.EtcdOptions{})
	u, err := url.Parse(e.Endpoints()[0])
	if err != nil {
		t.Fatal(err)
	}
	p := startProxy(t, u.Host)
	o := optionsFor(e, true)
	o.Endpoints = []string{p.addr()}
	s := newStore(t, o)
	direct := newStore(t, optionsFor(e, false))
	ctx := testCtx(t)
	cid := uniqueCluster(t)

	if _, err := s.UpsertNode(ctx, record(cid, cluster.RoleWorker, "w1", "i", 1), time.Minute); err != nil {
		t.Fatal(err)
	}
	if snap, err := s.Snapshot(ctx, cid); err != nil || len(snap.Records) != 1 {
		t.Fatalf("before: %+v %v", snap, err)
	}
	resyncs := s.Stats().CacheResyncs

	p.setCut(true)
	for seq := uint64(2); seq <= 5; seq++ {
		if _, err := direct.UpsertNode(ctx, record(cid, cluster.RoleWorker, "w1", "i", seq), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := direct.UpsertNode(ctx, record(cid, cluster.RoleWorker, "w2", "i", 1), time.Minute); err != nil {
		t.Fatal(err)
	}
	e.Compact(t, 0)
	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, err = s.Snapshot(sctx, cid)
	cancel()
	if !errors.Is(err, state.ErrUnavailable) {
		t.Fatalf("snapshot while cut off: %v, want unavailable", err)
	}

	p.setCut(false)
	deadline := time.Now().Add(30 * time.Second)
	for {
		snap, err := s.Snapshot(ctx, cid)
		if err == nil && len(snap.Records) == 2 && snap.Records[0].HeartbeatSeq == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after healing: %+v %v", snap, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The cache's watch resumed at a compacted revision: it lists again
	// (meanwhile snapshots fall back to range reads).
	for s.Stats().CacheResyncs <= resyncs || !s.cache.isReady() {
		if time.Now().After(deadline) {
			t.Fatalf("cache resyncs %d -> %d, ready %t: want a new list after compaction", resyncs, s.Stats().CacheResyncs, s.cache.isReady())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The cache serves again, and the write path uses it.
	before := s.Stats().CacheSnapshots
	if _, err := s.Snapshot(ctx, cid); err != nil || s.Stats().CacheSnapshots != before+1 {
		t.Fatalf("cache not serving after resync: %v %+v", err, s.Stats())
	}
	res, err := s.UpsertNode(ctx, record(cid, cluster.RoleWorker, "w1", "i", 6), time.Minute)
	if err != nil || res.Decision != cluster.DecisionAdvance {
		t.Fatalf("upsert after resync: %+v %v", res, err)
	}
}

// TestWatchSurvivesRestart keeps a watch open while etcd is killed and
// started again: it resumes where it was, without gaps or duplicates.
func TestWatchSurvivesRestart(t *testing.T) {
	testenv.SkipIfShort(t)
	e := testenv.StartEtcd(t, testenv.EtcdOptions{})
	ctx := testCtx(t)
	s := newStore(t, optionsFor(e, true))
	cid := uniqueCluster(t)
	snap, err := s.Snapshot(ctx, cid)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := s.Watch(wctx, cid, snap.Revision)

	var want []state.Revision
	put := func(seq uint64) {
		t.Helper()
		for {
			res, err := s.UpsertNode(ctx, record(cid, cluster.RoleWorker, "w", "i", seq), time.Minute)
			if err == nil {
				want = append(want, res.Revision)
				return
			}
			if !state.Retryable(err) || ctx.Err() != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	put(1)
	put(2)
	e.Kill()
	e.Start()
	put(3)
	put(4)

	var got []state.Revision
	timeout := time.After(20 * time.Second)
	for len(got) < len(want) {
		select {
		case b, ok := <-ch:
			if !ok || b.Err != nil {
				t.Fatalf("watch ended: %v", b.Err)
			}
			for _, ev := range b.Events {
				got = append(got, ev.Revision)
			}
		case <-timeout:
			t.Fatalf("got events at %v, want %v", got, want)
		}
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("events at %v, want %v", got, want)
		}
	}
}

// TestNewErrors checks the sentinels New reports: wrong credentials, an
// unreachable server, and a TLS server the client cannot prove itself to.
func TestNewErrors(t *testing.T) {
	testenv.SkipIfShort(t)
	e := testenv.StartEtcd(t, testenv.EtcdOptions{Auth: true, TLS: true, ClientCertAuth: true})
	ctx := testCtx(t)

	o := optionsFor(e, true)
	o.Password = "wrong"
	if _, err := New(ctx, o); !errors.Is(err, state.ErrUnauthenticated) {
		t.Fatalf("wrong password: %v, want unauthenticated", err)
	}

	o = optionsFor(e, true)
	o.TLS.CertFile, o.TLS.KeyFile = "", ""
	o.DialTimeout = 2 * time.Second
	if _, err := New(ctx, o); !errors.Is(err, state.ErrUnavailable) {
		t.Fatalf("no client certificate: %v, want unavailable", err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	o = optionsFor(e, true)
	o.Endpoints = []string{"https://" + addr}
	o.DialTimeout = time.Second
	if _, err := New(ctx, o); !errors.Is(err, state.ErrUnavailable) {
		t.Fatalf("refused: %v, want unavailable", err)
	}

	// Without a username New does not talk to etcd; the first request
	// reports the server unreachable.
	o.Username, o.Password = "", ""
	s := newStore(t, o)
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := s.CheckReady(rctx); !errors.Is(err, state.ErrUnavailable) {
		t.Fatalf("CheckReady against a closed port: %v, want unavailable", err)
	}
}
