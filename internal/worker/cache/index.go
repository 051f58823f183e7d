package cache

// This file is the index and its byte accounting: the resident entries,
// reservations for loads, eviction through the S3-FIFO policy (s3fifo.go),
// and the rename and unlink of block files, which happen under the index's
// mutex so that the file system and the index agree.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync"

	"github.com/talonhq/talon/internal/blob"
	"github.com/talonhq/talon/internal/worker/stats"
)

// index is the set of resident blocks and the bytes they and the loads in
// flight take. Its methods take mu themselves but the ...Locked ones,
// which run with it held.
//
// Lock order: loads.mu before index.mu. A load commits with both held (so
// a block is never resident and loading at once, and a streaming reader
// never opens a renamed file); the index never takes loads.mu. A hit takes
// index.mu only, a streamed chunk loads.mu only.
type index struct {
	capacity int64
	stats    *stats.Stats
	log      *slog.Logger

	mu         sync.Mutex // guards the fields below and the mutable fields of every entry
	entries    map[blockID]*entry
	pol        *policy
	resident   int64         // bytes of resident block files
	reserved   int64         // bytes reserved by loads in flight
	spaceFreed chan struct{} // closed and replaced when space may have been freed
	closed     bool
}

func newIndex(capacity, blockSize int64, st *stats.Stats, log *slog.Logger) *index {
	return &index{
		capacity:   capacity,
		stats:      st,
		log:        log,
		entries:    make(map[blockID]*entry),
		pol:        newPolicy(capacity, blockSize),
		spaceFreed: make(chan struct{}),
	}
}

// close refuses reads and reservations from now on and wakes the loads
// waiting for space.
func (x *index) close() {
	x.mu.Lock()
	x.closed = true
	x.signalLocked()
	x.mu.Unlock()
}

// lookup returns the entry of block id for a read at info: an entry of
// another object size or version is dropped first (the object changed).
// It tells whether the entry's data was verified and, when touch is set,
// records the read for the eviction order.
func (x *index) lookup(id blockID, info blob.Info, touch bool) (e *entry, verified bool, err error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return nil, false, ErrClosed
	}
	e = x.entries[id]
	if e != nil && (e.objSize != info.Size || e.version != info.Version) {
		// The object changed: the block is of another version.
		x.removeLocked(e, false, true)
		return nil, false, nil
	}
	if e != nil && touch {
		x.pol.touch(e)
	}
	if e != nil {
		verified = e.verified
	}
	return e, verified, nil
}

// peek is lookup that changes nothing: no drop, no touch.
func (x *index) peek(id blockID) (e *entry, verified bool, err error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return nil, false, ErrClosed
	}
	e = x.entries[id]
	return e, e != nil && e.verified, nil
}

// holdsLocked reports whether block id is resident at info's size and
// version.
func (x *index) holdsLocked(id blockID, info blob.Info) bool {
	e := x.entries[id]
	return e != nil && e.objSize == info.Size && e.version == info.Version
}

// holds is holdsLocked for a caller that does not hold mu.
func (x *index) holds(id blockID, info blob.Info) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.holdsLocked(id, info)
}

// markVerified records that e's data passed its checksum.
func (x *index) markVerified(e *entry) {
	x.mu.Lock()
	e.verified = true
	x.mu.Unlock()
}

// reserve waits until need bytes fit under the capacity, evicting as
// needed, and reserves them.
func (x *index) reserve(ctx context.Context, need int64) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	for {
		if x.closed {
			return ErrClosed
		}
		for x.resident+x.reserved+need > x.capacity {
			e := x.pol.victim()
			if e == nil {
				break
			}
			x.removeLocked(e, true, true)
		}
		if x.resident+x.reserved+need <= x.capacity {
			x.reserved += need
			return nil
		}
		if x.reserved == 0 {
			return fmt.Errorf("%w: a block file of %d bytes exceeds the capacity of %d", ErrIO, need, x.capacity)
		}
		ch := x.spaceFreed
		x.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			x.mu.Lock()
			return ctx.Err()
		}
		x.mu.Lock()
	}
}

func (x *index) release(need int64) {
	x.mu.Lock()
	x.reserved -= need
	x.signalLocked()
	x.mu.Unlock()
}

// signalLocked wakes loads waiting for space.
func (x *index) signalLocked() {
	close(x.spaceFreed)
	x.spaceFreed = make(chan struct{})
}

// commitLocked renames a fetched block's temporary file into place and
// turns its reservation into the new entry's resident bytes, in one
// critical section so the accounting never drops below the truth.
func (x *index) commitLocked(e *entry, tmpPath string) error {
	x.reserved -= e.fileSize
	x.signalLocked()
	if x.closed {
		unlink(x.log, tmpPath)
		return ErrClosed
	}
	if err := os.Rename(tmpPath, e.path); err != nil {
		unlink(x.log, tmpPath)
		return fmt.Errorf("%w: rename block file into place: %w", ErrIO, err)
	}
	if old := x.entries[e.id]; old != nil {
		// The rename replaced its file.
		x.removeLocked(old, false, false)
	}
	x.addLocked(e)
	return nil
}

// restore indexes the entries found in the directory at Open, oldest
// first, and evicts down to the capacity. It returns how many it evicted.
func (x *index) restore(found []*entry) (evicted int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, e := range found {
		x.addLocked(e)
	}
	for x.resident > x.capacity {
		x.removeLocked(x.pol.victim(), true, true)
		evicted++
	}
	return evicted
}

// usage returns the number of resident blocks, and the resident and
// reserved bytes.
func (x *index) usage() (blocks int, resident, reserved int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.entries), x.resident, x.reserved
}

func (x *index) addLocked(e *entry) {
	x.entries[e.id] = e
	x.pol.insert(e)
	x.resident += e.fileSize
	x.stats.BlockAdded(e.fileSize)
	x.signalLocked() // a new entry is evictable
}

// removeLocked drops e from the index and the accounting, and deletes its
// file when unlink is set.
func (x *index) removeLocked(e *entry, evicted, del bool) {
	x.pol.drop(e)
	delete(x.entries, e.id)
	x.resident -= e.fileSize
	x.stats.BlockRemoved(e.fileSize, evicted)
	if del {
		unlink(x.log, e.path)
	}
	x.signalLocked()
}

// dropIf removes e if it is still the resident entry for its ID, and
// reports whether it was.
func (x *index) dropIf(e *entry, del bool) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.entries[e.id] != e {
		return false
	}
	x.removeLocked(e, false, del)
	return true
}

// evictBytes evicts blocks (policy order) until at least n bytes are freed
// or nothing is left, and returns the bytes freed.
func (x *index) evictBytes(n int64) int64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	var freed int64
	for freed < n {
		e := x.pol.victim()
		if e == nil {
			break
		}
		freed += e.fileSize
		x.removeLocked(e, true, true)
	}
	return freed
}

// free evicts every resident block of the objects match accepts and
// returns how many blocks and data bytes it freed.
func (x *index) free(match func(object string) bool) (blocks, bytes int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for id, e := range x.entries {
		if !match(id.object) {
			continue
		}
		blocks++
		bytes += e.dataLen
		x.removeLocked(e, false, true)
	}
	return blocks, bytes
}

// unlink deletes a cache file, logging a failure other than its absence.
func unlink(log *slog.Logger, path string) {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		log.Warn("could not delete cache file", "path", path, "error", err)
	}
}
