// Package datav1 is the worker data path's wire contract, shared by the
// server (internal/worker/dataserver) and its clients (internal/client,
// talon get): names, limits, error codes, the block placement key, and
// Fetch, the small client that verifies every answer. It knows no cache,
// store or coordinator.
//
// # Protocol
//
//	GET  /v1/objects/<key>?offset=N&length=M&replicas=R
//	HEAD /v1/objects/<key>?offset=N&length=M&replicas=R
//	X-Talon-Placement-Version: <16 lowercase hex digits>   (request, optional)
//
// The key is the object key with each path segment percent-escaped
// (Fetch does this). The range is given by query parameters, not by a
// Range header: a request carrying Range is refused (400) rather than
// answered with something the sender did not ask for.
//
//   - offset: first byte, 0 or more; default 0.
//   - length: bytes wanted, 1 to MaxRangeBlocks*BlockSize; default: to the
//     end of the block holding offset. The range is cut at the end of the
//     object, as HTTP ranges are, so asking for (i*BlockSize, BlockSize)
//     returns block i whole, the last one short.
//   - replicas: how many owners the client asked placement for, 1 to 16;
//     default 1. Diagnostics only: the worker serves a block when it is
//     among the first placement-replicas owners (the cluster's setting,
//     never the client's) of the block's placement key, BlockKey(key,
//     index).
//   - version: the object version the client reads (from an earlier
//     answer's X-Talon-Object-Version, or from the store itself), at most
//     MaxVersionBytes. The worker answers only with bytes of that version:
//     when the store holds another it answers 412 version_changed. A read
//     that pins the version of its first answer never mixes versions.
//   - fresh=1: the worker asks the store for the object's current version
//     instead of answering from its short-lived cache of object sizes and
//     versions (a client's first request of a read).
//
// A 200 answer carries Content-Length (exactly the bytes of the cut
// range), Content-Type application/octet-stream, X-Talon-Object-Size (the
// object's size), X-Talon-Object-Version (the object's version) and
// X-Talon-Placement-Version (the worker's current version).
//
//	GET /v1/digests/<key>?offset=N&length=M[&version=V]
//
// answers the SHA-256 of the same range as JSON (Digest): a second source
// a client checks another worker's bytes against. An owner of the blocks
// answers from its cache; any other worker reads the blocks from the
// store without caching them (a client cannot fill a cache it does not
// own), at most a few such answers per second for each client (429
// rate_limited with Retry-After beyond). HEAD answers the same headers without a body and without
// loading blocks. An empty object answers offset 0 with 200 and no body.
//
// Errors are JSON {"error":{"code":..., "message":...}} with:
//
//	400 invalid_key, invalid_parameter (the message names the parameter or header)
//	404 not_found (no such object), unknown_path
//	405 method_not_allowed
//	416 range_not_satisfiable (offset at or past the end; Content-Range: bytes */size)
//	421 wrong_owner: a block of the range is not owned by this worker under
//	    its current placement; X-Talon-Placement-Version carries the
//	    worker's version (also in the body as placementVersion). Clients
//	    refresh placement and retry elsewhere.
//	412 version_changed (the store holds another version than the one asked
//	    for; X-Talon-Object-Version carries the current one)
//	429 rate_limited (too many digests of blocks this worker does not own),
//	    resource_exhausted (too many reads that make the worker ask the
//	    store: fresh=1, a version= it does not know, an object it has not
//	    looked up, a missing one; a few tens a second for each client);
//	    both with Retry-After
//	502 backend_error (the blob store failed)
//	503 not_ready (starting or draining; Retry-After), unavailable (cache closed)
//	500 internal (the cache's own disk failed)
package datav1
