package cache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/zeebo/xxh3"

	"github.com/talonhq/talon/internal/blob"
	"github.com/talonhq/talon/internal/worker/stats"
)

// Sentinel errors. Errors of the blob store (blob.ErrNotFound,
// blob.ErrBackend, blob.ErrInvalidKey) pass through wrapped.
var (
	// ErrClosed: the cache was closed.
	ErrClosed = errors.New("block cache closed")
	// ErrOutOfRange: the block index is negative or past the end of the object.
	ErrOutOfRange = errors.New("block index out of range")
	// ErrIO: the cache's own directory failed (disk full, I/O error).
	ErrIO = errors.New("block cache i/o error")
	// ErrConfig: Open was given an unusable configuration.
	ErrConfig = errors.New("invalid block cache configuration")
	// ErrLocked: another process holds the cache directory.
	ErrLocked = errors.New("block cache directory in use")
)

// Limits of the configuration.
const (
	MinBlockSize = 1
	MaxBlockSize = 1 << 30
	// DefaultBlockSize is the block size of the worker's default configuration.
	DefaultBlockSize = 4 << 20
	// DefaultSizeTTL is how long an object's size is cached by default.
	DefaultSizeTTL = 5 * time.Second
	// DefaultLoadTimeout bounds one block load by default.
	DefaultLoadTimeout = 2 * time.Minute
	// maxSizeEntries bounds the object size cache.
	maxSizeEntries = 4096
	// maxAttempts bounds how often one ReadBlock looks a resident block
	// up again after its file vanished or failed verification.
	maxAttempts = 4
)

// Config configures Open.
type Config struct {
	// Dir is the cache directory; created if missing.
	Dir string
	// Capacity bounds the bytes of block files; it must hold at least one
	// full block and its largest header (BlockSize + MaxHeaderBytes).
	Capacity int64
	// BlockSize is the size of every block but the last of an object.
	BlockSize int64
	// Source is the blob store blocks are loaded from.
	Source blob.Store
	// Stats receives hits, misses, fetches, loads and residency.
	Stats  *stats.Stats
	Logger *slog.Logger
	// Clock tells the time for the size cache; nil means time.Now.
	Clock func() time.Time
	// SizeTTL is how long an object's size is cached; 0 means
	// DefaultSizeTTL, negative disables the size cache.
	SizeTTL time.Duration
	// LoadTimeout bounds one block load; 0 means DefaultLoadTimeout.
	LoadTimeout time.Duration
}

// entry is a resident block. The fields up to mtime are set before the
// entry is published in Cache.entries and never change; the rest are
// guarded by Cache.mu.
type entry struct {
	id       blockID
	path     string
	fileSize int64 // header + data
	dataOff  int64
	dataLen  int64
	objSize  int64
	sum      uint64
	mtime    time.Time

	verified   bool // data checksum checked (or written) by this process
	freq       uint8
	q          *queue
	prev, next *entry
}

// load is a block load in flight. done is closed when the load has ended;
// then err is set, or the block is committed and files holds one open
// descriptor of its file for each waiter. Handing descriptors over at
// commit, under the mutex, means a waiter cannot lose the block to an
// eviction between the load and its own open.
type load struct {
	done chan struct{}
	err  error // written before done is closed

	// guarded by Cache.mu:
	waiters int
	ended   bool
	entry   *entry
	files   []*os.File
}

// take returns the waiter's descriptor of a committed load, or nil.
// Called with Cache.mu held.
func (l *load) take() *os.File {
	if len(l.files) == 0 {
		return nil
	}
	f := l.files[len(l.files)-1]
	l.files = l.files[:len(l.files)-1]
	return f
}

type sizeEntry struct {
	size    int64
	expires time.Time
}

// sizeCall is an object size lookup in flight; done is closed when size
// and err are set.
type sizeCall struct {
	done chan struct{}
	size int64
	err  error
}

// Cache is a block cache over a blob store. See the package documentation
// for its invariants.
type Cache struct {
	cfg     Config
	root    string // <dir>/blocks
	log     *slog.Logger
	now     func() time.Time
	lock    *os.File // holds the flock on <dir>/LOCK
	loadCtx context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup // block loads

	mu         sync.Mutex // guards the fields below
	entries    map[blockID]*entry
	pol        *policy
	resident   int64 // bytes of resident block files
	reserved   int64 // bytes reserved by loads in flight
	spaceFreed chan struct{}
	loads      map[blockID]*load
	sizes      map[string]sizeEntry
	sizeCalls  map[string]*sizeCall
	closed     bool
}

// Open opens (creating if needed) the cache in cfg.Dir, deletes
// temporary files left by a crash and rebuilds the index from the block
// files there (see the package documentation).
func Open(cfg Config) (*Cache, error) {
	switch {
	case cfg.Dir == "":
		return nil, fmt.Errorf("%w: cache-dir is empty", ErrConfig)
	case cfg.BlockSize < MinBlockSize || cfg.BlockSize > MaxBlockSize:
		return nil, fmt.Errorf("%w: block-size %d: must be from %d to %d bytes", ErrConfig, cfg.BlockSize, MinBlockSize, MaxBlockSize)
	case cfg.Capacity < cfg.BlockSize+MaxHeaderBytes:
		return nil, fmt.Errorf("%w: cache-capacity %d: must hold one block of block-size %d plus its header (%d bytes), at least %d", ErrConfig, cfg.Capacity, cfg.BlockSize, MaxHeaderBytes, cfg.BlockSize+MaxHeaderBytes)
	case cfg.Source == nil, cfg.Stats == nil, cfg.Logger == nil:
		return nil, fmt.Errorf("%w: Source, Stats and Logger are required", ErrConfig)
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.SizeTTL == 0 {
		cfg.SizeTTL = DefaultSizeTTL
	}
	if cfg.LoadTimeout <= 0 {
		cfg.LoadTimeout = DefaultLoadTimeout
	}
	root := filepath.Join(cfg.Dir, blocksDir)
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("%w: create cache-dir %q: %w", ErrIO, cfg.Dir, err)
	}
	lock, err := lockDir(cfg.Dir)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Cache{
		cfg:        cfg,
		root:       root,
		log:        cfg.Logger.With("component", "cache"),
		now:        cfg.Clock,
		lock:       lock,
		loadCtx:    ctx,
		cancel:     cancel,
		entries:    make(map[blockID]*entry),
		pol:        newPolicy(cfg.Capacity, cfg.BlockSize),
		spaceFreed: make(chan struct{}),
		loads:      make(map[blockID]*load),
		sizes:      make(map[string]sizeEntry),
		sizeCalls:  make(map[string]*sizeCall),
	}
	cfg.Stats.SetCapacity(cfg.Capacity)
	if err := c.restore(); err != nil {
		cancel()
		lock.Close()
		return nil, err
	}
	return c, nil
}

func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%w: open lock file in cache-dir %q: %w", ErrIO, dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: cache-dir %q is locked by another process", ErrLocked, dir)
		}
		return nil, fmt.Errorf("%w: lock cache-dir %q: %w", ErrIO, dir, err)
	}
	return f, nil
}

// restore scans the directory: deletes temporary files and invalid block
// files, indexes the valid ones, and evicts down to the capacity.
func (c *Cache) restore() error {
	shards, err := os.ReadDir(c.root)
	if err != nil {
		return fmt.Errorf("%w: read cache directory %q: %w", ErrIO, c.root, err)
	}
	var found []*entry
	var temps, invalid, foreign int
	for _, sd := range shards {
		if !sd.IsDir() || !isShardName(sd.Name()) {
			foreign++
			continue
		}
		dir := filepath.Join(c.root, sd.Name())
		files, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("%w: read cache directory %q: %w", ErrIO, dir, err)
		}
		for _, fe := range files {
			name := fe.Name()
			path := filepath.Join(dir, name)
			switch {
			case fe.Type().IsRegular() && len(name) > len(tmpPrefix) && name[:len(tmpPrefix)] == tmpPrefix:
				// A load that did not finish: never a block.
				temps++
				c.unlink(path)
			case fe.Type().IsRegular() && parseBlockName(sd.Name(), name):
				h, size, err := readBlockHeader(path, c.cfg.BlockSize)
				if err != nil {
					invalid++
					c.log.Warn("deleting invalid block file", "path", path, "error", err)
					c.unlink(path)
					continue
				}
				var mtime time.Time
				if fi, err := fe.Info(); err == nil {
					mtime = fi.ModTime()
				}
				found = append(found, &entry{
					id: blockID{h.key, h.index}, path: path, fileSize: size,
					dataOff: headerLen(h.key), dataLen: h.dataLen, objSize: h.objSize, sum: h.sum, mtime: mtime,
				})
			default:
				foreign++
			}
		}
	}
	slices.SortFunc(found, func(a, b *entry) int { return a.mtime.Compare(b.mtime) })
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range found {
		c.addLocked(e)
	}
	evicted := 0
	for c.resident > c.cfg.Capacity {
		e := c.pol.victim()
		c.removeLocked(e, true, true)
		evicted++
	}
	c.log.Info("block cache opened", "dir", c.cfg.Dir, "blocks", len(c.entries), "resident_bytes", c.resident,
		"capacity_bytes", c.cfg.Capacity, "deleted_temp_files", temps, "deleted_invalid_blocks", invalid,
		"evicted_over_capacity", evicted, "foreign_files", foreign)
	return nil
}

// BlockSize returns the configured block size.
func (c *Cache) BlockSize() int64 { return c.cfg.BlockSize }

// Capacity returns the configured capacity in bytes.
func (c *Cache) Capacity() int64 { return c.cfg.Capacity }

// Close stops loads in flight, waits for them and releases the directory.
// Blocks already returned stay readable until they are closed. Close is
// idempotent.
func (c *Cache) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.signalLocked()
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	return c.lock.Close() // closing the descriptor releases the flock
}

// Size returns the size of object, from the size cache when a lookup
// younger than SizeTTL answered. Concurrent lookups of one object share
// one call to the blob store, which is bounded by LoadTimeout and Close,
// not by ctx: a caller whose ctx ends stops waiting.
func (c *Cache) Size(ctx context.Context, object string) (int64, error) {
	if err := blob.ValidateKey(object); err != nil {
		return 0, err
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return 0, ErrClosed
	}
	if se, ok := c.sizes[object]; ok && c.now().Before(se.expires) {
		c.mu.Unlock()
		return se.size, nil
	}
	call := c.sizeCalls[object]
	if call == nil {
		call = &sizeCall{done: make(chan struct{})}
		c.sizeCalls[object] = call
		c.wg.Add(1)
		go c.lookupSize(object, call)
	}
	c.mu.Unlock()
	select {
	case <-call.done:
		return call.size, call.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func (c *Cache) lookupSize(object string, call *sizeCall) {
	defer c.wg.Done()
	ctx, cancel := context.WithTimeout(c.loadCtx, c.cfg.LoadTimeout)
	defer cancel()
	start := time.Now()
	size, err := c.cfg.Source.Size(ctx, object)
	c.cfg.Stats.BackendFetch(stats.BackendSize, time.Since(start), backendFailure(c.loadCtx, err))
	switch {
	case err != nil && c.loadCtx.Err() != nil:
		err = fmt.Errorf("%w: %w", ErrClosed, err)
	case err != nil && ctx.Err() != nil:
		err = fmt.Errorf("%w: size of object %q timed out after %v: %w", blob.ErrBackend, object, c.cfg.LoadTimeout, err)
	}
	c.mu.Lock()
	delete(c.sizeCalls, object)
	if err == nil && c.cfg.SizeTTL > 0 {
		now := c.now()
		if len(c.sizes) >= maxSizeEntries {
			c.trimSizesLocked(now)
		}
		c.sizes[object] = sizeEntry{size: size, expires: now.Add(c.cfg.SizeTTL)}
	}
	c.mu.Unlock()
	call.size, call.err = size, err
	close(call.done)
}

// trimSizesLocked makes room in the size cache: expired entries first,
// then arbitrary ones.
func (c *Cache) trimSizesLocked(now time.Time) {
	for k, se := range c.sizes {
		if !now.Before(se.expires) {
			delete(c.sizes, k)
		}
	}
	for k := range c.sizes {
		if len(c.sizes) < maxSizeEntries {
			break
		}
		delete(c.sizes, k)
	}
}

func (c *Cache) forgetSize(object string) {
	c.mu.Lock()
	delete(c.sizes, object)
	c.mu.Unlock()
}

// backendFailure reports whether err from the blob store counts as a
// backend error: not a missing object, an invalid key or a caller that
// gave up.
func backendFailure(ctx context.Context, err error) bool {
	switch {
	case err == nil, errors.Is(err, blob.ErrNotFound), errors.Is(err, blob.ErrInvalidKey), errors.Is(err, blob.ErrInvalidRange):
		return false
	case ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		return false
	}
	return true
}

// Block is an open, complete block: its data is bytes
// [Index*BlockSize, Index*BlockSize+Size()) of the object. The caller must
// Close it. A Block is not safe for concurrent use.
type Block struct {
	f       *os.File
	dataOff int64
	size    int64
	objSize int64
}

// Size returns the number of data bytes in the block.
func (b *Block) Size() int64 { return b.size }

// ObjectSize returns the object's size when the block was loaded.
func (b *Block) ObjectSize() int64 { return b.objSize }

// ReadAt reads block data at off (relative to the block), like io.ReaderAt.
func (b *Block) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("%w: negative offset %d", ErrOutOfRange, off)
	}
	return io.NewSectionReader(b.f, b.dataOff, b.size).ReadAt(p, off)
}

// WriteRange writes block bytes [off, off+n) to w. It copies from the file
// itself (an io.LimitedReader over the *os.File), so when w is a TCP
// connection or an http.ResponseWriter over one the kernel sends the data
// with sendfile.
func (b *Block) WriteRange(w io.Writer, off, n int64) (int64, error) {
	if off < 0 || n < 0 || off+n > b.size {
		return 0, fmt.Errorf("%w: range %d+%d of a %d-byte block", ErrOutOfRange, off, n, b.size)
	}
	if _, err := b.f.Seek(b.dataOff+off, io.SeekStart); err != nil {
		return 0, fmt.Errorf("%w: seek block file: %w", ErrIO, err)
	}
	return io.CopyN(w, b.f, n)
}

// Close closes the block's file.
func (b *Block) Close() error { return b.f.Close() }

// ReadBlock returns block index of object, loading it from the blob store
// on a miss. Errors: blob.ErrInvalidKey, ErrOutOfRange (index past the end
// of the object), blob.ErrNotFound, blob.ErrBackend (the load failed),
// ErrIO, ErrClosed, or ctx's error.
func (c *Cache) ReadBlock(ctx context.Context, object string, index int64) (*Block, error) {
	size, err := c.Size(ctx, object)
	if err != nil {
		return nil, err
	}
	if blockLen(c.cfg.BlockSize, size, index) == 0 {
		return nil, fmt.Errorf("%w: block %d of object %q (%d bytes, block size %d)", ErrOutOfRange, index, object, size, c.cfg.BlockSize)
	}
	id := blockID{object, index}
	c.mu.Lock()
	for attempt := 0; ; attempt++ {
		if c.closed {
			c.mu.Unlock()
			return nil, ErrClosed
		}
		e := c.entries[id]
		if e != nil && e.objSize != size {
			// The object changed size: the block is stale.
			c.removeLocked(e, false, true)
			e = nil
		}
		if e == nil {
			break // a miss; c.mu stays held
		}
		if attempt == maxAttempts {
			c.mu.Unlock()
			c.cfg.Stats.Miss()
			return nil, fmt.Errorf("%w: the file of block %d of object %q vanished or failed verification %d times in a row", ErrIO, index, object, maxAttempts)
		}
		c.pol.touch(e)
		verified := e.verified
		c.mu.Unlock()
		f, err := c.openBlock(e, verified)
		if err != nil {
			c.cfg.Stats.Miss()
			return nil, err
		}
		if f != nil {
			c.cfg.Stats.Hit()
			return newBlock(f, e), nil
		}
		// openBlock dropped e: look again, normally to load it.
		c.mu.Lock()
	}
	c.cfg.Stats.Miss()
	l := c.loads[id]
	if l == nil {
		l = &load{done: make(chan struct{})}
		c.loads[id] = l
		c.wg.Add(1)
		go c.load(id, size, l)
	}
	l.waiters++
	c.mu.Unlock()
	select {
	case <-l.done:
	case <-ctx.Done():
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !l.ended {
		l.waiters--
		return nil, ctx.Err()
	}
	if l.err != nil {
		return nil, l.err
	}
	f := l.take()
	if f == nil {
		return nil, fmt.Errorf("%w: no descriptor left for a waiter of block %d of object %q", ErrIO, index, object)
	}
	if ctx.Err() != nil {
		f.Close()
		return nil, ctx.Err()
	}
	return newBlock(f, l.entry), nil
}

func newBlock(f *os.File, e *entry) *Block {
	// These fields never change after the entry is published.
	return &Block{f: f, dataOff: e.dataOff, size: e.dataLen, objSize: e.objSize}
}

// openBlock opens the file of resident entry e, verifying its data
// checksum first if it was restored from an earlier run. It returns
// (nil, nil) when the file is gone or fails verification, after dropping e.
func (c *Cache) openBlock(e *entry, verified bool) (*os.File, error) {
	// path, fileSize and sum never change after the entry is published.
	path, fileSize, sum := e.path, e.fileSize, e.sum
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			// Usually evicted since we looked it up; if it is still
			// indexed, someone else deleted it.
			if c.dropIf(e, false) {
				c.log.Warn("block file vanished; reloading", "path", path)
			}
			return nil, nil
		}
		return nil, fmt.Errorf("%w: open block file: %w", ErrIO, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: stat block file: %w", ErrIO, err)
	}
	if fi.Size() != fileSize {
		f.Close()
		c.log.Warn("block file changed size; deleting and reloading", "path", path, "size", fi.Size(), "want", fileSize)
		c.dropIf(e, true)
		return nil, nil
	}
	if verified {
		return f, nil
	}
	h := xxh3.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, e.dataOff, e.dataLen)); err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: verify block file: %w", ErrIO, err)
	}
	if h.Sum64() != sum {
		f.Close()
		c.log.Warn("block file fails its checksum; deleting and reloading", "path", path)
		c.dropIf(e, true)
		return nil, nil
	}
	c.mu.Lock()
	e.verified = true
	c.mu.Unlock()
	return f, nil
}

// dropIf removes e if it is still the resident entry for its ID, and
// reports whether it was.
func (c *Cache) dropIf(e *entry, unlink bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries[e.id] != e {
		return false
	}
	c.removeLocked(e, false, unlink)
	return true
}

// load loads block id of an object of objSize bytes and ends l.
func (c *Cache) load(id blockID, objSize int64, l *load) {
	defer c.wg.Done()
	c.cfg.Stats.LoadStarted()
	defer c.cfg.Stats.LoadDone()
	ctx, cancel := context.WithTimeout(c.loadCtx, c.cfg.LoadTimeout)
	defer cancel()
	e, tmpPath, err := c.fetch(ctx, id, objSize)
	switch {
	case err != nil && c.loadCtx.Err() != nil:
		err = fmt.Errorf("%w: %w", ErrClosed, err)
	case err != nil && ctx.Err() != nil:
		err = fmt.Errorf("%w: load of block %d of object %q timed out after %v: %w", blob.ErrBackend, id.index, id.object, c.cfg.LoadTimeout, err)
	}
	c.mu.Lock()
	if err == nil {
		err = c.commitLocked(e, tmpPath)
	}
	if err == nil {
		err = l.openFilesLocked(e)
	}
	delete(c.loads, id)
	l.ended, l.entry, l.err = true, e, err
	close(l.done)
	c.mu.Unlock()
	if err != nil {
		c.log.Warn("block load failed", "object", id.object, "block", id.index, "error", err)
	}
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

// commitLocked renames a fetched block's temporary file into place and
// turns its reservation into the new entry's resident bytes, in one
// critical section so the accounting never drops below the truth.
func (c *Cache) commitLocked(e *entry, tmpPath string) error {
	c.reserved -= e.fileSize
	c.signalLocked()
	if c.closed {
		c.unlink(tmpPath)
		return ErrClosed
	}
	if err := os.Rename(tmpPath, e.path); err != nil {
		c.unlink(tmpPath)
		return fmt.Errorf("%w: rename block file into place: %w", ErrIO, err)
	}
	if old := c.entries[e.id]; old != nil {
		// The rename replaced its file.
		c.removeLocked(old, false, false)
	}
	c.addLocked(e)
	return nil
}

// fetch reserves space and writes the block to a temporary file through a
// checksum, then fsyncs and closes it. On success it returns the entry to
// add and the temporary file, and its reservation stands (commitLocked
// takes it over); on failure it has released the reservation and deleted
// the temporary file.
func (c *Cache) fetch(ctx context.Context, id blockID, objSize int64) (e *entry, tmpPath string, err error) {
	n := blockLen(c.cfg.BlockSize, objSize, id.index)
	h := header{key: id.object, blockSize: c.cfg.BlockSize, index: id.index, objSize: objSize, dataLen: n}
	hlen := headerLen(id.object)
	need := hlen + n
	if err := c.reserve(ctx, need); err != nil {
		return nil, "", err
	}
	var tmp *os.File
	defer func() {
		if tmp != nil {
			tmp.Close()
		}
		if err != nil {
			if tmpPath != "" {
				c.unlink(tmpPath)
			}
			c.release(need)
		}
	}()

	shard, name := blockName(id.object, id.index)
	dir := filepath.Join(c.root, shard)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, "", fmt.Errorf("%w: create shard directory: %w", ErrIO, err)
	}
	tmp, err = os.CreateTemp(dir, tmpPrefix+"*")
	if err != nil {
		return nil, "", fmt.Errorf("%w: create temporary block file: %w", ErrIO, err)
	}
	tmpPath = tmp.Name()
	if _, err := tmp.Seek(hlen, io.SeekStart); err != nil {
		return nil, tmpPath, fmt.Errorf("%w: seek temporary block file: %w", ErrIO, err)
	}

	start := time.Now()
	hash := xxh3.New()
	got, err := c.copyFromSource(ctx, id, n, io.MultiWriter(tmp, hash))
	// A load's ctx ends only on Close (not a backend failure) or on
	// LoadTimeout (a backend failure).
	c.cfg.Stats.BackendFetch(stats.BackendRead, time.Since(start), backendFailure(c.loadCtx, err) && !errors.Is(err, ErrIO))
	if err != nil {
		return nil, tmpPath, err
	}
	if got != n {
		c.forgetSize(id.object)
		return nil, tmpPath, fmt.Errorf("%w: object %q ended after %d of the %d bytes of block %d: it changed during the load", blob.ErrBackend, id.object, got, n, id.index)
	}
	h.sum = hash.Sum64()
	if _, err := tmp.WriteAt(h.encode(), 0); err != nil {
		return nil, tmpPath, fmt.Errorf("%w: write block header: %w", ErrIO, err)
	}
	if err := tmp.Sync(); err != nil {
		return nil, tmpPath, fmt.Errorf("%w: fsync temporary block file: %w", ErrIO, err)
	}
	err = tmp.Close()
	tmp = nil
	if err != nil {
		return nil, tmpPath, fmt.Errorf("%w: close temporary block file: %w", ErrIO, err)
	}
	return &entry{
		id: id, path: filepath.Join(dir, name), fileSize: need, dataOff: hlen, dataLen: n,
		objSize: objSize, sum: h.sum, verified: true, mtime: c.now(),
	}, tmpPath, nil
}

// copyFromSource copies the n bytes of block id from the blob store to w.
// Write errors are ErrIO; read errors come from the store.
func (c *Cache) copyFromSource(ctx context.Context, id blockID, n int64, w io.Writer) (int64, error) {
	rc, err := c.cfg.Source.ReadRange(ctx, id.object, id.index*c.cfg.BlockSize, n)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	got, err := io.CopyN(&ioErrWriter{w}, rc, n)
	if errors.Is(err, io.EOF) {
		err = nil // short: the caller reports it
	}
	return got, err
}

// ioErrWriter marks write errors as the cache's own.
type ioErrWriter struct{ w io.Writer }

func (w *ioErrWriter) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	if err != nil {
		err = fmt.Errorf("%w: write temporary block file: %w", ErrIO, err)
	}
	return n, err
}

// reserve waits until need bytes fit under the capacity, evicting as
// needed, and reserves them.
func (c *Cache) reserve(ctx context.Context, need int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		if c.closed {
			return ErrClosed
		}
		for c.resident+c.reserved+need > c.cfg.Capacity {
			e := c.pol.victim()
			if e == nil {
				break
			}
			c.removeLocked(e, true, true)
		}
		if c.resident+c.reserved+need <= c.cfg.Capacity {
			c.reserved += need
			return nil
		}
		if c.reserved == 0 {
			return fmt.Errorf("%w: a block file of %d bytes exceeds the capacity of %d", ErrIO, need, c.cfg.Capacity)
		}
		ch := c.spaceFreed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			c.mu.Lock()
			return ctx.Err()
		}
		c.mu.Lock()
	}
}

func (c *Cache) release(need int64) {
	c.mu.Lock()
	c.reserved -= need
	c.signalLocked()
	c.mu.Unlock()
}

// signalLocked wakes loads waiting for space.
func (c *Cache) signalLocked() {
	close(c.spaceFreed)
	c.spaceFreed = make(chan struct{})
}

func (c *Cache) addLocked(e *entry) {
	c.entries[e.id] = e
	c.pol.insert(e)
	c.resident += e.fileSize
	c.cfg.Stats.BlockAdded(e.fileSize)
	c.signalLocked() // a new entry is evictable
}

// removeLocked drops e from the index and the accounting, and deletes its
// file when unlink is set.
func (c *Cache) removeLocked(e *entry, evicted, unlink bool) {
	c.pol.drop(e)
	delete(c.entries, e.id)
	c.resident -= e.fileSize
	c.cfg.Stats.BlockRemoved(e.fileSize, evicted)
	if unlink {
		c.unlink(e.path)
	}
	c.signalLocked()
}

func (c *Cache) unlink(path string) {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		c.log.Warn("could not delete cache file", "path", path, "error", err)
	}
}
