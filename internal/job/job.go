// Package job is the operator's cache job (talonctl warm, free): its
// fields, bounds and rules, and its stored form. The store keeps jobs
// (state.JobLog), the coordinators run them and /api/v1 shows them; this
// package is what they share, with no dependency beyond the standard
// library, so that talonctl may check a job ID without linking the store.
package job

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// ErrInvalid is a job that breaks a rule of Validate.
var ErrInvalid = errors.New("invalid job")

// MaxKept bounds the jobs a cluster keeps, running and ended.
const MaxKept = 64

// Job is an operator's cache job: load (warm) or evict (free) the blocks
// of some objects on the workers of a cluster.
type Job struct {
	ID string `json:"id"`
	// Op is Warm or Free.
	Op      string   `json:"op"`
	Targets []Target `json:"targets"`
	// By is the operator's principal; Coordinator the node ID of the
	// coordinator that took the request.
	By              string `json:"by"`
	Coordinator     string `json:"coordinator"`
	CreatedAtUnixMs int64  `json:"createdAtUnixMs"`
	// State is Running until the job ends: Done, Partial (some
	// worker failed or left) or Cancelled.
	State         string `json:"state"`
	EndedAtUnixMs int64  `json:"endedAtUnixMs,omitempty"`
	// CancelledBy is the principal that cancelled it.
	CancelledBy string `json:"cancelledBy,omitempty"`
	// Workers are the job's workers (the healthy workers when it was
	// created), sorted by node ID, each with its progress.
	Workers []Part `json:"workers"`
}

// Target is one object, or every object under a prefix.
type Target struct {
	Key    string `json:"key"`
	Prefix bool   `json:"prefix,omitempty"`
}

// Part is one worker's part of a job, as it last reported it.
type Part struct {
	NodeID      string `json:"nodeId"`
	State       string `json:"state"`
	BlocksDone  int64  `json:"blocksDone,omitempty"`
	BlocksTotal int64  `json:"blocksTotal,omitempty"`
	BytesDone   int64  `json:"bytesDone,omitempty"`
	BytesTotal  int64  `json:"bytesTotal,omitempty"`
	Error       string `json:"error,omitempty"`
}

// Job operations, job states and worker states.
const (
	Warm = "warm"
	Free = "free"

	Running   = "running"
	Done      = "done"
	Partial   = "partial"
	Cancelled = "cancelled"

	// A worker's part: pending until it picks the job up, running, then
	// done, failed (Error says why), left (it left the cluster before it
	// finished) or cancelled.
	PartPending   = "pending"
	PartRunning   = "running"
	PartDone      = "done"
	PartFailed    = "failed"
	PartLeft      = "left"
	PartCancelled = "cancelled"
)

// Bounds of the job log.
const (
	// MaxTargets bounds a job's targets.
	MaxTargets = 8
	// MaxKey bounds a target's key or prefix in bytes (blob keys).
	MaxKey = 1024
	// MaxParts bounds a job's workers.
	MaxParts = 1000
	// MaxID bounds a job ID in bytes.
	MaxID = 64
	// MaxError bounds a worker's error text in bytes.
	MaxError = 256
	// MaxText bounds a principal or node ID in bytes.
	MaxText = 256
	// MaxBytes bounds a job's stored form (under Kubernetes' 256 KiB
	// of annotations).
	MaxBytes = 200_000
)

// Ended reports whether the job is over.
func (j *Job) Ended() bool { return j.State != Running }

// Part returns the part of worker nodeID, nil when it is not one of the
// job's.
func (j *Job) Part(nodeID string) *Part {
	i, ok := slices.BinarySearchFunc(j.Workers, nodeID, func(w Part, id string) int { return strings.Compare(w.NodeID, id) })
	if !ok {
		return nil
	}
	return &j.Workers[i]
}

// PartEnded reports whether a worker's part is over.
func PartEnded(state string) bool {
	switch state {
	case PartDone, PartFailed, PartLeft, PartCancelled:
		return true
	}
	return false
}

// Validate checks a job against the log's rules; the error names the
// field, the value and the rule, and wraps ErrInvalid.
func Validate(j *Job) error {
	if err := validateHead(j); err != nil {
		return fmt.Errorf("%w: job %q: %v", ErrInvalid, j.ID, err)
	}
	for i, w := range j.Workers {
		if err := validatePart(w); err != nil {
			return fmt.Errorf("%w: job %q: workers[%d]: %v", ErrInvalid, j.ID, i, err)
		}
		if i > 0 && j.Workers[i-1].NodeID >= w.NodeID {
			return fmt.Errorf("%w: job %q: workers: %q after %q: must be sorted by node ID without repeats", ErrInvalid, j.ID, w.NodeID, j.Workers[i-1].NodeID)
		}
	}
	return nil
}

func validateHead(j *Job) error {
	if err := ValidateID(j.ID); err != nil {
		return err
	}
	if j.Op != Warm && j.Op != Free {
		return fmt.Errorf("op %q: must be %s or %s", j.Op, Warm, Free)
	}
	if len(j.Targets) == 0 || len(j.Targets) > MaxTargets {
		return fmt.Errorf("targets: %d of them; must be 1 to %d", len(j.Targets), MaxTargets)
	}
	for i, t := range j.Targets {
		if err := ValidateKey(t.Key); err != nil {
			return fmt.Errorf("targets[%d].key: %v", i, err)
		}
	}
	switch j.State {
	case Running, Done, Partial, Cancelled:
	default:
		return fmt.Errorf("state %q: must be running, done, partial or cancelled", j.State)
	}
	for _, f := range []struct{ name, v string }{{"by", j.By}, {"coordinator", j.Coordinator}, {"cancelledBy", j.CancelledBy}} {
		if len(f.v) > MaxText || !utf8.ValidString(f.v) {
			return fmt.Errorf("%s: %d bytes; must be valid UTF-8 of at most %d bytes", f.name, len(f.v), MaxText)
		}
	}
	if j.CreatedAtUnixMs < 0 || j.EndedAtUnixMs < 0 {
		return fmt.Errorf("createdAtUnixMs %d, endedAtUnixMs %d: must not be negative", j.CreatedAtUnixMs, j.EndedAtUnixMs)
	}
	if len(j.Workers) > MaxParts {
		return fmt.Errorf("workers: %d of them; at most %d", len(j.Workers), MaxParts)
	}
	return nil
}

func validatePart(w Part) error {
	if w.NodeID == "" || len(w.NodeID) > MaxText || !utf8.ValidString(w.NodeID) {
		return fmt.Errorf("nodeId %q: must be 1 to %d bytes of UTF-8", w.NodeID, MaxText)
	}
	switch w.State {
	case PartPending, PartRunning, PartDone, PartFailed, PartLeft, PartCancelled:
	default:
		return fmt.Errorf("state %q of %q: must be pending, running, done, failed, left or cancelled", w.State, w.NodeID)
	}
	if w.BlocksDone < 0 || w.BlocksTotal < 0 || w.BytesDone < 0 || w.BytesTotal < 0 {
		return fmt.Errorf("progress of %q: counts must not be negative", w.NodeID)
	}
	if len(w.Error) > MaxError || !utf8.ValidString(w.Error) {
		return fmt.Errorf("error of %q: %d bytes; must be valid UTF-8 of at most %d bytes", w.NodeID, len(w.Error), MaxError)
	}
	return nil
}

// ValidateID checks a job ID: 1 to MaxID bytes of lower-case
// letters, digits and '-', so that it is a key part and a label value on
// every backend.
func ValidateID(id string) error {
	if id == "" || len(id) > MaxID {
		return fmt.Errorf("id %q: %d bytes; must be 1 to %d", id, len(id), MaxID)
	}
	for _, r := range id {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' {
			return fmt.Errorf("id %q: %q is not allowed; only lower-case letters, digits and '-'", id, r)
		}
	}
	if id[0] == '-' || id[len(id)-1] == '-' {
		return fmt.Errorf("id %q: must start and end with a letter or digit", id)
	}
	return nil
}

// ValidateKey checks a target's object key or prefix: 1 to MaxKey
// bytes of UTF-8 without control characters.
func ValidateKey(k string) error {
	if k == "" || len(k) > MaxKey {
		return fmt.Errorf("%q: %d bytes; must be 1 to %d", truncateKey(k), len(k), MaxKey)
	}
	if !utf8.ValidString(k) {
		return fmt.Errorf("%q: not valid UTF-8", truncateKey(k))
	}
	for _, r := range k {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%q: control character %U is not allowed", truncateKey(k), r)
		}
	}
	return nil
}

func truncateKey(k string) string {
	if len(k) > 64 {
		return k[:64] + "…"
	}
	return k
}

// Encode is the stored form of a job, after Validate.
func Encode(j *Job) ([]byte, error) {
	if err := Validate(j); err != nil {
		return nil, err
	}
	b, err := json.Marshal(j)
	if err != nil {
		return nil, err
	}
	if len(b) > MaxBytes {
		return nil, fmt.Errorf("%w: job %q: %d bytes stored; at most %d", ErrInvalid, j.ID, len(b), MaxBytes)
	}
	return b, nil
}

// Decode reads Encode's bytes (untrusted: the store's).
func Decode(b []byte) (Job, error) {
	if len(b) > MaxBytes {
		return Job{}, fmt.Errorf("%w: job: %d bytes stored; at most %d", ErrInvalid, len(b), MaxBytes)
	}
	var j Job
	if err := json.Unmarshal(b, &j); err != nil {
		return Job{}, fmt.Errorf("%w: job: %v", ErrInvalid, err)
	}
	if err := Validate(&j); err != nil {
		return Job{}, err
	}
	return j, nil
}

// SortParts orders a job's workers by node ID.
func SortParts(ws []Part) {
	slices.SortFunc(ws, func(a, b Part) int { return strings.Compare(a.NodeID, b.NodeID) })
}

// Sort orders jobs oldest first (creation time, ties by ID).
func Sort(jobs []Job) {
	slices.SortFunc(jobs, func(a, b Job) int {
		return cmp.Or(cmp.Compare(a.CreatedAtUnixMs, b.CreatedAtUnixMs), strings.Compare(a.ID, b.ID))
	})
}

// DecodeAll decodes a backend's stored jobs, skipping those that do not
// decode, oldest first.
func DecodeAll(vals [][]byte) []Job {
	jobs := make([]Job, 0, len(vals))
	for _, v := range vals {
		if j, err := Decode(v); err == nil {
			jobs = append(jobs, j)
		}
	}
	Sort(jobs)
	return jobs
}
