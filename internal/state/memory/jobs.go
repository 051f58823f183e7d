package memory

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/talonhq/talon/internal/job"
	"github.com/talonhq/talon/internal/state"
)

// jobTable holds the cache jobs (state.JobLog).
type jobTable struct {
	mu sync.Mutex // guards the fields below
	// byCluster: each cluster's jobs by ID, in stored form; created on
	// first use.
	byCluster map[string]map[string]storedJob
	rev       uint64 // the last revision given a job
}

type storedJob struct {
	val []byte
	rev uint64
}

// CreateJob implements state.JobLog.
func (s *Store) CreateJob(ctx context.Context, clusterID string, j job.Job) error {
	if err := s.gate(ctx, "create job"); err != nil {
		return err
	}
	val, err := state.EncodeJob(&j)
	if err != nil {
		return fmt.Errorf("memory store create job: %w", err)
	}
	t := &s.jobs
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byCluster == nil {
		t.byCluster = map[string]map[string]storedJob{}
	}
	jobs := t.byCluster[clusterID]
	if jobs == nil {
		jobs = map[string]storedJob{}
		t.byCluster[clusterID] = jobs
	}
	if _, ok := jobs[j.ID]; ok {
		return fmt.Errorf("memory store create job %q: %w", j.ID, state.ErrJobExists)
	}
	if len(jobs) >= job.MaxKept {
		return fmt.Errorf("memory store create job %q: %w", j.ID, state.ErrTooManyJobs)
	}
	t.rev++
	jobs[j.ID] = storedJob{val: val, rev: t.rev}
	return nil
}

// Job implements state.JobLog.
func (s *Store) Job(ctx context.Context, clusterID, id string) (job.Job, string, bool, error) {
	if err := s.gate(ctx, "read job"); err != nil {
		return job.Job{}, "", false, err
	}
	t := &s.jobs
	t.mu.Lock()
	sj, ok := t.byCluster[clusterID][id]
	t.mu.Unlock()
	if !ok {
		return job.Job{}, "", false, nil
	}
	j, err := job.Decode(sj.val)
	if err != nil {
		return job.Job{}, "", false, nil
	}
	return j, strconv.FormatUint(sj.rev, 10), true, nil
}

// ReplaceJob implements state.JobLog.
func (s *Store) ReplaceJob(ctx context.Context, clusterID string, j job.Job, revision string) (bool, error) {
	if err := s.gate(ctx, "replace job"); err != nil {
		return false, err
	}
	val, err := state.EncodeJob(&j)
	if err != nil {
		return false, fmt.Errorf("memory store replace job: %w", err)
	}
	t := &s.jobs
	t.mu.Lock()
	defer t.mu.Unlock()
	sj, ok := t.byCluster[clusterID][j.ID]
	if !ok || strconv.FormatUint(sj.rev, 10) != revision {
		return false, nil
	}
	t.rev++
	t.byCluster[clusterID][j.ID] = storedJob{val: val, rev: t.rev}
	return true, nil
}

// Jobs implements state.JobLog.
func (s *Store) Jobs(ctx context.Context, clusterID string) ([]job.Job, error) {
	if err := s.gate(ctx, "list jobs"); err != nil {
		return nil, err
	}
	t := &s.jobs
	t.mu.Lock()
	vals := make([][]byte, 0, len(t.byCluster[clusterID]))
	for _, sj := range t.byCluster[clusterID] {
		vals = append(vals, sj.val)
	}
	t.mu.Unlock()
	return job.DecodeAll(vals), nil
}

// DeleteJob implements state.JobLog.
func (s *Store) DeleteJob(ctx context.Context, clusterID, id string) error {
	if err := s.gate(ctx, "delete job"); err != nil {
		return err
	}
	t := &s.jobs
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.byCluster[clusterID], id)
	return nil
}

var _ state.JobLog = (*Store)(nil)
