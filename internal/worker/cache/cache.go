package cache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/talonhq/talon/internal/blob"
	"github.com/talonhq/talon/internal/tracing"
	"github.com/talonhq/talon/internal/worker/stats"
	"go.opentelemetry.io/otel/trace"
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
	// MaxPrefetches bounds the read-ahead loads (Prefetch) in flight at
	// once; 0 means DefaultMaxPrefetches, negative turns Prefetch off.
	MaxPrefetches int
	// Tracers, when set, traces each block load as a "cache.load" span
	// (the store's own spans, blob.Traced, nest in it); nil means none.
	Tracers trace.TracerProvider
}

// entry is a resident block. The fields up to mtime are set before the
// entry is published in index.entries and never change; the rest are
// guarded by index.mu.
type entry struct {
	id       blockID
	path     string
	fileSize int64 // header + data
	dataOff  int64
	dataLen  int64
	objSize  int64
	version  string
	sum      uint64
	mtime    time.Time

	verified   bool // data checksum checked (or written) by this process
	freq       uint8
	q          *queue
	prev, next *entry
}

// Cache is a block cache over a blob store. See the package documentation
// for its invariants.
//
// Its state is carved by concern, each with its own lock: idx (index.go)
// is the resident blocks and their bytes; loads (loads.go) the loads in
// flight, the streams of their attempts and the read-ahead count; sizes
// (size.go) the object size memo; life whether the cache is open and the
// goroutines Close waits for. Lock order: loads.mu before idx.mu (a load
// commits with both); sizes.mu and life.mu are leaves, never held while
// another is taken. A hit takes idx.mu only, a streamed chunk loads.mu
// only, a size lookup sizes.mu only.
type Cache struct {
	cfg  Config
	root string // <dir>/blocks
	log  *slog.Logger
	// tracer traces block loads (Config.Tracers; a no-op when unset).
	tracer trace.Tracer
	// createTemp creates a block's temporary file (os.CreateTemp; tests
	// inject disk failures).
	createTemp func(dir, pattern string) (*os.File, error)
	// loadBuf is the size of the buffers loads copy through
	// (loadBufferSize; a test makes it smaller), and loadBufs holds them
	// as *[]byte between loads.
	loadBuf  int
	loadBufs sync.Pool
	now      func() time.Time
	lock     *os.File // holds the flock on <dir>/LOCK
	// loadCtx is the lifetime of the cache's loads and size lookups:
	// cancelled by Close.
	loadCtx context.Context
	cancel  context.CancelFunc

	life  life
	idx   *index
	loads *loads
	sizes *sizeMemo
}

// life is whether the cache is open, and the goroutines (block loads,
// size lookups) that Close waits for.
type life struct {
	closed atomic.Bool // set once, by close; read without mu
	// mu orders a goroutine's wg.Add (made while the cache is open) before
	// Close's Wait. A leaf: no lock is taken while it is held.
	mu sync.Mutex
	wg sync.WaitGroup
}

// enter registers a goroutine that Close waits for; false when the cache
// is closed. The goroutine calls exit when it ends.
func (lf *life) enter() bool {
	lf.mu.Lock()
	defer lf.mu.Unlock()
	if lf.closed.Load() {
		return false
	}
	lf.wg.Add(1)
	return true
}

func (lf *life) exit() { lf.wg.Done() }

func (lf *life) isClosed() bool { return lf.closed.Load() }

// close marks the cache closed; false when it was already.
func (lf *life) close() bool {
	lf.mu.Lock()
	defer lf.mu.Unlock()
	return !lf.closed.Swap(true)
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
	if cfg.MaxPrefetches == 0 {
		cfg.MaxPrefetches = DefaultMaxPrefetches
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
	log := cfg.Logger.With("component", "cache")
	c := &Cache{
		cfg:        cfg,
		root:       root,
		createTemp: os.CreateTemp,
		loadBuf:    loadBufferSize,
		log:        log,
		tracer:     tracing.Tracer(cfg.Tracers, "worker/cache"),
		now:        cfg.Clock,
		lock:       lock,
		loadCtx:    ctx,
		cancel:     cancel,
		idx:        newIndex(cfg.Capacity, cfg.BlockSize, cfg.Stats, log),
	}
	c.loads = newLoads(c.idx, &c.life, cfg.Stats, cfg.MaxPrefetches, c.load)
	c.sizes = newSizeMemo(cfg.SizeTTL, cfg.Clock, &c.life, c.lookupSize)
	cfg.Stats.SetCapacity(cfg.Capacity)
	if err := c.restore(); err != nil {
		cancel()
		lock.Close()
		return nil, err
	}
	return c, nil
}

// BlockSize returns the configured block size.
func (c *Cache) BlockSize() int64 { return c.cfg.BlockSize }

// Capacity returns the configured capacity in bytes.
func (c *Cache) Capacity() int64 { return c.cfg.Capacity }

// Close stops loads in flight, waits for them and releases the directory.
// Blocks already returned stay readable until they are closed. Close is
// idempotent.
func (c *Cache) Close() error {
	if !c.life.close() {
		return nil
	}
	c.idx.close()
	c.cancel()
	c.life.wg.Wait()
	return c.lock.Close() // closing the descriptor releases the flock
}

// ReadBlock returns block index of object, loading it from the blob store
// on a miss. Errors: blob.ErrInvalidKey, ErrOutOfRange (index past the end
// of the object), blob.ErrNotFound, blob.ErrBackend (the load failed),
// ErrIO, ErrClosed, or ctx's error.
func (c *Cache) ReadBlock(ctx context.Context, object string, index int64) (*Block, error) {
	info, err := c.Stat(ctx, object)
	if err != nil {
		return nil, err
	}
	return c.ReadBlockOf(ctx, object, info, index)
}

// ReadBlockOf is ReadBlock of the object at info's size and version (a
// Stat or Revalidate answer): a resident block of another version is
// dropped, never returned, and a load reads that version from the store
// (blob.ErrVersionChanged when the store holds another by then).
func (c *Cache) ReadBlockOf(ctx context.Context, object string, info blob.Info, index int64) (*Block, error) {
	id, err := c.blockOf(object, info, index)
	if err != nil {
		return nil, err
	}
	b, locked, err := c.hitOrLock(id, info)
	if !locked {
		return b, err
	}
	l, err := c.loads.startLocked(id, info)
	if err != nil {
		c.loads.mu.Unlock()
		return nil, err
	}
	l.waiters++
	return c.finishMissLocked(ctx, id, info, l)
}

// blockOf returns the id of block index of object at info, or an error
// wrapping ErrOutOfRange when the object has no such block.
func (c *Cache) blockOf(object string, info blob.Info, index int64) (blockID, error) {
	if blockLen(c.cfg.BlockSize, info.Size, index) == 0 {
		return blockID{}, fmt.Errorf("%w: block %d of object %q (%d bytes, block size %d)", ErrOutOfRange, index, object, info.Size, c.cfg.BlockSize)
	}
	return blockID{object, index}, nil
}

// hitOrLock serves block id at info from the index (a hit: locked is
// false), or returns with loads.mu held once the block is known not to be
// resident (a miss to load or join: b is nil, locked is true). A resident
// block of another version is dropped first.
func (c *Cache) hitOrLock(id blockID, info blob.Info) (b *Block, locked bool, err error) {
	for attempt := 0; ; {
		b, res, err := c.hit(id, info, attempt)
		switch res {
		case served:
			return b, false, err
		case dropped:
			attempt++
			continue
		}
		c.loads.mu.Lock()
		if !c.idx.holds(id, info) {
			return nil, true, nil
		}
		// Loaded since hit looked: a hit after all.
		c.loads.mu.Unlock()
	}
}

// Peek returns block index of the object at info's version when it is
// resident, and otherwise reads it from the blob store into memory
// without caching it: for answers about blocks this worker does not own,
// which must not take the place of blocks it does. Neither counts a hit
// or a miss, nor changes the eviction order.
func (c *Cache) Peek(ctx context.Context, object string, info blob.Info, index int64) (*Block, error) {
	id, err := c.blockOf(object, info, index)
	if err != nil {
		return nil, err
	}
	e, verified, err := c.idx.peek(id)
	if err != nil {
		return nil, err
	}
	if e != nil && e.objSize == info.Size && e.version == info.Version {
		if f, err := c.openBlock(e, verified); err == nil && f != nil {
			return newBlock(f, e), nil
		}
	}
	return c.readThrough(ctx, id, info)
}

// lookup is what hit found.
type lookup int

const (
	missed  lookup = iota // not resident at the version asked
	served                // a block or an error to return
	dropped               // the entry's file vanished or failed verification: look again
)

// hit serves block id at info from its resident file, dropping an entry
// of another object size or version. attempt counts the entries dropped
// so far for this read: at maxAttempts hit gives up with ErrIO. It takes
// idx.mu only (and not around the open and verification of the file).
func (c *Cache) hit(id blockID, info blob.Info, attempt int) (*Block, lookup, error) {
	e, verified, err := c.idx.lookup(id, info, attempt < maxAttempts)
	switch {
	case err != nil:
		return nil, served, err
	case e == nil:
		return nil, missed, nil
	case attempt == maxAttempts:
		c.cfg.Stats.Miss()
		return nil, served, fmt.Errorf("%w: the file of block %d of object %q vanished or failed verification %d times in a row", ErrIO, id.index, id.object, maxAttempts)
	}
	f, err := c.openBlock(e, verified)
	switch {
	case err != nil:
		c.cfg.Stats.Miss()
		return nil, served, err
	case f == nil:
		return nil, dropped, nil // openBlock dropped e
	}
	c.cfg.Stats.Hit()
	return newBlock(f, e), served, nil
}

// finishMissLocked waits for load l, of which the caller is a counted
// waiter, and takes its descriptor; when the cache directory failed it
// reads through to the blob store instead. Called with loads.mu held;
// releases it.
func (c *Cache) finishMissLocked(ctx context.Context, id blockID, info blob.Info, l *load) (*Block, error) {
	f, e, err := c.loads.waitLocked(ctx, l)
	if err != nil {
		if errors.Is(err, ErrIO) && !errors.Is(err, ErrClosed) && ctx.Err() == nil {
			// The cache directory failed (read-only, full, broken disk):
			// serve this read from the blob store rather than fail it.
			// The disk error is counted; the worker reports it (degraded,
			// then unready past a threshold).
			c.cfg.Stats.DiskError()
			return c.readThrough(ctx, id, info)
		}
		return nil, err
	}
	if f == nil {
		return nil, fmt.Errorf("%w: no descriptor left for a waiter of block %d of object %q", ErrIO, id.index, id.object)
	}
	if ctx.Err() != nil {
		f.Close()
		return nil, ctx.Err()
	}
	return newBlock(f, e), nil
}

// Probe checks that the cache directory takes writes: it creates, writes,
// syncs and removes a small file. The worker uses it to tell a repaired
// directory from one that merely has no traffic.
func (c *Cache) Probe() error {
	f, err := c.createTemp(c.root, tmpPrefix+"probe-*")
	if err != nil {
		return fmt.Errorf("%w: probe: %w", ErrIO, err)
	}
	defer os.Remove(f.Name())
	_, err = f.Write([]byte{0})
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%w: probe: %w", ErrIO, err)
	}
	return nil
}

// readThrough reads block id straight from the blob store into memory,
// bypassing the cache directory.
func (c *Cache) readThrough(ctx context.Context, id blockID, info blob.Info) (*Block, error) {
	objSize := info.Size
	n := blockLen(c.cfg.BlockSize, objSize, id.index)
	buf := bytes.NewBuffer(make([]byte, 0, n))
	start := time.Now()
	got, err := c.copyFromSource(ctx, id, info.Version, n, buf)
	c.cfg.Stats.BackendFetch(stats.BackendRead, time.Since(start), backendFailure(ctx, err))
	if err != nil {
		return nil, err
	}
	if got != n {
		c.sizes.forget(id.object)
		return nil, fmt.Errorf("%w: object %q ended after %d of the %d bytes of block %d: it changed during the read", blob.ErrBackend, id.object, got, n, id.index)
	}
	return &Block{mem: buf.Bytes(), size: n, objSize: objSize, version: info.Version}, nil
}
