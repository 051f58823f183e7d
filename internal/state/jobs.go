package state

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/talonhq/talon/internal/job"
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
// records (an older release among them) never sees a job. At most job.MaxKept
// per cluster, running and ended together; coordinators delete ended jobs
// after a retention, and the oldest ended job to make room for a new one.
type JobLog interface {
	// CreateJob writes j, a new job: ErrJobExists when its ID is kept,
	// ErrTooManyJobs when the cluster keeps job.MaxKept.
	CreateJob(ctx context.Context, clusterID string, j job.Job) error
	// Job returns the kept job id and its revision (an opaque token for
	// ReplaceJob), found false when none is kept.
	Job(ctx context.Context, clusterID, id string) (j job.Job, revision string, found bool, err error)
	// ReplaceJob writes j in place of the kept job of its ID when that is
	// still at revision; replaced is false when it changed or is gone.
	ReplaceJob(ctx context.Context, clusterID string, j job.Job, revision string) (replaced bool, err error)
	// Jobs returns the cluster's kept jobs, oldest first (by creation
	// time, ties by ID). A kept job that does not decode is skipped.
	Jobs(ctx context.Context, clusterID string) ([]job.Job, error)
	// DeleteJob forgets job id; none is no error.
	DeleteJob(ctx context.Context, clusterID, id string) error
}

// Job log errors.
var (
	// ErrJobExists is CreateJob's answer for an ID already kept.
	ErrJobExists = errors.New("a job of this ID exists")
	// ErrTooManyJobs is CreateJob's answer past job.MaxKept.
	ErrTooManyJobs = fmt.Errorf("jobs: at most %d kept per cluster; delete or wait for ended ones to expire", job.MaxKept)
)

// EncodeJob is job.Encode with its errors as ErrInvalidRecord, the
// store's sentinel for what breaks a rule.
func EncodeJob(j *job.Job) ([]byte, error) {
	b, err := job.Encode(j)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRecord, err)
	}
	return b, nil
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
func UpdateJob(ctx context.Context, log JobLog, clusterID, id string, fn func(*job.Job) error) (j job.Job, found bool, err error) {
	for range jobUpdateAttempts {
		cur, rev, ok, err := log.Job(ctx, clusterID, id)
		if err != nil || !ok {
			return job.Job{}, ok, err
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
			return job.Job{}, true, err
		}
		if replaced {
			return next, true, nil
		}
	}
	return job.Job{}, true, fmt.Errorf("%w: job %q changed %d times in a row while it was updated", ErrConflict, id, jobUpdateAttempts)
}

func cloneJob(j job.Job) job.Job {
	j.Targets = slices.Clone(j.Targets)
	j.Workers = slices.Clone(j.Workers)
	return j
}
