// Package blob reads objects from the blob store, the durable source the
// worker's block cache loads from (issue 7). A Store is chosen with the
// --blob-store URL:
//
//	file:///var/lib/talon/blobs      objects are regular files below the directory
//	http://host/prefix               objects are GET host/prefix/<escaped key>,
//	https://host/prefix              read with Range requests
//
// Reads are ranges: Size gives an object's length and ReadRange streams
// [off, off+length) of it. ReadRange returns an io.ReadCloser rather than
// filling a caller's buffer (io.ReaderAt style) so that the cache can stream
// a block from the backend into its temporary file through a checksum,
// without holding a block-sized buffer per in-flight load.
//
// Invariants:
//
//   - Object keys are checked by ValidateKey before any I/O, by every
//     backend: slash-separated relative paths of at most MaxKeyBytes bytes of
//     valid UTF-8, no empty, "." or ".." segment, no leading or trailing
//     slash, no NUL, other control character or backslash. A key therefore
//     names one object in exactly one way, and cannot leave the store.
//   - The file backend never reads outside its directory, symlinks included:
//     every open goes through os.OpenInRoot. Only regular files are objects.
//   - The HTTP backend never buffers an object: bodies are streamed and
//     bounded by the requested length. A server that ignores Range (answers
//     200 with the whole object) is handled by reading the prefix the range
//     needs: for off 0 the first length bytes; for off > 0 the skipped bytes
//     are discarded while streaming, up to Options.MaxDiscardBytes, and past
//     that limit the read fails with ErrRangeNotSupported rather than
//     downloading gigabytes to serve one block.
//   - Stores keep no per-object state and are safe for concurrent use.
//
// Errors: ErrInvalidKey (the key broke a rule; *KeyError names the key and
// the rule), ErrNotFound (no such object, HTTP 404 or 410), ErrBackend (the
// store failed: I/O error, HTTP 5xx or other unexpected status, timeout of
// the HTTP client, malformed response), ErrRangeNotSupported (wraps
// ErrBackend too). When the caller's ctx ends, the error wraps ctx.Err()
// and not ErrBackend: a caller that gave up is not a backend failure.
package blob
