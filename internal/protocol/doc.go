// Package protocol is Talon's binary control protocol: the frame envelope,
// the messages workers, clients and coordinators exchange over TCP, and
// the wire error codes (ADR 0001 sections 3, 7 and "Compatibility and
// rollout"). It is a pure codec plus a small synchronous client (Conn); it
// opens no listener and keeps no state beyond the connection it is given.
//
// # Frames
//
// Every frame is a 24-byte header followed by Length payload bytes. All
// integers are big-endian (network order).
//
//	offset size field      rule
//	0      4    magic      "TLNC" (0x54 0x4C 0x4E 0x43); else ErrBadMagic
//	4      2    version    protocol schema version; this build writes 1 and reads MinVersion..MaxVersion
//	6      2    type       message type (table below)
//	8      4    flags      reserved, must be 0; else ErrBadHeader
//	12     4    length     payload bytes, at most MaxPayload (65536); else *FrameTooLargeError
//	16     8    requestId  0 for pushes; otherwise chosen by the client, echoed by the response
//	24     n    payload    the message fields (tables below)
//
// A reader checks magic, then version, then flags, then length, and reads
// the payload only when all pass. An unsupported version is refused with
// *VersionError (errors.Is ErrUnsupportedVersion) before any payload byte
// is read or decoded; a declared length over the cap is refused with
// *FrameTooLargeError without reading the body. Both leave the Header
// decoded, so the server can answer under the frame's request ID.
//
// # Frozen forever
//
// These never change, in any version, so that any two builds can always
// tell each other why they cannot talk:
//
//   - the header layout above (magic, offsets, widths, byte order);
//   - type 1 is Error, and the Error payload layout below;
//   - code numbers are never reused (new codes may be added; readers
//     accept unknown codes and trust the retryable byte for them).
//
// A reader therefore accepts an Error frame of any version (with flags 0
// and a length within the Error layout's maximum of 1033 bytes) and
// decodes it. Every other part of the format belongs to a version: any
// change to a message layout, including an added field, increments the
// version, and decoders reject trailing bytes.
//
// # Messages
//
// Field notation: u8/u16/u32/u64 are unsigned big-endian integers, i64 is
// two's complement; bool is one byte, 0 or 1 (anything else is
// ErrInvalidValue); str(N) is a u16 byte length then that many bytes of
// UTF-8, at most N bytes; bytes(N) is the same without the UTF-8 rule.
// Types not listed (0, 4..15, 26..31, 36..) are unknown: Decode returns
// ErrUnknownType.
//
//	type name               direction         payload
//	1    Error              response or push  code u16 | retryable bool | minVersion u16 | maxVersion u16 | message str(1024)
//	2    Ping               request           (empty)
//	3    Pong               response to Ping  (empty)
//	16   Register           request           record bytes(16384), not empty
//	17   Heartbeat          request           record bytes(16384), not empty
//	18   Deregister         request           clusterId str(256) | role u8 (1 coordinator, 2 worker) | nodeId str(256) | incarnationId str(256)
//	19   Ack                response          outcome u8 | retry bool | heartbeatIntervalMs u32 | leaseTtlMs u32 | updatedAtUnixMs i64 | revision str(256)
//	20   Attest             request           token bytes(8192), not empty (a secret: never logged or echoed)
//	21   Attested           response          nodeId str(256) | expiresUnixMs i64 (> 0)
//	22   Instructions       request           clusterId str(256) | nodeId str(256) | incarnationId str(256)
//	23   Instructed         response          cordoned bool | persist bool | by str(256) | atUnixMs i64 (>= 0) | revoked bool
//	24   Jobs               request           clusterId str(256) | nodeId str(256) | incarnationId str(256) | count u16 (0..8) × report
//	                                          report: jobId str(64) | state u8 (1 running, 2 done, 3 failed, 4 cancelled) | blocksDone u64 | blocksTotal u64 | bytesDone u64 | bytesTotal u64 | error str(256)
//	25   JobOrders          response          count u16 (0..6) × (jobId str(64) | op u8 (1 warm, 2 free) | count u16 (1..8) × (prefix bool | key str(1024)))
//	32   Subscribe          request           (empty)
//	33   EpochBump          response or push  version u64
//	34   PlacementLookup    request           replicas u16 (1..16) | key bytes(1024), not empty
//	35   PlacementResponse  response          version u64 | count u16 (0..16) | count × (nodeId str(256) | dataAddress str(256))
//
// Requests and their successful responses: Ping→Pong;
// Register, Heartbeat, Deregister→Ack; Attest→Attested;
// Instructions→Instructed; Jobs→JobOrders; Subscribe→EpochBump;
// PlacementLookup→PlacementResponse (see ResponseType). Any request may
// instead be answered by an Error under its request ID.
//
// Field rules beyond the table: Deregister's clusterId and nodeId, and
// PlacementResponse's nodeIds, follow cluster.ValidateID; incarnationId
// and dataAddress must not be empty. Ack outcome is 1 accepted, 2
// duplicate, 3 stale, 4 not_found; updatedAtUnixMs is never negative.
// Encoders apply the same rules as decoders, so nothing is sent that a
// peer of the same version would refuse. Every decoding failure is a
// *FieldError naming the message and field and matching ErrMalformed plus
// one of ErrTruncated, ErrTrailingData, ErrFieldTooLarge, ErrInvalidValue.
//
// The record in Register and Heartbeat is the cluster.Encode form, opaque
// to this layer: it carries its own record schema version, independent of
// the protocol version (record schema and protocol change independently).
// PlacementResponse and EpochBump carry the placement version of ADR
// section 7, an equality token: different means refresh.
//
// # Request IDs and pushes
//
// A client numbers its requests from 1 upward on each connection; the
// response carries the same ID. A server may answer requests of one
// connection out of order. Frames with request ID 0 are pushes: EpochBump
// (sent after Subscribe whenever the version changes; the Subscribe itself
// is answered with the current version under its own ID), or an Error
// that applies to the whole connection, after which the server closes it
// (for example code draining).
//
// # Version rules (mixed-version clusters)
//
// Protocol schema version. A server that reads a frame of a version it
// does not speak (older or newer) sends, under that frame's request ID, an
// Error with code unsupported_version, retryable false, its own
// MinVersion/MaxVersion and a message naming the version received and the
// versions it speaks (FrameErrorReply builds it), written at the frozen
// layout, then closes the connection: the unread payload leaves the
// stream unframed. The client reads that Error whatever its own version.
// Frames over the cap get too_large the same way; bad magic gets nothing.
//
// Record schema version. A Register or Heartbeat whose record has a
// schema version the coordinator does not read (cluster.ErrUnsupportedVersion,
// older or newer) is answered with Error code unsupported_version,
// retryable false, the message naming the record version received and the
// version the coordinator reads (DecodeRecordPayload returns it). Nothing
// of such a record is applied: it is refused before it reaches the store.
// The frame was read whole, so the connection stays usable; likewise for
// any other payload error (invalid_argument), unknown message type
// (invalid_argument) or handler failure (ErrorOf).
//
// # Error codes
//
//	code name                retryable  meaning
//	1    unavailable         yes        the shared store cannot serve now
//	2    timeout             yes        a deadline passed
//	3    unauthenticated     no         credentials rejected
//	4    permission_denied   no         authenticated but not allowed
//	5    invalid_argument    no         malformed request, invalid record, unknown type
//	6    unsupported_version no         protocol or record schema version not read
//	7    too_large           no         frame, field or record over its limit
//	8    not_ready           yes        no current snapshot: fail closed (ADR section 8)
//	9    draining            yes        coordinator shutting down; reconnect
//	10   internal            no         a bug
//	11   no_workers          yes        placement found no healthy worker
//	12   conflict            yes        the store lost too many concurrent-update races
//	13   resource_exhausted  no         a configured limit is reached (the records of a cluster)
//
// CodeOf maps this package's and cluster's sentinels to codes; the server
// maps its own errors (a store's) first and falls back to CodeOf.
// ErrorOf and ErrorWithCode build the Error to send.
//
// # Concurrency and allocation
//
// Messages, Encoder and Decoder are not safe for concurrent use. Decoder
// reuses one buffer (at most MaxFrame bytes) and Encoder one buffer, so
// framing does not allocate per frame once warm; decoding a message
// allocates only its strings and, the first time, its byte slices, which
// never alias the frame buffer. Conn serialises its calls with a mutex and
// starts no goroutine that outlives a call.
//
// Each frame is one Write; both ends read through a 4 KiB bufio.Reader, so
// a frame that arrives whole costs one read. Writes are not coalesced: a
// Conn has at most one request outstanding and a server answers each
// connection's requests in turn, so, but for a rare EpochBump push, no
// second frame is queued behind the one being written (measured on the
// heartbeat path, issue 30: one write per frame at each end).
package protocol
