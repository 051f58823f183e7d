package coordinator

import (
	"testing"

	"github.com/talonhq/talon/internal/protocol"
	"github.com/talonhq/talon/internal/state"
)

// TestFoldJobReports is the fold's decision as a table: reports update
// the parts they name and never move an ended part back; the job ends
// done when every part is done, partial when one failed or left, and
// stays running while one part runs.
func TestFoldJobReports(t *testing.T) {
	job := func(states ...string) state.Job {
		j := state.Job{ID: "j-1", Op: state.JobWarm, Targets: []state.JobTarget{{Key: "a"}}, State: state.JobRunning}
		for i, s := range states {
			j.Workers = append(j.Workers, state.JobWorker{NodeID: string(rune('a' + i)), State: s})
		}
		return j
	}
	rep := func(s protocol.JobState, done, total uint64) protocol.JobReport {
		return protocol.JobReport{JobID: "j-1", State: s, BlocksDone: done, BlocksTotal: total, BytesDone: done << 20, BytesTotal: total << 20}
	}
	for _, tc := range []struct {
		name      string
		job       state.Job
		reports   map[string]protocol.JobReport
		changed   bool
		wantState string
		wantParts []string
	}{
		{"progress", job(state.WorkerPending, state.WorkerPending), map[string]protocol.JobReport{"a": rep(protocol.JobRunning, 1, 4)},
			true, state.JobRunning, []string{state.WorkerRunning, state.WorkerPending}},
		{"all done", job(state.WorkerDone, state.WorkerRunning), map[string]protocol.JobReport{"b": rep(protocol.JobDone, 4, 4)},
			true, state.JobDone, []string{state.WorkerDone, state.WorkerDone}},
		{"one failed", job(state.WorkerDone, state.WorkerRunning), map[string]protocol.JobReport{"b": {JobID: "j-1", State: protocol.JobFailed, Error: "disk"}},
			true, state.JobPartial, []string{state.WorkerDone, state.WorkerFailed}},
		{"an ended part stays", job(state.WorkerDone, state.WorkerRunning), map[string]protocol.JobReport{"a": rep(protocol.JobRunning, 0, 4)},
			false, state.JobRunning, []string{state.WorkerDone, state.WorkerRunning}},
		{"a report of no part", job(state.WorkerRunning), map[string]protocol.JobReport{"z": rep(protocol.JobDone, 1, 1)},
			false, state.JobRunning, []string{state.WorkerRunning}},
		{"the same report again", func() state.Job {
			j := job(state.WorkerRunning)
			j.Workers[0] = state.JobWorker{NodeID: "a", State: state.WorkerRunning, BlocksDone: 1, BlocksTotal: 4, BytesDone: 1 << 20, BytesTotal: 4 << 20}
			return j
		}(), map[string]protocol.JobReport{"a": rep(protocol.JobRunning, 1, 4)}, false, state.JobRunning, []string{state.WorkerRunning}},
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
			if err := state.ValidateJob(&j); err != nil {
				t.Errorf("the folded job does not validate: %v", err)
			}
		})
	}
}

// TestJobSummaryBounded: an event's reason stays within its bound
// whatever the job's keys.
func TestJobSummaryBounded(t *testing.T) {
	long := make([]byte, state.MaxJobKey)
	for i := range long {
		long[i] = 'k'
	}
	j := state.Job{ID: "j-1", Op: state.JobWarm, State: state.JobCancelled, By: string(long[:state.MaxJobText]), CancelledBy: string(long[:state.MaxJobText])}
	for range state.MaxJobTargets {
		j.Targets = append(j.Targets, state.JobTarget{Key: string(long), Prefix: true})
	}
	if s := jobSummary(j); len(s) > maxEventReason || len(s) == 0 {
		t.Fatalf("summary of %d bytes; want 1 to %d", len(s), maxEventReason)
	}
}
