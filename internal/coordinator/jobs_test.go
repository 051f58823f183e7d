package coordinator

import (
	"testing"

	"github.com/talonhq/talon/internal/job"
	"github.com/talonhq/talon/internal/protocol"
)

// TestFoldJobReports is the fold's decision as a table: reports update
// the parts they name and never move an ended part back; the job ends
// done when every part is done, partial when one failed or left, and
// stays running while one part runs.
func TestFoldJobReports(t *testing.T) {
	mkJob := func(states ...string) job.Job {
		j := job.Job{ID: "j-1", Op: job.Warm, Targets: []job.Target{{Key: "a"}}, State: job.Running}
		for i, s := range states {
			j.Workers = append(j.Workers, job.Part{NodeID: string(rune('a' + i)), State: s})
		}
		return j
	}
	rep := func(s protocol.JobState, done, total uint64) protocol.JobReport {
		return protocol.JobReport{JobID: "j-1", State: s, BlocksDone: done, BlocksTotal: total, BytesDone: done << 20, BytesTotal: total << 20}
	}
	for _, tc := range []struct {
		name      string
		job       job.Job
		reports   map[string]protocol.JobReport
		changed   bool
		wantState string
		wantParts []string
	}{
		{"progress", mkJob(job.PartPending, job.PartPending), map[string]protocol.JobReport{"a": rep(protocol.JobRunning, 1, 4)},
			true, job.Running, []string{job.PartRunning, job.PartPending}},
		{"all done", mkJob(job.PartDone, job.PartRunning), map[string]protocol.JobReport{"b": rep(protocol.JobDone, 4, 4)},
			true, job.Done, []string{job.PartDone, job.PartDone}},
		{"one failed", mkJob(job.PartDone, job.PartRunning), map[string]protocol.JobReport{"b": {JobID: "j-1", State: protocol.JobFailed, Error: "disk"}},
			true, job.Partial, []string{job.PartDone, job.PartFailed}},
		{"an ended part stays", mkJob(job.PartDone, job.PartRunning), map[string]protocol.JobReport{"a": rep(protocol.JobRunning, 0, 4)},
			false, job.Running, []string{job.PartDone, job.PartRunning}},
		{"a report of no part", mkJob(job.PartRunning), map[string]protocol.JobReport{"z": rep(protocol.JobDone, 1, 1)},
			false, job.Running, []string{job.PartRunning}},
		{"the same report again", func() job.Job {
			j := mkJob(job.PartRunning)
			j.Workers[0] = job.Part{NodeID: "a", State: job.PartRunning, BlocksDone: 1, BlocksTotal: 4, BytesDone: 1 << 20, BytesTotal: 4 << 20}
			return j
		}(), map[string]protocol.JobReport{"a": rep(protocol.JobRunning, 1, 4)}, false, job.Running, []string{job.PartRunning}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := tc.job
			changed := applyReports(&j, tc.reports)
			if endJob(&j, 1000) {
				changed = true
			}
			if changed != tc.changed || j.State != tc.wantState {
				t.Fatalf("changed %v, state %s; want %v, %s", changed, j.State, tc.changed, tc.wantState)
			}
			for i, w := range j.Workers {
				if w.State != tc.wantParts[i] {
					t.Errorf("part %s is %s; want %s", w.NodeID, w.State, tc.wantParts[i])
				}
			}
			if j.Ended() && j.EndedAtUnixMs != 1000 {
				t.Errorf("ended at %d; want 1000", j.EndedAtUnixMs)
			}
			if err := job.Validate(&j); err != nil {
				t.Errorf("the folded job does not validate: %v", err)
			}
		})
	}
}

// TestJobSummaryBounded: an event's reason stays within its bound
// whatever the job's keys.
func TestJobSummaryBounded(t *testing.T) {
	long := make([]byte, job.MaxKey)
	for i := range long {
		long[i] = 'k'
	}
	j := job.Job{ID: "j-1", Op: job.Warm, State: job.Cancelled, By: string(long[:job.MaxText]), CancelledBy: string(long[:job.MaxText])}
	for range job.MaxTargets {
		j.Targets = append(j.Targets, job.Target{Key: string(long), Prefix: true})
	}
	if s := jobSummary(j); len(s) > maxEventReason || len(s) == 0 {
		t.Fatalf("summary of %d bytes; want 1 to %d", len(s), maxEventReason)
	}
}
