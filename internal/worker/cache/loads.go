package cache

// This file is the loads in flight: one per block, owned by the cache,
// whose waiters get their descriptors at commit (see doc.go), the streams
// of their attempts (stream.go) and the read-ahead count (prefetch.go).

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/talonhq/talon/internal/blob"
	"github.com/talonhq/talon/internal/worker/stats"
)

// load is a block load in flight. done is closed when the load has ended;
// then err is set, or the block is committed and files holds one open
// descriptor of its file for each waiter. Handing descriptors over at
// commit, under index.mu, means a waiter cannot lose the block to an
// eviction between the load and its own open.
type load struct {
	done chan struct{}
	err  error // written before done is closed

	index    int64     // the block's index
	info     blob.Info // the object's size and version the load reads
	prefetch bool      // started by Prefetch: counted in loads.prefetches

	// guarded by loads.mu:
	waiters int
	ended   bool
	entry   *entry
	files   []*os.File
	// stream is the current attempt to fill the block's temporary file
	// (nil before the first), for streaming readers; wake is closed and
	// replaced when a new attempt begins.
	stream *stream
	wake   chan struct{}
}

// changedLocked wakes the streaming readers waiting for an attempt.
func (l *load) changedLocked() {
	close(l.wake)
	l.wake = make(chan struct{})
}

// take returns the waiter's descriptor of a committed load, or nil.
// Called with loads.mu held.
func (l *load) take() *os.File {
	if len(l.files) == 0 {
		return nil
	}
	f := l.files[len(l.files)-1]
	l.files = l.files[:len(l.files)-1]
	return f
}

// openFilesLocked opens one descriptor of e's file per waiter.
func (l *load) openFilesLocked(e *entry) error {
	for range l.waiters {
		f, err := os.Open(e.path)
		if err != nil {
			for _, f := range l.files {
				f.Close()
			}
			l.files = nil
			return fmt.Errorf("%w: open loaded block file: %w", ErrIO, err)
		}
		l.files = append(l.files, f)
	}
	return nil
}

// loads is the block loads in flight, the streams of their attempts and
// the count of read-ahead loads: what a miss, a streamed chunk and a
// prefetch share. Its methods take mu themselves but the ...Locked ones,
// which run with it held.
//
// Lock order: mu before idx.mu. mu is held (with idx.mu) while a load
// commits, so that a block is never both resident and loading and a
// streaming reader, which opens an attempt's file under mu, never opens
// it after its rename or deletion. A streamed chunk (progress) takes mu
// only, never idx.mu.
type loads struct {
	idx           *index // consulted under mu
	life          *life
	stats         *stats.Stats
	maxPrefetches int
	// run is the body of a load, run in a goroutine registered with life.
	run func(id blockID, info blob.Info, l *load)

	mu         sync.Mutex // guards the fields below, the mutable fields of every load and every stream
	m          map[blockID]*load
	prefetches int // loads started by Prefetch still in flight
}

func newLoads(idx *index, lf *life, st *stats.Stats, maxPrefetches int, run func(blockID, blob.Info, *load)) *loads {
	return &loads{idx: idx, life: lf, stats: st, maxPrefetches: maxPrefetches, run: run, m: make(map[blockID]*load)}
}

// startLocked counts a miss and returns the one load of block id,
// starting it if none runs.
func (ls *loads) startLocked(id blockID, info blob.Info) (*load, error) {
	if ls.life.isClosed() {
		return nil, ErrClosed
	}
	ls.stats.Miss()
	if l := ls.m[id]; l != nil {
		return l, nil
	}
	return ls.newLocked(id, info)
}

// newLocked starts the load of block id.
func (ls *loads) newLocked(id blockID, info blob.Info) (*load, error) {
	if !ls.life.enter() {
		return nil, ErrClosed
	}
	return ls.launchLocked(id, info), nil
}

// launchLocked starts the load of block id in a goroutine the caller has
// registered with life.
func (ls *loads) launchLocked(id blockID, info blob.Info) *load {
	l := &load{done: make(chan struct{}), wake: make(chan struct{}), index: id.index, info: info}
	ls.m[id] = l
	go ls.run(id, info, l)
	return l
}

// waitLocked waits for load l, of which the caller is a counted waiter,
// and takes its descriptor and entry; the error is the load's or ctx's.
// Called with mu held; releases it.
func (ls *loads) waitLocked(ctx context.Context, l *load) (*os.File, *entry, error) {
	ls.mu.Unlock()
	select {
	case <-l.done:
	case <-ctx.Done():
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if !l.ended {
		l.waiters--
		return nil, nil, ctx.Err()
	}
	if l.err != nil {
		return nil, nil, l.err
	}
	return l.take(), l.entry, nil
}

// end ends load l of block id: when err is nil it commits e, fetched to
// tmpPath, and opens its waiters' descriptors, under idx.mu. It returns
// the load's error.
func (ls *loads) end(id blockID, l *load, e *entry, tmpPath string, err error) error {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if err == nil {
		err = ls.commitLocked(l, e, tmpPath)
	}
	delete(ls.m, id)
	if l.prefetch {
		ls.prefetches--
	}
	l.ended, l.entry, l.err = true, e, err
	close(l.done)
	return err
}

func (ls *loads) commitLocked(l *load, e *entry, tmpPath string) error {
	ls.idx.mu.Lock()
	defer ls.idx.mu.Unlock()
	if err := ls.idx.commitLocked(e, tmpPath); err != nil {
		return err
	}
	return l.openFilesLocked(e)
}

// cold reports whether block id at info is neither resident nor loading.
func (ls *loads) cold(id blockID, info blob.Info) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.m[id] == nil && !ls.idx.holds(id, info)
}

// slots returns how many more prefetches may start now.
func (ls *loads) slots() int {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.life.isClosed() {
		return 0
	}
	return max(0, ls.maxPrefetches-ls.prefetches)
}

// prefetch starts a read-ahead load of block id at info (see
// Cache.Prefetch); charge is called under mu, only when the load starts.
func (ls *loads) prefetch(id blockID, info blob.Info, charge func() bool) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.life.isClosed() || ls.prefetches >= ls.maxPrefetches || ls.m[id] != nil || ls.idx.holds(id, info) {
		return false
	}
	if !ls.life.enter() {
		return false
	}
	if charge != nil && !charge() {
		ls.life.exit()
		return false
	}
	l := ls.launchLocked(id, info)
	l.prefetch = true
	ls.prefetches++
	ls.stats.Prefetch()
	return true
}
