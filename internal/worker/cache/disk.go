package cache

// This file is the block files on disk: the directory lock, restart
// recovery, writing a block (temporary file, checksum, fsync, rename) and
// verifying a restored block before its first read (see doc.go).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/zeebo/xxh3"

	"github.com/talonhq/talon/internal/blob"
	"github.com/talonhq/talon/internal/worker/stats"
)

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
				unlink(c.log, path)
			case fe.Type().IsRegular() && parseBlockName(sd.Name(), name):
				h, size, err := readBlockHeader(path, c.cfg.BlockSize)
				if err != nil {
					invalid++
					c.log.Warn("deleting invalid block file", "path", path, "error", err)
					unlink(c.log, path)
					continue
				}
				var mtime time.Time
				if fi, err := fe.Info(); err == nil {
					mtime = fi.ModTime()
				}
				found = append(found, &entry{
					id: blockID{h.key, h.index}, path: path, fileSize: size,
					dataOff: headerLen(h.key, h.version), dataLen: h.dataLen, objSize: h.objSize, version: h.version, sum: h.sum, mtime: mtime,
				})
			default:
				foreign++
			}
		}
	}
	slices.SortFunc(found, func(a, b *entry) int { return a.mtime.Compare(b.mtime) })
	evicted := c.idx.restore(found)
	blocks, resident, _ := c.idx.usage()
	c.log.Info("block cache opened", "dir", c.cfg.Dir, "blocks", blocks, "resident_bytes", resident,
		"capacity_bytes", c.cfg.Capacity, "deleted_temp_files", temps, "deleted_invalid_blocks", invalid,
		"evicted_over_capacity", evicted, "foreign_files", foreign)
	return nil
}

// fetch reserves space and writes the block to a temporary file through a
// checksum, then fsyncs and closes it. On success it returns the entry to
// add and the temporary file, and its reservation stands (commitLocked
// takes it over); on failure it has released the reservation and deleted
// the temporary file.
func (c *Cache) fetch(ctx context.Context, id blockID, info blob.Info, l *load) (e *entry, tmpPath string, err error) {
	objSize := info.Size
	n := blockLen(c.cfg.BlockSize, objSize, id.index)
	h := header{key: id.object, version: info.Version, blockSize: c.cfg.BlockSize, index: id.index, objSize: objSize, dataLen: n}
	hlen := headerLen(id.object, info.Version)
	need := hlen + n
	if err := c.idx.reserve(ctx, need); err != nil {
		return nil, "", err
	}
	var tmp *os.File
	var st *stream
	defer func() { c.endFetch(id, tmp, st, tmpPath, need, err) }()

	shard, name := blockName(id.object, id.index)
	dir := filepath.Join(c.root, shard)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, "", fmt.Errorf("%w: create shard directory: %w", ErrIO, err)
	}
	tmp, err = c.createTemp(dir, tmpPrefix+"*")
	if err != nil {
		return nil, "", fmt.Errorf("%w: create temporary block file: %w", ErrIO, err)
	}
	tmpPath = tmp.Name()
	if _, err := tmp.Seek(hlen, io.SeekStart); err != nil {
		return nil, tmpPath, fmt.Errorf("%w: seek temporary block file: %w", ErrIO, err)
	}

	st = c.loads.beginStream(l, tmpPath, hlen)
	start := time.Now()
	hash := xxh3.New()
	got, err := c.copyFromSource(ctx, id, info.Version, n, io.MultiWriter(tmp, hash, progress{c.loads, st}))
	// A load's ctx ends only on Close (not a backend failure) or on
	// LoadTimeout (a backend failure).
	c.cfg.Stats.BackendFetch(stats.BackendRead, time.Since(start), backendFailure(c.loadCtx, err) && !errors.Is(err, ErrIO))
	if err != nil {
		return nil, tmpPath, err
	}
	if got != n {
		c.sizes.forget(id.object)
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
		objSize: objSize, version: info.Version, sum: h.sum, verified: true, mtime: c.now(),
	}, tmpPath, nil
}

// endFetch is fetch's cleanup: it closes the temporary file, tells the
// streaming readers how the attempt ended (before a failed attempt's file
// is deleted: see endStream) and, on failure, deletes the file and
// releases the reservation.
func (c *Cache) endFetch(id blockID, tmp *os.File, st *stream, tmpPath string, need int64, err error) {
	if tmp != nil {
		tmp.Close()
	}
	if st != nil {
		c.loads.endStream(st, err)
	}
	if err == nil {
		return
	}
	if tmpPath != "" {
		unlink(c.log, tmpPath)
	}
	if errors.Is(err, blob.ErrVersionChanged) {
		c.sizes.forget(id.object)
	}
	c.idx.release(need)
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
			if c.idx.dropIf(e, false) {
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
		c.idx.dropIf(e, true)
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
		c.cfg.Stats.ChecksumFailure()
		c.log.Warn("block file fails its checksum; deleting and reloading", "path", path)
		c.idx.dropIf(e, true)
		return nil, nil
	}
	c.idx.markVerified(e)
	return f, nil
}
