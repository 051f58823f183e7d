// Package cluster defines the node status record that every Talon process
// publishes to the shared cluster-state store (ADR 0001, sections 2 and 3).
//
// Invariants:
//
//   - A Record is bounded: Validate enforces the ADR limits (identifier and
//     address fields at most 256 bytes, at most 16 labels, label keys at most
//     63 bytes, label values at most 256 bytes, encoded form at most 16 KiB).
//     Every error names the field, the offending value or its size, and the
//     limit.
//   - The encoded form carries its own schema version. Decode checks the
//     version before it decodes any other field and never returns a partially
//     decoded record: on error the record is nil.
//   - The encoding is JSON, byte for byte what encoding/json's Marshal
//     wrote for it (field order, omitempty, HTML-safe escaping, map keys
//     sorted), because operators read it with etcdctl and kubectl. Encode
//     writes it with an appender generated for the fixed Record struct
//     (append_gen.go, with the hand-written helpers of append.go), which
//     tests and fuzz targets hold to encoding/json's output; the heartbeat
//     path's budget rules out reflection there.
//   - Decode reads the shape Encode writes (names in field order, no
//     whitespace, no escapes) with a scanner (scan.go, its name tables and
//     per-member decode generated in scan_gen.go), which returns exactly
//     what the general decoder would (FuzzDecodeCanonical);
//     the strings of such a record share one copy of the input (one
//     allocation; a string kept alone keeps that copy, at most
//     MaxRecordBytes, alive). Anything else goes to the general decoder.
//   - The general decoder is github.com/go-json-experiment/json configured
//     with its v1 options (decodeOptions), so it accepts, refuses and decodes
//     exactly what encoding/json v1 did, which FuzzDecodeDifferential
//     checks: object names match case-insensitively (strings.EqualFold, so
//     "NODEID" sets nodeId, but "node_id" does not), a repeated name keeps
//     the last value (a repeated schemaVersion included), a null leaves a
//     scalar field as it was, invalid UTF-8 in a string becomes U+FFFD, and
//     unknown names are ignored. The one deliberate difference: any data
//     after the record is refused as ErrMalformed, where encoding/json's
//     Decoder.More let data that starts with '}' or ']' through.
//   - Updates are ordered by (incarnation_id, heartbeat_seq) with Order, a pure
//     function. Stores apply it; callers never compare sequences themselves.
//   - Health seen by readers is derived from the age of the last accepted
//     update (Timing.Classify): a record older than UnhealthyAfter is
//     unhealthy whatever it reported, and one older than LeaseTTL is expired
//     and excluded from placement and normal listings.
//
// The schema is written once, in record.go: internal/tools/recordgen
// reads Record and the structs it nests (Capacity, Counters) with go/ast
// and writes append_gen.go and scan_gen.go here, and the /api/v1 mirrors
// and conversions in internal/apiv1 (types_gen.go, convert_gen.go). After
// changing a field or tag, run
//
//	go generate ./internal/cluster/ ./internal/apiv1/   (make generate)
//
// TestGeneratedUpToDate (internal/tools/recordgen, part of go test ./...)
// fails while a generated file is stale. A plain scalar field (string,
// bool, int64, uint64, or a named string type with an intern function in
// scan.go) needs no other edit in this package or apiv1; the labels map
// and string lists call hand-written helpers, and a field of any other
// type is refused by the generator. Generated files carry the standard
// "Code generated ... DO NOT EDIT." line, by which make lint's size gate
// skips them (their switches are long by construction); the copy detector
// still reads them.
//
// The package is pure: no I/O, no clocks (callers pass times in), safe for
// concurrent use because nothing in it is mutable shared state.
package cluster

//go:generate go run ../tools/recordgen -pkg cluster
