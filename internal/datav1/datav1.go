package datav1

import "strconv"

// Wire names.
const (
	// PathPrefix is the path of the objects; the key follows it.
	PathPrefix = "/v1/objects/"
	// DigestPrefix is the path of range digests: the SHA-256 of the bytes
	// a read of the same range returns, answered by any worker (owner or
	// not) as the second source a client checks data against.
	DigestPrefix = "/v1/digests/"
	// VersionHeader carries a PlacementVersion as 16 lowercase hex digits.
	VersionHeader = "X-Talon-Placement-Version"
	// ObjectSizeHeader carries the object's size in a 200 answer.
	ObjectSizeHeader = "X-Talon-Object-Size"
	// ObjectVersionHeader carries the object's version (blob.Info.Version:
	// an opaque token, compared only for equality) in a 200 answer and in
	// a version_changed error; empty when the store has no versions.
	ObjectVersionHeader = "X-Talon-Object-Version"
)

// Limits.
const (
	// MaxReplicas bounds the replicas parameter (the control protocol's
	// PlacementLookup limit; a test checks they agree).
	MaxReplicas = 16
	// MaxVersionBytes bounds the version parameter (blob.MaxVersionBytes).
	MaxVersionBytes = 128
)

// Error codes: the "code" of a JSON error and the outcome label of the
// process metrics. A bounded set.
const (
	CodeInvalidKey          = "invalid_key"
	CodeInvalidParameter    = "invalid_parameter"
	CodeNotFound            = "not_found"
	CodeUnknownPath         = "unknown_path"
	CodeMethodNotAllowed    = "method_not_allowed"
	CodeRangeNotSatisfiable = "range_not_satisfiable"
	CodeWrongOwner          = "wrong_owner"
	CodeBackend             = "backend_error"
	CodeNotReady            = "not_ready"
	CodeUnavailable         = "unavailable"
	CodeInternal            = "internal"
	CodeVersionChanged      = "version_changed"
	CodeRateLimited         = "rate_limited"
	CodeResourceExhausted   = "resource_exhausted"
	// CodeForbidden: the credential may not use the data port (a
	// worker's: workers read no other worker's data).
	CodeForbidden = "forbidden"
	// CodeWarmingUp: 503, a new worker past its warm-up rate of store
	// loads; the block's next owner serves it.
	CodeWarmingUp = "warming_up"
	// CodeCanceled is only an outcome: the client left before the answer.
	CodeCanceled = "canceled"
	// CodeAborted is only an outcome: the body failed after it started.
	CodeAborted = "aborted"
)

// BlockKey is the placement key of block index of object: the object key,
// "#", and the index in decimal without leading zeros ("videos/a.mp4#12").
// It is injective: the index is the digits after the last "#", and the
// object is everything before it, so two different blocks never share a
// key even when object keys contain "#". The worker runtime, the data
// server and the client library all use this function.
func BlockKey(object string, index int64) string {
	return object + "#" + strconv.FormatInt(index, 10)
}

// ErrorBody is the JSON of an error answer.
type ErrorBody struct {
	Error struct {
		Code             string `json:"code"`
		Message          string `json:"message"`
		PlacementVersion string `json:"placementVersion,omitempty"`
	} `json:"error"`
}

// Digest is the JSON of a digest answer.
type Digest struct {
	Object     string `json:"object"`
	Offset     int64  `json:"offset"`
	Length     int64  `json:"length"` // bytes hashed: min(requested, objectSize-offset)
	ObjectSize int64  `json:"objectSize"`
	SHA256     string `json:"sha256"` // lowercase hex
	// Version is the object version the bytes hashed are of.
	Version string `json:"version,omitempty"`
}
