package dataserver_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/datav1"
	"github.com/talonhq/talon/internal/worker/cache"
	"github.com/talonhq/talon/internal/worker/dataserver"
)

// TestWarmupBound: during warm-up a worker loads at most the warm-up rate
// of cold blocks from the store; a read past it is refused 503 warming_up
// with Retry-After (the client's next owner serves it), resident blocks
// are never refused, and after the period nothing is bounded.
func TestWarmupBound(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	e := newEnvWith(t, bs, 1<<20, nil, func(c *dataserver.Config) {
		c.WarmupRate, c.WarmupPeriod, c.WarmupRefuse, c.Clock, c.ReadAhead = 2, time.Minute, true, clock, -1
	})
	for i := range 6 {
		e.put(t, fmt.Sprintf("o%d", i), pattern(i, bs))
	}
	// The burst is the rate: two cold blocks load, the third is refused.
	for i := range 2 {
		if _, err := e.fetch(fmt.Sprintf("o%d", i), 0, bs); err != nil {
			t.Fatalf("cold read %d within the warm-up rate: %v", i, err)
		}
	}
	reads := e.src.reads.Load()
	_, err := e.fetch("o2", 0, bs)
	var de *datav1.Error
	if !errors.As(err, &de) || de.Code != datav1.CodeWarmingUp || de.Status != http.StatusServiceUnavailable || !errors.Is(err, datav1.ErrUnavailable) {
		t.Fatalf("cold read past the warm-up rate: %v; want 503 warming_up", err)
	}
	if e.src.reads.Load() != reads {
		t.Fatal("a refused read loaded from the store")
	}
	// A resident block is served whatever the rate.
	if res, err := e.fetch("o0", 0, bs); err != nil || !bytes.Equal(res.Data, pattern(0, bs)) {
		t.Fatalf("hit during warm-up: %v", err)
	}
	// A client with no other owner to ask (last=1) waits for the rate
	// instead; the clock stands still, so the test gives it one token's
	// wait of real time: it must not be refused.
	done := make(chan error, 1)
	go func() {
		_, err := datav1.Fetch(context.Background(), e.client, datav1.Request{Addr: e.addr, Object: "o2", Length: bs, Replicas: 2, Version: e.own.version, Last: true})
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	now.Add(int64(500 * time.Millisecond))
	if err := <-done; err != nil {
		t.Fatalf("last=1 read past the rate: %v; want it to wait, not be refused", err)
	}
	// Half a second later one more token.
	now.Add(int64(500 * time.Millisecond))
	if _, err := e.fetch("o2", 0, bs); err != nil {
		t.Fatalf("cold read after the rate refilled: %v", err)
	}
	// After the period, no bound.
	now.Add(int64(2 * time.Minute))
	for i := 3; i < 6; i++ {
		if _, err := e.fetch(fmt.Sprintf("o%d", i), 0, bs); err != nil {
			t.Fatalf("cold read %d after warm-up: %v", i, err)
		}
	}
	e.settle(t, 9)
	if got := e.st.WarmupDeferred(); got != 1 {
		t.Fatalf("warm-up deferred %d loads, want 1", got)
	}
}

// TestWarmupWaits: with one replica (no next owner) a read past the rate
// waits for it instead of being refused.
func TestWarmupWaits(t *testing.T) {
	e := newEnvWith(t, bs, 1<<20, nil, func(c *dataserver.Config) {
		c.WarmupRate, c.WarmupPeriod, c.WarmupRefuse, c.ReadAhead = 20, time.Minute, false, -1
	})
	for i := range 25 {
		e.put(t, fmt.Sprintf("o%d", i), pattern(i, bs))
	}
	start := time.Now()
	for i := range 25 {
		if _, err := e.fetch(fmt.Sprintf("o%d", i), 0, bs); err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
	}
	// 20 tokens at once, then 20 a second: the last 5 wait about 250ms.
	if e.st.WarmupDeferred() != 0 {
		t.Fatalf("%d loads refused with WarmupRefuse off", e.st.WarmupDeferred())
	}
	t.Logf("25 cold reads at a warm-up rate of 20/s took %s", time.Since(start))
}

// TestWarmupBoundsDigests: a digest of a cold block loads it from the
// store as a read does, so it takes the warm-up's tokens too: past the
// rate it is refused 503 warming_up and the store is not read (before,
// digests skipped the bound: any number of them went to the store).
func TestWarmupBoundsDigests(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	e := newEnvWith(t, bs, 1<<20, nil, func(c *dataserver.Config) {
		c.WarmupRate, c.WarmupPeriod, c.WarmupRefuse, c.Clock, c.ReadAhead = 2, time.Minute, true, clock, -1
	})
	for i := range 4 {
		e.put(t, fmt.Sprintf("o%d", i), pattern(i, bs))
	}
	digest := func(object string) error {
		_, err := datav1.FetchDigest(context.Background(), e.client, datav1.Request{Addr: e.addr, Object: object, Length: bs, Replicas: 2, Version: e.own.version})
		return err
	}
	for i := range 2 {
		if err := digest(fmt.Sprintf("o%d", i)); err != nil {
			t.Fatalf("cold digest %d within the warm-up rate: %v", i, err)
		}
	}
	reads := e.src.reads.Load()
	err := digest("o2")
	var de *datav1.Error
	if !errors.As(err, &de) || de.Code != datav1.CodeWarmingUp {
		t.Fatalf("cold digest past the warm-up rate: %v; want 503 warming_up", err)
	}
	if e.src.reads.Load() != reads {
		t.Fatal("a refused digest loaded from the store")
	}
	if err := digest("o0"); err != nil {
		t.Fatalf("digest of a resident block during warm-up: %v", err)
	}
}

// TestWarmupChargesOnlyStartedLoads: during warm-up, every block load
// from the store is charged to the warm-up bound, and counted admitted,
// exactly once, and a read-ahead the cache does not start (its
// read-ahead loads all in flight) is neither. Before, read-ahead took a
// token and counted an admitted load for each block it asked for, and
// the cache then refused most: 16 blocks of read-ahead past 8 slots
// spent 16 tokens for 8 loads.
func TestWarmupChargesOnlyStartedLoads(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	e := newEnvWith(t, bs, 1<<20, nil, func(c *dataserver.Config) {
		c.WarmupRate, c.WarmupPeriod, c.WarmupRefuse, c.Clock, c.ReadAhead = 64, time.Minute, true, func() time.Time { return now }, 16
	})
	e.put(t, "obj", pattern(1, 40*bs))
	// Read-ahead's loads (blocks 2 on) stay in flight until released, so
	// that the cache's 8 read-ahead slots (DefaultMaxPrefetches) fill.
	e.src.holdFrom.Store(2 * bs)
	for b := range int64(2) {
		if _, err := e.fetch("obj", b*bs, bs); err != nil {
			t.Fatalf("read of block %d: %v", b, err)
		}
	}
	e.settle(t, 2)
	started := e.st.Prefetches()
	close(e.src.hold)
	waitLoaded(t, e.st)
	admitted, reads := e.st.WarmupAdmitted(), uint64(e.src.reads.Load())
	t.Logf("%d store reads, %d prefetches, %d loads admitted by the warm-up bound", reads, started, admitted)
	if admitted != reads {
		t.Fatalf("the warm-up bound admitted %d loads for %d store reads: a read-ahead that did not start was charged", admitted, reads)
	}
	if started != cache.DefaultMaxPrefetches {
		t.Fatalf("%d read-ahead loads started, want the cache's %d slots", started, cache.DefaultMaxPrefetches)
	}
}
