// Package cache is the worker's block cache: objects of the blob store are
// split into fixed-size blocks (block i of an object is bytes
// [i*BlockSize, (i+1)*BlockSize), the last one short), each block is
// loaded from the blob store on its first read and kept as one file under
// the cache directory, up to a capacity in bytes.
//
// # Reads
//
// ReadBlock returns a *Block: an open file descriptor of the block file and
// the block's place in it. The data server copies from it with
// Block.WriteRange, which the kernel can serve with sendfile. Eviction
// unlinks the file; a reader that already has it open keeps reading the
// unlinked file (POSIX semantics), so eviction never breaks a read in
// progress. The disk space of such a file is released when the last reader
// closes it, so for that short time the directory can use more than the
// capacity.
//
// Concurrent misses for one block load it once: the first miss starts a
// load owned by the cache (it outlives the caller, bounded by
// Config.LoadTimeout and Close), later misses wait for it. When the load
// commits, it opens one descriptor of the new file for each waiter under
// the index's mutex, so no eviction can take the block away between its
// load and its first read. A caller whose ctx ends stops waiting; the load
// goes on and caches the block for the next reader. A load that fails
// caches nothing (no negative caching): its error goes to every waiter, is
// counted as a backend error when it was one, and the next read tries
// again. Object sizes (needed to know a block's length) are looked up the
// same way, one call per object at a time, and cached for Config.SizeTTL.
//
// # Streaming and read-ahead
//
// OpenBlock is ReadBlockOf for a reader that streams (the data server):
// on a miss it returns as soon as the block's load has its first bytes
// in the temporary file, and the Block's ReadAt and WriteRange wait for
// the rest as the load writes it, so the client receives the store's
// bytes while they arrive instead of after the whole block is on disk.
// Every reader of the block, streaming or not, shares the one load. A
// load attempt publishes its temporary file and its progress (data bytes
// written) under the mutex of the loads (never the index's: a chunk
// does not wait for hits or evictions); a reader opens the file by its
// path only while the attempt has not failed and the load has not ended
// (the rename and the deletion both happen under that mutex after that
// is recorded), and keeps reading the same file after it is renamed into
// place. When the attempt fails after a reader started, the reader's
// next read past the bytes written returns the load's error: a short
// block is never taken for a whole one, and the failed file is deleted
// as before (nothing partial is cached). A load of another version of
// the object is not joined: OpenBlock waits for it to end and looks
// again.
//
// Prefetch starts a load with no reader (read-ahead of the blocks after
// a read), unless the block is resident or loading, at most
// Config.MaxPrefetches at a time (PrefetchSlots tells how many more may
// start); it counts neither a hit nor a miss. Which blocks to prefetch
// is the data server's decision; the cache re-checks it under the mutex
// of the loads and calls the caller's charge (the warm-up budget) only for a load it
// starts.
//
// Stats: a ReadBlock served from a resident block counts a hit; one that
// waits for a load counts a miss. Every blob store call counts a backend
// fetch (operation read or size) with its duration; failures other than a
// missing object or a closing cache count backend errors.
//
// # Capacity
//
// Capacity bounds the sum of the sizes of resident block files (header
// included) plus the space reserved by loads in progress, whose temporary
// files never grow past their reservation. A load reserves its block's
// exact file size (the last block of an object is short) before it writes
// anything, evicting as needed; when everything evictable is gone and the
// rest is reserved by other loads, it waits for them. Filesystem overhead
// (directories, allocation rounding) is not counted.
//
// # Eviction: S3-FIFO
//
// Eviction follows S3-FIFO (Yang et al., "FIFO queues are all you need for
// cache eviction", SOSP 2023), weighted by bytes: new blocks enter a small
// FIFO (10% of the capacity); a block read at least twice more while in it
// moves to the main FIFO when it reaches the tail, otherwise it is evicted
// and its ID remembered in a ghost FIFO (IDs only, as many as the cache
// holds blocks); a block whose ID is in the ghost FIFO enters the main FIFO
// directly. The main FIFO evicts its tail unless it was read since it was
// last considered (a 2-bit frequency, decremented on each reinsertion).
//
// Why not LRU: a worker's traffic mixes blocks read again and again with
// one-pass reads of large objects (a client copying a file). Under LRU one
// large scan flushes the whole working set; under S3-FIFO scanned blocks
// pass through the small queue and leave, and the main queue keeps the
// blocks that earned their place. A hit also only bumps a counter instead
// of moving a list node. No library was used: hashicorp/golang-lru (LRU,
// 2Q, ARC) counts entries, not bytes, and blocks differ in size.
//
// # Files and crash safety
//
// Files live in <dir>/blocks/<2 hex>/<32 hex>-<index>.blk, where the 32 hex
// digits are the 128-bit xxh3 of the object key and the first two shard the
// directory. The object key is never used as a path. A block file is a
// header (magic, format version, block size, block index, object size,
// data length, xxh3 of the data, the object key, xxh3 of the header) and
// the data.
//
// A load writes a temporary file (tmp-*) in the block's shard directory,
// fsyncs it, and renames it into place: a block file under its final name
// is always complete. The directory is not fsynced after the rename: if a
// power loss forgets the rename, the block is merely absent (and its
// temporary file, if it survived, is deleted at the next Open), which for a
// cache of a durable store is harmless; paying a directory fsync per miss
// would buy nothing. The file fsync before the rename keeps a power loss
// from leaving a complete-looking name over missing data; the checksums
// below would catch that too, but would throw the block away.
//
// # Restart: the directory is reused
//
// Open deletes temporary files left by a crash, then rebuilds the index by
// reading every block file's header: a file whose header is malformed or
// fails its checksum, whose name does not match the key and index in it,
// whose block size is not the configured one, or whose length is not
// exactly header plus data is deleted. Surviving blocks are restored in
// file modification order, oldest first to leave, and marked unverified:
// the first read of each after the restart hashes its data and compares the
// checksum in the header, and a block that fails is deleted and reloaded,
// never served. Blocks written by this process are verified by
// construction (hashed while written, fsynced, renamed). Open takes an
// exclusive flock on <dir>/LOCK so two processes never share a directory.
// Files in the directory that do not look like the cache's own are left
// alone and never deleted.
//
// # Versions
//
// A block remembers the size and the version (blob.Info.Version) of its
// object when it was loaded, in its file's header. ReadBlockOf serves a
// block only for that size and version: an entry of another is dropped
// and reloaded, and the load reads exactly the version asked for from the
// store (blob.ReadVersion), failing with blob.ErrVersionChanged when the
// store holds another by then. Object infos (size, version, checksum) are
// cached for Config.SizeTTL; Revalidate asks the store at once (a reader
// that must see the current version). When the store fails (ErrBackend),
// the last info it gave is used, so blocks already cached stay readable
// through an outage. Peek serves a resident block or reads one from the
// store into memory without admitting it (digests of blocks the worker
// does not own). A store without versions (a Store that is not
// blob.Versioned) is read as before: a same-size rewrite is then not
// detected.
//
// # Concurrency
//
// A Cache is safe for concurrent use. Its state is carved by concern,
// each part with its own mutex (see Cache):
//
//   - the index (index.go): the resident entries, the S3-FIFO queues and
//     the byte accounting (resident, reserved); held for index operations
//     and for the rename and unlink of block files (so the file system
//     and the index agree);
//   - the loads (loads.go, stream.go, prefetch.go): the loads in flight,
//     their waiters, the streams of their attempts and the count of
//     read-ahead loads; held by every streamed chunk and streaming read;
//   - the size memo (size.go): object infos and their TTL;
//   - the lifetime: whether the cache is open, and the goroutines (loads,
//     size lookups) that Close waits for.
//
// Lock order: the loads' mutex before the index's (a load commits with
// both, so a block is never both resident and loading and a streaming
// reader never opens a renamed or deleted file); the size memo's and the
// lifetime's are leaves. A hit takes the index's only, a streamed chunk
// the loads' only. No mutex is held for reading or writing block data or
// for calls to the blob store. A Block's reads are safe for concurrent
// use (WriteRange calls take turns on the file offset); each ReadBlock
// returns its own descriptor, so readers of one block through separate
// ReadBlock calls never share an offset.
package cache
