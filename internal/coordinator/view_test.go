package coordinator

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestBatcher checks the two batching rules: a caller never gets a view
// from a read that began before it asked, and a failed read fails the
// callers queued behind it at once.
func TestBatcher(t *testing.T) {
	var started atomic.Int64
	release := make(chan error)
	var wg sync.WaitGroup
	b := &batcher{base: context.Background(), timeout: time.Minute, wg: &wg, maxInflight: 1, fetch: func(ctx context.Context, _ uint64) (*View, error) {
		n := started.Add(1)
		if err := <-release; err != nil {
			return nil, err
		}
		return &View{ObservedAt: time.Unix(n, 0)}, nil
	}}
	get := func() chan *View {
		ch := make(chan *View, 1)
		go func() {
			v, err := b.get(context.Background())
			if err != nil {
				v = nil
			}
			ch <- v
		}()
		return ch
	}
	first := get()
	waitFor(t, "first read started", func() bool { return started.Load() == 1 })
	// Two callers arrive while read 1 is in flight: they share read 2.
	second, third := get(), get()
	time.Sleep(20 * time.Millisecond)
	release <- nil // read 1 succeeds
	if v := <-first; v == nil || v.ObservedAt.Unix() != 1 {
		t.Fatalf("first caller got %v, want read 1", v)
	}
	waitFor(t, "second read started", func() bool { return started.Load() == 2 })
	release <- nil
	for _, ch := range []chan *View{second, third} {
		if v := <-ch; v == nil || v.ObservedAt.Unix() != 2 {
			t.Fatalf("caller that arrived during read 1 got %v, want read 2", v)
		}
	}
	if started.Load() != 2 {
		t.Fatalf("%d reads for three callers, want 2", started.Load())
	}

	// Failure: a caller queued behind a failing read fails with it and
	// no further read starts.
	failing := get()
	waitFor(t, "third read started", func() bool { return started.Load() == 3 })
	queued := get()
	time.Sleep(20 * time.Millisecond)
	release <- errors.New("store down")
	if v := <-failing; v != nil {
		t.Fatal("failed read returned a view")
	}
	if v := <-queued; v != nil {
		t.Fatal("queued caller got a view from a failed batch")
	}
	if started.Load() != 3 {
		t.Fatalf("a read started after a failure with no caller waiting: %d", started.Load())
	}
	wg.Wait()
}

// TestBatcherPipelines: with room for several reads, a caller arriving
// while one is in flight starts the next at once (it does not wait a round
// trip), still never joins a read that already began, and each read gets
// the next sequence number.
func TestBatcherPipelines(t *testing.T) {
	var wg sync.WaitGroup
	release := make(chan struct{})
	var mu sync.Mutex
	var seqs []uint64
	b := &batcher{base: context.Background(), timeout: time.Minute, wg: &wg, maxInflight: 2, fetch: func(ctx context.Context, seq uint64) (*View, error) {
		mu.Lock()
		seqs = append(seqs, seq)
		mu.Unlock()
		<-release
		return &View{ObservedAt: time.Unix(int64(seq), 0)}, nil
	}}
	started := func() int { mu.Lock(); defer mu.Unlock(); return len(seqs) }
	res := make(chan *View, 3)
	for i := range 3 {
		go func() { v, _ := b.get(context.Background()); res <- v }()
		if i < 2 {
			waitFor(t, "read started", func() bool { return started() == i+1 })
		}
	}
	time.Sleep(20 * time.Millisecond)
	if n := started(); n != 2 {
		t.Fatalf("%d reads running, want 2 (the limit)", n)
	}
	close(release)
	got := map[int64]int{}
	for range 3 {
		v := <-res
		got[v.ObservedAt.Unix()]++
	}
	wg.Wait()
	// Reads 1 and 2 ran at once; the third caller waited for read 3.
	if got[1] != 1 || got[2] != 1 || got[3] != 1 || !slices.Equal(seqs, []uint64{1, 2, 3}) {
		t.Fatalf("views by read %v, sequence numbers %v", got, seqs)
	}
}
