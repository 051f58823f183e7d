package cache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/talonhq/talon/internal/blob"
	"github.com/talonhq/talon/internal/tracing"
	"github.com/talonhq/talon/internal/worker/stats"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/singleflight"
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
// entry is published in Cache.entries and never change; the rest are
// guarded by Cache.mu.
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
	loadCtx  context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup // block loads

	mu         sync.Mutex // guards the fields below
	entries    map[blockID]*entry
	pol        *policy
	resident   int64 // bytes of resident block files
	reserved   int64 // bytes reserved by loads in flight
	spaceFreed chan struct{}
	loads      map[blockID]*load
	prefetches int // loads started by Prefetch still in flight
	sizes      map[string]sizeEntry
	sizeCalls  singleflight.Group // size lookups in flight, by object
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
	c := &Cache{
		cfg:        cfg,
		root:       root,
		createTemp: os.CreateTemp,
		loadBuf:    loadBufferSize,
		log:        cfg.Logger.With("component", "cache"),
		tracer:     tracing.Tracer(cfg.Tracers, "worker/cache"),
		now:        cfg.Clock,
		lock:       lock,
		loadCtx:    ctx,
		cancel:     cancel,
		entries:    make(map[blockID]*entry),
		pol:        newPolicy(cfg.Capacity, cfg.BlockSize),
		spaceFreed: make(chan struct{}),
		loads:      make(map[blockID]*load),
		sizes:      make(map[string]sizeEntry),
	}
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

// Block is an open, complete block: its data is bytes
// [Index*BlockSize, Index*BlockSize+Size()) of the object. The caller must
// Close it, once, after its last read. ReadAt and WriteRange are safe for
// concurrent use.
type Block struct {
	f       *os.File
	mem     []byte // the data, for a block read through (f is nil then)
	dataOff int64
	size    int64
	objSize int64
	version string
	// seek serializes WriteRange: sendfile(2) reads from the file offset,
	// which is the descriptor's, shared by every goroutine using b.
	seek sync.Mutex
	// st is the load attempt a streaming Block (OpenBlock) reads while it
	// fills f, the attempt's temporary file; nil for a complete block.
	// Its fields are guarded by c.mu.
	c  *Cache
	st *stream
}

// Size returns the number of data bytes in the block.
func (b *Block) Size() int64 { return b.size }

// ObjectSize returns the object's size when the block was loaded.
func (b *Block) ObjectSize() int64 { return b.objSize }

// Version returns the object version the block was loaded from.
func (b *Block) Version() string { return b.version }

// ReadAt reads block data at off (relative to the block), like io.ReaderAt.
func (b *Block) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("%w: negative offset %d", ErrOutOfRange, off)
	}
	if b.f == nil {
		return bytes.NewReader(b.mem).ReadAt(p, off)
	}
	if b.st != nil {
		if err := b.waitFor(min(off+int64(len(p)), b.size)); err != nil {
			return 0, err
		}
	}
	return io.NewSectionReader(b.f, b.dataOff, b.size).ReadAt(p, off)
}

// WriteRange writes block bytes [off, off+n) to w. It copies from the file
// itself (an io.LimitedReader over the *os.File, positioned with Seek), so
// when w is a TCP connection or an http.ResponseWriter over one the kernel
// sends the data with sendfile. (An io.SectionReader would need no Seek,
// but net.TCPConn.ReadFrom sends only an *os.File, alone or in an
// io.LimitedReader, with sendfile.) Concurrent calls on one Block take
// turns; separate ReadBlock calls return separate descriptors and do not.
func (b *Block) WriteRange(w io.Writer, off, n int64) (int64, error) {
	if off < 0 || n < 0 || off+n > b.size {
		return 0, fmt.Errorf("%w: range %d+%d of a %d-byte block", ErrOutOfRange, off, n, b.size)
	}
	if b.f == nil {
		k, err := w.Write(b.mem[off : off+n])
		return int64(k), err
	}
	if b.st != nil {
		return b.writeStreaming(w, off, n)
	}
	return b.copyAt(w, off, n)
}

// copyAt copies data bytes [off, off+n) of the block file to w (with
// sendfile when w is a plain connection).
func (b *Block) copyAt(w io.Writer, off, n int64) (int64, error) {
	b.seek.Lock()
	defer b.seek.Unlock()
	if _, err := b.f.Seek(b.dataOff+off, io.SeekStart); err != nil {
		return 0, fmt.Errorf("%w: seek block file: %w", ErrIO, err)
	}
	return io.CopyN(w, b.f, n)
}

// Close closes the block's file.
func (b *Block) Close() error {
	if b.f == nil {
		return nil
	}
	return b.f.Close()
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
	if blockLen(c.cfg.BlockSize, info.Size, index) == 0 {
		return nil, fmt.Errorf("%w: block %d of object %q (%d bytes, block size %d)", ErrOutOfRange, index, object, info.Size, c.cfg.BlockSize)
	}
	id := blockID{object, index}
	c.mu.Lock()
	if b, err := c.hitLocked(id, info); b != nil || err != nil {
		return b, err
	}
	return c.missLocked(ctx, id, info)
}

// Peek returns block index of the object at info's version when it is
// resident, and otherwise reads it from the blob store into memory
// without caching it: for answers about blocks this worker does not own,
// which must not take the place of blocks it does. Neither counts a hit
// or a miss, nor changes the eviction order.
func (c *Cache) Peek(ctx context.Context, object string, info blob.Info, index int64) (*Block, error) {
	if blockLen(c.cfg.BlockSize, info.Size, index) == 0 {
		return nil, fmt.Errorf("%w: block %d of object %q (%d bytes, block size %d)", ErrOutOfRange, index, object, info.Size, c.cfg.BlockSize)
	}
	id := blockID{object, index}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	e := c.entries[id]
	verified := e != nil && e.verified
	c.mu.Unlock()
	if e != nil && e.objSize == info.Size && e.version == info.Version {
		if f, err := c.openBlock(e, verified); err == nil && f != nil {
			return newBlock(f, e), nil
		}
	}
	return c.readThrough(ctx, id, info)
}

// hitLocked serves block id of an object of size bytes from its file,
// dropping an entry of another object size or whose file vanished or
// failed verification, up to maxAttempts times. It is called with c.mu
// held. On a miss it returns (nil, nil) with c.mu still held, for
// missLocked; with a block or an error it returns with c.mu released.
func (c *Cache) hitLocked(id blockID, info blob.Info) (*Block, error) {
	for attempt := 0; ; attempt++ {
		if c.closed {
			c.mu.Unlock()
			return nil, ErrClosed
		}
		e := c.entries[id]
		if e != nil && (e.objSize != info.Size || e.version != info.Version) {
			// The object changed: the block is of another version.
			c.removeLocked(e, false, true)
			e = nil
		}
		if e == nil {
			return nil, nil // a miss; c.mu stays held
		}
		if attempt == maxAttempts {
			c.mu.Unlock()
			c.cfg.Stats.Miss()
			return nil, fmt.Errorf("%w: the file of block %d of object %q vanished or failed verification %d times in a row", ErrIO, id.index, id.object, maxAttempts)
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
}

// missLocked counts a miss and waits for the one load of block id (starting
// it if none runs), then takes the descriptor the load handed to its
// waiters; when the cache directory failed it reads through to the blob
// store instead. It is called with c.mu held and releases it.
func (c *Cache) missLocked(ctx context.Context, id blockID, info blob.Info) (*Block, error) {
	l := c.startLoadLocked(id, info)
	l.waiters++
	return c.finishMissLocked(ctx, id, info, l)
}

// startLoadLocked counts a miss and returns the one load of block id,
// starting it if none runs. Called with c.mu held.
func (c *Cache) startLoadLocked(id blockID, info blob.Info) *load {
	c.cfg.Stats.Miss()
	if l := c.loads[id]; l != nil {
		return l
	}
	return c.newLoadLocked(id, info)
}

// newLoadLocked starts the load of block id. Called with c.mu held.
func (c *Cache) newLoadLocked(id blockID, info blob.Info) *load {
	l := &load{done: make(chan struct{}), wake: make(chan struct{}), index: id.index, info: info}
	c.loads[id] = l
	c.wg.Add(1)
	go c.load(id, info, l)
	return l
}

// finishMissLocked waits for load l, of which the caller is a counted
// waiter, and takes its descriptor. Called with c.mu held; releases it.
func (c *Cache) finishMissLocked(ctx context.Context, id blockID, info blob.Info, l *load) (*Block, error) {
	c.mu.Unlock()
	select {
	case <-l.done:
	case <-ctx.Done():
	}
	c.mu.Lock()
	if !l.ended {
		l.waiters--
		c.mu.Unlock()
		return nil, ctx.Err()
	}
	lerr, e := l.err, l.entry
	var f *os.File
	if lerr == nil {
		f = l.take()
	}
	c.mu.Unlock()
	if lerr != nil {
		if errors.Is(lerr, ErrIO) && !errors.Is(lerr, ErrClosed) && ctx.Err() == nil {
			// The cache directory failed (read-only, full, broken disk):
			// serve this read from the blob store rather than fail it.
			// The disk error is counted; the worker reports it (degraded,
			// then unready past a threshold).
			c.cfg.Stats.DiskError()
			return c.readThrough(ctx, id, info)
		}
		return nil, lerr
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
		c.forgetSize(id.object)
		return nil, fmt.Errorf("%w: object %q ended after %d of the %d bytes of block %d: it changed during the read", blob.ErrBackend, id.object, got, n, id.index)
	}
	return &Block{mem: buf.Bytes(), size: n, objSize: objSize, version: info.Version}, nil
}

func newBlock(f *os.File, e *entry) *Block {
	// These fields never change after the entry is published.
	return &Block{f: f, dataOff: e.dataOff, size: e.dataLen, objSize: e.objSize, version: e.version}
}
