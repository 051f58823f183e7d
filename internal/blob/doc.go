// Package blob reads objects from the blob store, the durable source the
// worker's block cache loads from (issue 7). A Store is chosen with the
// --blob-store URL:
//
//	file:///var/lib/talon/blobs      objects are regular files below the directory
//	http://host/prefix               objects are GET host/prefix/<escaped key>,
//	https://host/prefix              read with Range requests
//	s3://bucket/prefix?...           objects are keys <prefix>/<key> of an S3 bucket
//	                                 (AWS or S3-compatible), read with ranged GetObject
//	gs://bucket/prefix?...           objects of a Google Cloud Storage bucket
//	az://account/container/prefix?.. blobs of an Azure Blob Storage container
//
// The file and http(s) backends are here, with the contract (Store,
// Versioned, Info, Checksum, ValidateKey, the errors) and what the
// remote backends share (RemoteRead, NewBody, NormVersion). The cloud
// backends are packages of their own, blob/s3, blob/gcs and blob/azure
// (with blob/remote, the URL parameters and redirect rule they share), so
// that their SDKs link only where they are wired in: Open takes them as a
// table of Openers by scheme, which internal/app builds. Packages that
// need only the contract (datav1, client, the cache) link no SDK; deptest
// holds it.
//
// The gs:// backend uses cloud.google.com/go/storage and az:// the Azure
// SDK's azblob (the official clients; gocloud.dev would hide the
// generation and ETag preconditions and the checksums as it does for S3).
// Both take endpoint= (an emulator or private endpoint), anonymous=true
// (no credentials), request_timeout and max_attempts (the clients' own
// retry policies with exponential backoff). GCS credentials come from
// Application Default Credentials; Azure's from
// AZURE_STORAGE_CONNECTION_STRING, else DefaultAzureCredential. Versions
// are the GCS generation (reads of a generation that is gone are
// ErrVersionChanged) and the Azure ETag (If-Match); checksums GCS's MD5 or
// CRC32C and Azure's Content-MD5 when the blob has one. Traced wraps any
// Store so that each fetch is an OpenTelemetry span.
//
// The s3:// backend uses aws-sdk-go-v2 (chosen over gocloud.dev/blob, which
// wraps the same SDK, because reads must be conditional on an ETag or a
// version ID and Stat must read S3's full-object checksums, both of which
// gocloud.dev's portable API hides). Its URL parameters: region, endpoint
// (an S3-compatible store), use_path_style, profile (named as gocloud.dev
// names them), ca_file (PEM roots for the endpoint's TLS), request_timeout
// (one request, body included; default 60s) and max_attempts (retries with
// jittered exponential backoff, throttling such as 503 SlowDown included;
// default 5). Credentials come from the SDK's default chain (environment,
// shared config files and profiles, web identity / IRSA, container and
// instance roles) and never from the URL.
//
// Versions: every backend here implements Versioned. Stat gives an
// object's size, version (S3 version ID or ETag; HTTP strong ETag or
// Last-Modified; a file's size and modification time) and the store's own
// checksum where it keeps one (S3 full-object SHA-256, CRC-64/NVME,
// CRC-32C, or an ETag that is an MD5); ReadVersion refuses with
// ErrVersionChanged to return bytes of another version (If-Match, the
// version ID, If-Unmodified-Since, or the open file's metadata).
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
// the rule), ErrNotFound (no such object, HTTP 404 or 410), ErrVersionChanged
// (HTTP 412: the object is no longer at the version asked for), ErrBackend
// (the store failed: I/O error, HTTP 5xx or other unexpected status, 403
// of wrong credentials, timeout of the HTTP client, malformed response),
// ErrRangeNotSupported (wraps ErrBackend too). S3, GCS and Azure errors
// keep only the status and the error code (an Azure SDK error quotes the
// request URL, SAS token included): an S3 message may quote the request, and no
// credential may reach a log, a record or a client. When the caller's ctx ends, the error wraps ctx.Err()
// and not ErrBackend: a caller that gave up is not a backend failure.
package blob
