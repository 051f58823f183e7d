package coordinator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/job"
	"github.com/talonhq/talon/internal/protocol"
	"github.com/talonhq/talon/internal/state"
)

// JobBoard runs the operator's cache jobs (warm, free) on one coordinator.
// A job lives in the store's job log (state.JobLog), not in any
// coordinator: the coordinator that takes an operator's request creates
// it; every coordinator hands it to the workers that ask (protocol.Jobs,
// after each heartbeat), folds the progress they report into it, and ends
// it when every worker's part is over. So a job survives the restart of
// the coordinator that started it, and its progress is the same through
// any coordinator. Jobs need cluster feature level 2 (cluster.LevelJobs):
// a worker of a lower level would never pick one up.
//
// Concurrency: mu guards the fields below it; the store is called without
// it held. Its goroutine (run) belongs to the coordinator.
type JobBoard struct {
	log       state.JobLog
	clusterID string
	nodeID    string
	now       func() time.Time
	logger    *slog.Logger
	timeout   time.Duration
	// leaseTTL is how long a job's worker may be absent from the view
	// before its part is marked left.
	leaseTTL time.Duration
	// view returns a fresh view (fail closed) and lastGood the latest.
	view     func(ctx context.Context) (*View, error)
	lastGood func() *View
	// requireLevel refuses while the cluster's level is below l.
	requireLevel func(v *View, l int64, what string) error
	// event adds an event to the coordinator's list and the shared log.
	event func(Event)

	mu sync.Mutex // guards the fields below
	// loaded is set once the job log was read: until then a worker's
	// question is answered not_ready, never "no jobs" (which would stop
	// the jobs it runs).
	loaded bool
	jobs   map[string]job.Job
	// reports are the workers' latest reports not yet folded into the
	// log, by job ID and node ID.
	reports map[string]map[string]protocol.JobReport
	// absent is when a job's worker was first seen missing from the view.
	absent map[string]time.Time
}

// Job bounds and timings.
const (
	// MaxActiveJobs bounds the jobs running at once in a cluster: each
	// running job is sent to every worker that asks (protocol.MaxJobOrders).
	MaxActiveJobs = protocol.MaxJobOrders
	// JobRetention is how long an ended job is kept for talonctl jobs.
	JobRetention = 24 * time.Hour
	// jobTick is how often pending reports are folded into the log.
	jobTick = time.Second
)

// Job errors.
var (
	// ErrJobNotFound is a job ID the log does not keep.
	ErrJobNotFound = errors.New("job not found")
	// ErrJobRefused is a job the cluster cannot take now (409 conflict):
	// ErrTooManyJobs, ErrNoWorkers, a cluster past job.MaxParts.
	ErrJobRefused = errors.New("job refused")
	// ErrTooManyJobs is a job refused while MaxActiveJobs run.
	ErrTooManyJobs = fmt.Errorf("%w: at most %d jobs run at once in a cluster; wait for one to end or cancel one (talonctl jobs list)", ErrJobRefused, MaxActiveJobs)
	// ErrNoJobLog is a store that keeps no jobs.
	ErrNoJobLog = errors.New("the store keeps no job log")
	// ErrNoWorkers is a job for a cluster without live workers.
	ErrNoWorkers = fmt.Errorf("%w: no live worker to run the job", ErrJobRefused)
)

// JobRequest is an operator's request for a job.
type JobRequest struct {
	Op      string // job.Warm or job.Free
	Targets []job.Target
	By      string // the operator's principal
}

func newJobBoard(c *Coordinator) *JobBoard {
	log, _ := c.opts.Store.(state.JobLog)
	return &JobBoard{
		log: log, clusterID: c.opts.ClusterID, nodeID: c.opts.NodeID, now: c.now, logger: c.log,
		timeout: c.opts.RequestTimeout, leaseTTL: c.opts.Timing.LeaseTTL,
		view: c.View, lastGood: c.LastGood, requireLevel: requireLevel, event: c.addEvent,
		jobs: map[string]job.Job{}, reports: map[string]map[string]protocol.JobReport{}, absent: map[string]time.Time{},
	}
}

// Jobs returns the coordinator's job board.
func (c *Coordinator) Jobs() *JobBoard { return c.jobs }

// Start creates a job for req over the cluster's live workers and returns
// it. It fails closed (the view), refuses below cluster.LevelJobs
// (ErrFeatureLevel) and past MaxActiveJobs (ErrTooManyJobs).
func (b *JobBoard) Start(ctx context.Context, req JobRequest) (job.Job, error) {
	if b.log == nil {
		return job.Job{}, ErrNoJobLog
	}
	v, err := b.view(ctx)
	if err != nil {
		return job.Job{}, err
	}
	if err := b.requireLevel(v, cluster.LevelJobs, "a cache job (warm, free)"); err != nil {
		return job.Job{}, err
	}
	kept, err := b.log.Jobs(ctx, b.clusterID)
	if err != nil {
		return job.Job{}, err
	}
	b.learn(kept)
	if n := countRunning(kept); n >= MaxActiveJobs {
		return job.Job{}, fmt.Errorf("%w (%d running)", ErrTooManyJobs, n)
	}
	j := job.Job{ID: b.newID(), Op: req.Op, Targets: req.Targets, By: req.By, Coordinator: b.nodeID,
		CreatedAtUnixMs: b.now().UnixMilli(), State: job.Running}
	for _, r := range v.Snapshot.Records {
		if r.Role == cluster.RoleWorker {
			j.Workers = append(j.Workers, job.Part{NodeID: r.NodeID, State: job.PartPending})
		}
	}
	job.SortParts(j.Workers)
	switch {
	case len(j.Workers) == 0:
		return job.Job{}, fmt.Errorf("%w in cluster %q", ErrNoWorkers, b.clusterID)
	case len(j.Workers) > job.MaxParts:
		return job.Job{}, fmt.Errorf("%w: the cluster has %d workers; a job spans at most %d", ErrJobRefused, len(j.Workers), job.MaxParts)
	}
	if err := b.makeRoom(ctx, kept); err != nil {
		return job.Job{}, err
	}
	if err := b.log.CreateJob(ctx, b.clusterID, j); err != nil {
		if errors.Is(err, state.ErrInvalidRecord) {
			// Past a stored bound (MaxJobBytes: many workers with long IDs).
			return job.Job{}, fmt.Errorf("%w: %v", ErrJobRefused, err)
		}
		return job.Job{}, err
	}
	b.learn([]job.Job{j})
	b.event(b.jobEvent(j, state.EventJobStarted, 1))
	b.logger.Info("cache job started", "job", j.ID, "op", j.Op, "targets", len(j.Targets), "workers", len(j.Workers), "by", j.By)
	return j, nil
}

// Cancel ends a running job as cancelled; an ended job is returned as it
// is.
func (b *JobBoard) Cancel(ctx context.Context, id, by string) (job.Job, error) {
	if b.log == nil {
		return job.Job{}, ErrNoJobLog
	}
	if _, err := b.view(ctx); err != nil {
		return job.Job{}, err
	}
	var ended bool
	j, found, err := state.UpdateJob(ctx, b.log, b.clusterID, id, func(j *job.Job) error {
		if j.Ended() {
			return state.ErrNoChange
		}
		j.State, j.EndedAtUnixMs, j.CancelledBy = job.Cancelled, b.now().UnixMilli(), by
		for i := range j.Workers {
			if !job.PartEnded(j.Workers[i].State) {
				j.Workers[i].State = job.PartCancelled
			}
		}
		ended = true
		return nil
	})
	switch {
	case err != nil:
		return job.Job{}, err
	case !found:
		return job.Job{}, fmt.Errorf("%w: no job %q in cluster %q (never started, or ended more than %v ago)", ErrJobNotFound, id, b.clusterID, JobRetention)
	}
	b.learn([]job.Job{j})
	if ended {
		b.event(b.jobEvent(j, state.EventJobEnded, 2))
		b.logger.Info("cache job cancelled", "job", j.ID, "by", by)
	}
	return j, nil
}

// List returns the cluster's kept jobs, oldest first, read from the store.
func (b *JobBoard) List(ctx context.Context) ([]job.Job, error) {
	if b.log == nil {
		return nil, ErrNoJobLog
	}
	if _, err := b.view(ctx); err != nil {
		return nil, err
	}
	jobs, err := b.log.Jobs(ctx, b.clusterID)
	if err != nil {
		return nil, err
	}
	b.learn(jobs)
	return jobs, nil
}

// Get returns job id, read from the store.
func (b *JobBoard) Get(ctx context.Context, id string) (job.Job, error) {
	if b.log == nil {
		return job.Job{}, ErrNoJobLog
	}
	if _, err := b.view(ctx); err != nil {
		return job.Job{}, err
	}
	j, _, found, err := b.log.Job(ctx, b.clusterID, id)
	if err != nil {
		return job.Job{}, err
	}
	if !found {
		return job.Job{}, fmt.Errorf("%w: no job %q in cluster %q (never started, or ended more than %v ago)", ErrJobNotFound, id, b.clusterID, JobRetention)
	}
	b.learn([]job.Job{j})
	return j, nil
}

// newID returns a new job ID: "j-", the time in base 36 and 6 random hex
// digits, so IDs sort roughly by creation and never collide in practice.
func (b *JobBoard) newID() string {
	var r [3]byte
	_, _ = rand.Read(r[:])
	return "j-" + strconv.FormatInt(b.now().UnixMilli(), 36) + "-" + hex.EncodeToString(r[:])
}

// makeRoom deletes ended jobs past JobRetention and, while the log is full,
// the oldest ended ones.
func (b *JobBoard) makeRoom(ctx context.Context, kept []job.Job) error {
	n := len(kept)
	for _, j := range kept { // oldest first
		expired := j.Ended() && b.now().Sub(time.UnixMilli(j.EndedAtUnixMs)) > JobRetention
		if !expired && (n < job.MaxKept || !j.Ended()) {
			continue
		}
		if err := b.log.DeleteJob(ctx, b.clusterID, j.ID); err != nil {
			return err
		}
		b.forget(j.ID)
		n--
	}
	return nil
}

func countRunning(jobs []job.Job) int {
	n := 0
	for _, j := range jobs {
		if !j.Ended() {
			n++
		}
	}
	return n
}

// learn records jobs as read or written.
func (b *JobBoard) learn(jobs []job.Job) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, j := range jobs {
		b.jobs[j.ID] = j
	}
}

func (b *JobBoard) forget(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.jobs, id)
	delete(b.reports, id)
}

// jobEvent is the event of a job's start (seq 1) or end (seq 2): one per
// cluster whichever coordinator writes it.
func (b *JobBoard) jobEvent(j job.Job, t state.NodeEventType, seq uint64) Event {
	e := Event{NodeEvent: state.NodeEvent{Type: t, New: j.State, Reason: jobSummary(j)}}
	e.ID = state.EventID(state.EventIdentity{ClusterID: b.clusterID, Type: t, Incarnation: j.ID, Seq: seq})
	return e
}

// jobSummary is a job in one line of at most maxEventReason bytes.
func jobSummary(j job.Job) string {
	first := j.Targets[0].Key
	if j.Targets[0].Prefix {
		first += "*"
	}
	if len(first) > 96 {
		first = first[:96] + "…"
	}
	s := fmt.Sprintf("job %s: %s %s", j.ID, j.Op, first)
	if n := len(j.Targets) - 1; n > 0 {
		s += fmt.Sprintf(" and %d more", n)
	}
	s += fmt.Sprintf(" on %d workers by %s", len(j.Workers), j.By)
	if j.Ended() {
		done, total := jobBlocks(j)
		s += fmt.Sprintf(": %s, %d of %d blocks", j.State, done, total)
		if j.CancelledBy != "" {
			s += " (cancelled by " + j.CancelledBy + ")"
		}
	}
	return state.CutEventReason(s)
}

func jobBlocks(j job.Job) (done, total int64) {
	for _, w := range j.Workers {
		done += w.BlocksDone
		total += w.BlocksTotal
	}
	return done, total
}

// registerJobs exports the cache jobs running as this coordinator last
// read the job log.
func (b *JobBoard) registerJobs(reg prometheus.Registerer) error {
	return reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "talon_coordinator_jobs_running",
		Help: "Cache jobs (warm, free) running in the cluster, as this coordinator last read the job log.",
	}, func() float64 {
		b.mu.Lock()
		defer b.mu.Unlock()
		n := 0
		for _, j := range b.jobs {
			if !j.Ended() {
				n++
			}
		}
		return float64(n)
	}))
}
