package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"
)

// JobLog keeps operators' cache jobs (warm, free) by cluster, apart from
// any record: a job is created by the coordinator that took the
// operator's request, and every coordinator hands it to the workers that
// ask over their control connections, folds their progress into it and
// ends it, so a job outlives the coordinator that started it. Updates are
// optimistic (a revision compared on write), so two coordinators folding
// progress at once never lose each other's (UpdateJob).
//
// Backends implement it beside Store (the coordinator finds it with a
// type assertion), outside the records' keyspace, so a reader of the
// records (an older release among them) never sees a job. At most MaxJobs
// per cluster, running and ended together; coordinators delete ended jobs
// after a retention, and the oldest ended job to make room for a new one.
type JobLog interface {
	// CreateJob writes j, a new job: ErrJobExists when its ID is kept,
	// ErrTooManyJobs when the cluster keeps MaxJobs.
	CreateJob(ctx context.Context, clusterID string, j Job) error
	// Job returns the kept job id and its revision (an opaque token for
	// ReplaceJob), found false when none is kept.
	Job(ctx context.Context, clusterID, id string) (j Job, revision string, found bool, err error)
	// ReplaceJob writes j in place of the kept job of its ID when that is
	// still at revision; replaced is false when it changed or is gone.
	ReplaceJob(ctx context.Context, clusterID string, j Job, revision string) (replaced bool, err error)
	// Jobs returns the cluster's kept jobs, oldest first (by creation
	// time, ties by ID). A kept job that does not decode is skipped.
	Jobs(ctx context.Context, clusterID string) ([]Job, error)
	// DeleteJob forgets job id; none is no error.
	DeleteJob(ctx context.Context, clusterID, id string) error
}

// Job is an operator's cache job: load (warm) or evict (free) the blocks
// of some objects on the workers of a cluster.
type Job struct {
	ID string `json:"id"`
	// Op is JobWarm or JobFree.
	Op      string      `json:"op"`
	Targets []JobTarget `json:"targets"`
	// By is the operator's principal; Coordinator the node ID of the
	// coordinator that took the request.
	By              string `json:"by"`
	Coordinator     string `json:"coordinator"`
	CreatedAtUnixMs int64  `json:"createdAtUnixMs"`
	// State is JobRunning until the job ends: JobDone, JobPartial (some
	// worker failed or left) or JobCancelled.
	State         string `json:"state"`
	EndedAtUnixMs int64  `json:"endedAtUnixMs,omitempty"`
	// CancelledBy is the principal that cancelled it.
	CancelledBy string `json:"cancelledBy,omitempty"`
	// Workers are the job's workers (the healthy workers when it was
	// created), sorted by node ID, each with its progress.
	Workers []JobWorker `json:"workers"`
}

// JobTarget is one object, or every object under a prefix.
type JobTarget struct {
	Key    string `json:"key"`
	Prefix bool   `json:"prefix,omitempty"`
}

// JobWorker is one worker's part of a job, as it last reported it.
type JobWorker struct {
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
	JobWarm = "warm"
	JobFree = "free"

	JobRunning   = "running"
	JobDone      = "done"
	JobPartial   = "partial"
	JobCancelled = "cancelled"

	// A worker's part: pending until it picks the job up, running, then
	// done, failed (Error says why), left (it left the cluster before it
	// finished) or cancelled.
	WorkerPending   = "pending"
	WorkerRunning   = "running"
	WorkerDone      = "done"
	WorkerFailed    = "failed"
	WorkerLeft      = "left"
	WorkerCancelled = "cancelled"
)

// Bounds of the job log.
const (
	// MaxJobs bounds the jobs a cluster keeps, running and ended.
	MaxJobs = 64
	// MaxJobTargets bounds a job's targets.
	MaxJobTargets = 8
	// MaxJobKey bounds a target's key or prefix in bytes (blob keys).
	MaxJobKey = 1024
	// MaxJobWorkers bounds a job's workers.
	MaxJobWorkers = 1000
	// MaxJobID bounds a job ID in bytes.
	MaxJobID = 64
	// MaxJobError bounds a worker's error text in bytes.
	MaxJobError = 256
	// MaxJobText bounds a principal or node ID in bytes.
	MaxJobText = 256
	// MaxJobBytes bounds a job's stored form (under Kubernetes' 256 KiB
	// of annotations).
	MaxJobBytes = 200_000
)

// Job log errors.
var (
	// ErrJobExists is CreateJob's answer for an ID already kept.
	ErrJobExists = errors.New("a job of this ID exists")
	// ErrTooManyJobs is CreateJob's answer past MaxJobs.
	ErrTooManyJobs = fmt.Errorf("jobs: at most %d kept per cluster; delete or wait for ended ones to expire", MaxJobs)
)

// Ended reports whether the job is over.
func (j *Job) Ended() bool { return j.State != JobRunning }

// Worker returns the part of worker nodeID, nil when it is not one of the
// job's.
func (j *Job) Worker(nodeID string) *JobWorker {
	i, ok := slices.BinarySearchFunc(j.Workers, nodeID, func(w JobWorker, id string) int {
		switch {
		case w.NodeID < id:
			return -1
		case w.NodeID > id:
			return 1
		}
		return 0
	})
	if !ok {
		return nil
	}
	return &j.Workers[i]
}

// WorkerEnded reports whether a worker's part is over.
func WorkerEnded(state string) bool {
	switch state {
	case WorkerDone, WorkerFailed, WorkerLeft, WorkerCancelled:
		return true
	}
	return false
}

// ValidateJob checks a job against the log's rules; the error names the
// field, the value and the rule, and wraps ErrInvalidRecord.
func ValidateJob(j *Job) error {
	if err := validateJobHead(j); err != nil {
		return fmt.Errorf("%w: job %q: %v", ErrInvalidRecord, j.ID, err)
	}
	for i, w := range j.Workers {
		if err := validateJobWorker(w); err != nil {
			return fmt.Errorf("%w: job %q: workers[%d]: %v", ErrInvalidRecord, j.ID, i, err)
		}
		if i > 0 && j.Workers[i-1].NodeID >= w.NodeID {
			return fmt.Errorf("%w: job %q: workers: %q after %q: must be sorted by node ID without repeats", ErrInvalidRecord, j.ID, w.NodeID, j.Workers[i-1].NodeID)
		}
	}
	return nil
}

func validateJobHead(j *Job) error {
	if err := ValidateJobID(j.ID); err != nil {
		return err
	}
	if j.Op != JobWarm && j.Op != JobFree {
		return fmt.Errorf("op %q: must be %s or %s", j.Op, JobWarm, JobFree)
	}
	if len(j.Targets) == 0 || len(j.Targets) > MaxJobTargets {
		return fmt.Errorf("targets: %d of them; must be 1 to %d", len(j.Targets), MaxJobTargets)
	}
	for i, t := range j.Targets {
		if err := ValidateJobKey(t.Key); err != nil {
			return fmt.Errorf("targets[%d].key: %v", i, err)
		}
	}
	switch j.State {
	case JobRunning, JobDone, JobPartial, JobCancelled:
	default:
		return fmt.Errorf("state %q: must be running, done, partial or cancelled", j.State)
	}
	for _, f := range []struct{ name, v string }{{"by", j.By}, {"coordinator", j.Coordinator}, {"cancelledBy", j.CancelledBy}} {
		if len(f.v) > MaxJobText || !utf8.ValidString(f.v) {
			return fmt.Errorf("%s: %d bytes; must be valid UTF-8 of at most %d bytes", f.name, len(f.v), MaxJobText)
		}
	}
	if j.CreatedAtUnixMs < 0 || j.EndedAtUnixMs < 0 {
		return fmt.Errorf("createdAtUnixMs %d, endedAtUnixMs %d: must not be negative", j.CreatedAtUnixMs, j.EndedAtUnixMs)
	}
	if len(j.Workers) > MaxJobWorkers {
		return fmt.Errorf("workers: %d of them; at most %d", len(j.Workers), MaxJobWorkers)
	}
	return nil
}

func validateJobWorker(w JobWorker) error {
	if w.NodeID == "" || len(w.NodeID) > MaxJobText || !utf8.ValidString(w.NodeID) {
		return fmt.Errorf("nodeId %q: must be 1 to %d bytes of UTF-8", w.NodeID, MaxJobText)
	}
	switch w.State {
	case WorkerPending, WorkerRunning, WorkerDone, WorkerFailed, WorkerLeft, WorkerCancelled:
	default:
		return fmt.Errorf("state %q of %q: must be pending, running, done, failed, left or cancelled", w.State, w.NodeID)
	}
	if w.BlocksDone < 0 || w.BlocksTotal < 0 || w.BytesDone < 0 || w.BytesTotal < 0 {
		return fmt.Errorf("progress of %q: counts must not be negative", w.NodeID)
	}
	if len(w.Error) > MaxJobError || !utf8.ValidString(w.Error) {
		return fmt.Errorf("error of %q: %d bytes; must be valid UTF-8 of at most %d bytes", w.NodeID, len(w.Error), MaxJobError)
	}
	return nil
}

// ValidateJobID checks a job ID: 1 to MaxJobID bytes of lower-case
// letters, digits and '-', so that it is a key part and a label value on
// every backend.
func ValidateJobID(id string) error {
	if id == "" || len(id) > MaxJobID {
		return fmt.Errorf("id %q: %d bytes; must be 1 to %d", id, len(id), MaxJobID)
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

// ValidateJobKey checks a target's object key or prefix: 1 to MaxJobKey
// bytes of UTF-8 without control characters.
func ValidateJobKey(k string) error {
	if k == "" || len(k) > MaxJobKey {
		return fmt.Errorf("%q: %d bytes; must be 1 to %d", truncateKey(k), len(k), MaxJobKey)
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

// EncodeJob is the stored form of a job, after ValidateJob.
func EncodeJob(j *Job) ([]byte, error) {
	if err := ValidateJob(j); err != nil {
		return nil, err
	}
	b, err := json.Marshal(j)
	if err != nil {
		return nil, err
	}
	if len(b) > MaxJobBytes {
		return nil, fmt.Errorf("%w: job %q: %d bytes stored; at most %d", ErrInvalidRecord, j.ID, len(b), MaxJobBytes)
	}
	return b, nil
}

// DecodeJob reads EncodeJob's bytes (untrusted: the store's).
func DecodeJob(b []byte) (Job, error) {
	if len(b) > MaxJobBytes {
		return Job{}, fmt.Errorf("%w: job: %d bytes stored; at most %d", ErrInvalidRecord, len(b), MaxJobBytes)
	}
	var j Job
	if err := json.Unmarshal(b, &j); err != nil {
		return Job{}, fmt.Errorf("%w: job: %v", ErrInvalidRecord, err)
	}
	if err := ValidateJob(&j); err != nil {
		return Job{}, err
	}
	return j, nil
}

// SortJobWorkers orders a job's workers by node ID.
func SortJobWorkers(ws []JobWorker) {
	slices.SortFunc(ws, func(a, b JobWorker) int {
		switch {
		case a.NodeID < b.NodeID:
			return -1
		case a.NodeID > b.NodeID:
			return 1
		}
		return 0
	})
}

// SortJobs orders jobs oldest first (creation time, ties by ID).
func SortJobs(jobs []Job) {
	slices.SortFunc(jobs, func(a, b Job) int {
		if a.CreatedAtUnixMs != b.CreatedAtUnixMs {
			return int(a.CreatedAtUnixMs - b.CreatedAtUnixMs)
		}
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
}

// jobUpdateAttempts bounds UpdateJob's optimistic retries.
const jobUpdateAttempts = 16

// ErrNoChange, returned by an UpdateJob function, writes nothing.
var ErrNoChange = errors.New("no change")

// UpdateJob applies fn to the kept job id and writes the result when the
// job did not change meanwhile, reading and applying again when it did (a
// peer coordinator's update), up to jobUpdateAttempts times (ErrConflict
// after). fn returning ErrNoChange writes nothing and returns the job as
// read; found is false when no job of that ID is kept.
func UpdateJob(ctx context.Context, log JobLog, clusterID, id string, fn func(*Job) error) (j Job, found bool, err error) {
	for range jobUpdateAttempts {
		cur, rev, ok, err := log.Job(ctx, clusterID, id)
		if err != nil || !ok {
			return Job{}, ok, err
		}
		next := cloneJob(cur)
		switch err := fn(&next); {
		case errors.Is(err, ErrNoChange):
			return cur, true, nil
		case err != nil:
			return cur, true, err
		}
		replaced, err := log.ReplaceJob(ctx, clusterID, next, rev)
		if err != nil {
			return Job{}, true, err
		}
		if replaced {
			return next, true, nil
		}
	}
	return Job{}, true, fmt.Errorf("%w: job %q changed %d times in a row while it was updated", ErrConflict, id, jobUpdateAttempts)
}

func cloneJob(j Job) Job {
	j.Targets = slices.Clone(j.Targets)
	j.Workers = slices.Clone(j.Workers)
	return j
}

// DecodeJobs decodes a backend's stored jobs, skipping those that do not
// decode, oldest first.
func DecodeJobs(vals [][]byte) []Job {
	jobs := make([]Job, 0, len(vals))
	for _, v := range vals {
		if j, err := DecodeJob(v); err == nil {
			jobs = append(jobs, j)
		}
	}
	SortJobs(jobs)
	return jobs
}
