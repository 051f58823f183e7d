// Package dataserver is the worker's data listener: an HTTP handler that
// serves byte ranges of objects from the block cache (the datav1
// protocol). It has its own address, advertised in the worker's
// status record (ADR 0001: the data path is separate from the
// administration listener).
//
// # Protocol
//
// The wire contract (paths, query parameters, headers, error codes, the
// block key) is package datav1's, shared with the client library; this
// package serves it.
//
// # Ownership is checked first
//
// The handler checks ownership of every block the requested range touches,
// before the range is cut at the object's end and before any call to the
// cache or the blob store: a misdirected request never costs a backend
// fetch. Clients reading per block (the normal case: consecutive blocks
// usually have different owners) touch one block per request.
//
// Ownership is the cluster's (Ownership.Owns: the first placement-replicas
// owners), never the request's replicas parameter: no client can make a
// worker load a block it does not own. Digests are the one answer about
// blocks a worker does not own: those blocks are read from the store
// without caching them (cache.Peek), at most Config.UnownedDigestRate per
// second for each client (429 rate_limited beyond), and counted with
// operation "digest" and outcome "uncached" or "rate_limited".
//
// # Versions
//
// Every answer names the object version its bytes are of
// (X-Talon-Object-Version). A request with version=V is answered only from
// V: the worker revalidates with the store when its cached info names
// another, and answers 412 version_changed when the store does too; fresh=1
// revalidates first (a client's first request of a read).
//
// Every request that makes the worker ask the store for an object's size
// and version (fresh=1, a version= its cached answer does not name, an
// object it has no answer for, which a missing one never has) takes a
// token of the client's bucket first, Config.StoreReadRate a second for
// each client (the certificate's node ID over TLS, else the remote host):
// beyond, 429 resource_exhausted with Retry-After. A client cannot turn
// its requests into as many store requests.
//
// # Whole answer or nothing
//
// Every block of the range is opened through the cache (Cache.OpenBlock)
// before the status line is written, so a load that fails before its
// first byte (a missing object, a changed version, a store that refuses
// the read) is a proper error status. A block that misses is open as
// soon as its load has its first bytes: the body streams the store's
// bytes as they arrive, and every block of the range loads at once.
// Once the body has started, a failure (the store failing mid-block, a
// disk read error, the client leaving) aborts the connection, and the
// client sees a body shorter than its Content-Length, never a silently
// truncated 200.
//
// # Read-ahead
//
// After opening a read's blocks the handler may start loading the next
// Config.ReadAhead blocks of the object (Cache.Prefetch), so that a
// client reading an object in order finds them loading or loaded. One
// decision says which (planPrefetch, a pure function, readahead.go):
// only after a sequential read, only blocks this worker owns that are
// neither resident nor loading, at most the cache's free read-ahead
// slots (MaxPrefetches less those in flight) and, while warming up, the
// warm-up tokens left. A read is sequential (the rule: sequential) when
// the same client (clientOf) read some blocks of its window here and
// skipped at most half as many of those this worker owns: the window is
// the 8 blocks before the read, or back to the last block below it the
// client read here when that is farther (at most 64). Reads and digests
// count; the last 64 blocks of each client's object are remembered, for
// at most 4,096 streams. Blocks other workers own are no holes (the
// client read them from their owners), and a parallel reader's requests
// arriving out of order leave few. So a client reading blocks 0, 10, 20
// (or every other block) costs one store read per block read, not up to
// five: read-ahead starts at the second read of a sequential pattern. A read-ahead load is charged to warm-up, and counted
// (talon_worker_cache_prefetches_total, talon_worker_warmup_loads_total),
// only when the cache starts it.
//
// The body is copied from
// the block files with io.Copy into the ResponseWriter, which the kernel
// serves with sendfile on a plain connection: net/http hands the file to
// the connection's ReadFrom, so a listener that wraps connections must
// keep that method (the worker's does). The header is flushed before the
// body, so that all of it goes that way (net/http would otherwise copy
// the first 512 bytes through user space). Over TLS the body is copied
// through user space.
//
// # Warm-up
//
// For Config.WarmupPeriod after New (a worker's start) the handler bounds
// the blocks it loads from the store to Config.WarmupRate a second
// (a token bucket, burst one second's worth): a new worker owns blocks
// that are all cold, and without a bound every reader's first miss goes
// to the store at once. A read that would load more than the bound
// allows is answered 503 warming_up with Retry-After when
// Config.WarmupRefuse is set (placement-replicas 2 or more) and the
// client has another owner to ask (no last=1): the block's next owner,
// which owned it before this worker joined, serves it from its cache.
// Otherwise the read waits for the rate. Digests take the same tokens for
// the cold blocks they read (clients ask them with last=1: they wait).
// Reads of resident blocks, and
// of blocks already loading, are never bounded; read-ahead takes a token
// for each load the cache starts, or does not happen. talon_worker_warmup_loads_total{outcome} counts
// admitted and deferred loads; talon_worker_warming_up is 1 meanwhile.
//
// # Stats
//
// Every request counts in Stats (requests; errors for any non-200; bytes
// served) and, when Config.Observe is set, in the process metrics with
// operation "get" and the error code (or "ok") as the outcome.
package dataserver
