package coordinator

import (
	"context"
	"slices"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/job"
	"github.com/talonhq/talon/internal/protocol"
	"github.com/talonhq/talon/internal/state"
)

// jobs answers a worker's protocol.Jobs: its reports are kept for the
// next fold (run), and the answer lists the running jobs it has an
// unfinished part in, as this coordinator last read them.
func (h *handler) jobs(cn *conn, m *protocol.Jobs) protocol.Message {
	if _, e := h.authorizeWorkerAsk(cn, "jobs", m.ClusterID, m.NodeID); e != nil {
		return e
	}
	if h.Coordinator.jobs.log == nil {
		return &protocol.JobOrders{}
	}
	if v := h.LastGood(); !h.current() || v == nil {
		return protocol.NewError(protocol.CodeNotReady, "coordinator %s has no current cluster view; retry, possibly elsewhere", h.opts.NodeID)
	}
	orders, ok := h.Coordinator.jobs.answer(m.NodeID, m.Reports)
	if !ok {
		return protocol.NewError(protocol.CodeNotReady, "coordinator %s has not read the job log yet; ask again after the next heartbeat", h.opts.NodeID)
	}
	return orders
}

// answer keeps node's reports and returns its orders; ok is false until
// the job log was read.
func (b *JobBoard) answer(node string, reports []protocol.JobReport) (*protocol.JobOrders, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.loaded {
		return nil, false
	}
	for _, r := range reports {
		j, ok := b.jobs[r.JobID]
		if !ok || j.Part(node) == nil {
			continue // not a job of this node's: nothing to fold
		}
		if b.reports[r.JobID] == nil {
			b.reports[r.JobID] = map[string]protocol.JobReport{}
		}
		b.reports[r.JobID][node] = r
	}
	out := &protocol.JobOrders{}
	for _, j := range b.sortedLocked() {
		w := j.Part(node)
		if j.Ended() || w == nil || job.PartEnded(w.State) {
			continue
		}
		if r, ok := b.reports[j.ID][node]; ok && r.State != protocol.JobRunning {
			continue // its part is over; the fold has not written it yet
		}
		if len(out.Orders) == protocol.MaxJobOrders {
			break
		}
		o := protocol.JobOrder{JobID: j.ID, Op: protocol.JobWarm}
		if j.Op == job.Free {
			o.Op = protocol.JobFree
		}
		for _, t := range j.Targets {
			o.Targets = append(o.Targets, protocol.JobTarget{Prefix: t.Prefix, Key: t.Key})
		}
		out.Orders = append(out.Orders, o)
	}
	return out, true
}

func (b *JobBoard) sortedLocked() []job.Job {
	jobs := make([]job.Job, 0, len(b.jobs))
	for _, j := range b.jobs {
		jobs = append(jobs, j)
	}
	job.Sort(jobs)
	return jobs
}

// run reads the job log at start and at every heartbeat interval, and
// folds the workers' reports into it at the same pace (at most once a
// jobTick): a worker reports once a heartbeat, so folding more often
// would write more and show nothing new. A job's stored form grows with
// its workers (about 150 bytes each), so the pace bounds the store's
// writes while a job runs to one job a heartbeat interval per
// coordinator. It returns when ctx ends.
func (b *JobBoard) run(ctx context.Context, every time.Duration) {
	if b.log == nil {
		return
	}
	tick := time.NewTicker(jobTick)
	defer tick.Stop()
	var lastRead, lastFold, lastPrune time.Time
	for {
		folded := false
		if b.now().Sub(lastFold) >= every {
			folded, lastFold = b.fold(ctx), b.now()
		}
		if folded || b.now().Sub(lastRead) >= every {
			if b.refresh(ctx) {
				lastRead = b.now()
			}
		}
		if b.now().Sub(lastPrune) >= jobPruneEvery {
			b.prune(ctx)
			lastPrune = b.now()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// jobPruneEvery is how often a coordinator deletes the ended jobs past
// JobRetention (any coordinator may: a delete of a deleted job is none).
const jobPruneEvery = 10 * time.Minute

// prune deletes the ended jobs past JobRetention that this coordinator
// last read.
func (b *JobBoard) prune(ctx context.Context) {
	b.mu.Lock()
	var expired []string
	for id, j := range b.jobs {
		if j.Ended() && b.now().Sub(time.UnixMilli(j.EndedAtUnixMs)) > JobRetention {
			expired = append(expired, id)
		}
	}
	b.mu.Unlock()
	for _, id := range expired {
		dctx, cancel := context.WithTimeout(ctx, b.timeout)
		err := b.log.DeleteJob(dctx, b.clusterID, id)
		cancel()
		if err != nil {
			b.logger.Debug("ended job not deleted; trying again later", "job", id, "error", err)
			return
		}
		b.forget(id)
	}
}

// refresh reads the job log; a job no longer kept is forgotten.
func (b *JobBoard) refresh(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	jobs, err := b.log.Jobs(ctx, b.clusterID)
	if err != nil {
		b.logger.Debug("job log not read; reading it again in a moment", "error", err)
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.jobs = make(map[string]job.Job, len(jobs))
	for _, j := range jobs {
		b.jobs[j.ID] = j
	}
	for id := range b.reports {
		if _, ok := b.jobs[id]; !ok {
			delete(b.reports, id)
		}
	}
	b.loaded = true
	return true
}

// fold writes the pending reports, and the parts of workers gone from the
// view for a lease TTL, into each running job, and ends the jobs whose
// parts are all over. It reports whether it wrote anything.
func (b *JobBoard) fold(ctx context.Context) bool {
	v := b.lastGood()
	b.mu.Lock()
	if countRunning(b.sortedLocked()) == 0 {
		clear(b.absent) // absences matter only to running jobs
	}
	var work []foldWork
	for _, j := range b.sortedLocked() {
		if j.Ended() {
			continue
		}
		fw := foldWork{id: j.ID, reports: b.reports[j.ID], left: b.leftLocked(j, v)}
		if len(fw.reports) == 0 && len(fw.left) == 0 {
			continue
		}
		delete(b.reports, j.ID)
		work = append(work, fw)
	}
	b.mu.Unlock()
	for _, fw := range work {
		b.foldOne(ctx, fw)
	}
	return len(work) > 0
}

type foldWork struct {
	id      string
	reports map[string]protocol.JobReport
	left    []string
}

// leftLocked lists j's workers with unfinished parts that the view has
// not held for a lease TTL. Called with b.mu held.
func (b *JobBoard) leftLocked(j job.Job, v *View) []string {
	if v == nil {
		return nil
	}
	var left []string
	now := b.now()
	for _, w := range j.Workers {
		if job.PartEnded(w.State) {
			continue
		}
		if v.record(cluster.Key{ClusterID: b.clusterID, Role: cluster.RoleWorker, NodeID: w.NodeID}) != nil {
			delete(b.absent, w.NodeID)
			continue
		}
		since, ok := b.absent[w.NodeID]
		if !ok {
			b.absent[w.NodeID] = now
			continue
		}
		if now.Sub(since) >= b.leaseTTL {
			left = append(left, w.NodeID)
		}
	}
	return left
}

// foldOne writes one job's pending work; a failure puts the reports back
// unless newer ones came meanwhile.
func (b *JobBoard) foldOne(ctx context.Context, fw foldWork) {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	now := b.now().UnixMilli()
	j, found, err := state.UpdateJob(ctx, b.log, b.clusterID, fw.id, func(j *job.Job) error {
		if j.Ended() {
			return state.ErrNoChange
		}
		changed := applyReports(j, fw.reports)
		for _, id := range fw.left {
			if w := j.Part(id); w != nil && !job.PartEnded(w.State) {
				w.State, w.Error, changed = job.PartLeft, "left the cluster before its part was done", true
			}
		}
		if endJob(j, now) {
			changed = true
		}
		if !changed {
			return state.ErrNoChange
		}
		return nil
	})
	if err != nil {
		b.logger.Debug("job progress not written; trying again", "job", fw.id, "error", err)
		b.putBack(fw)
		return
	}
	if !found {
		b.forget(fw.id)
		return
	}
	b.mu.Lock()
	prev := b.jobs[j.ID]
	b.jobs[j.ID] = j
	b.mu.Unlock()
	if j.Ended() && !prev.Ended() && j.State != job.Cancelled {
		b.event(b.jobEvent(j, state.EventJobEnded, 2))
		done, total := jobBlocks(j)
		b.logger.Info("cache job ended", "job", j.ID, "op", j.Op, "state", j.State, "blocks", done, "of", total)
	}
}

func (b *JobBoard) putBack(fw foldWork) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(fw.reports) == 0 {
		return
	}
	cur := b.reports[fw.id]
	if cur == nil {
		cur = map[string]protocol.JobReport{}
		b.reports[fw.id] = cur
	}
	for node, r := range fw.reports {
		if _, newer := cur[node]; !newer {
			cur[node] = r
		}
	}
}

// applyReports writes reports into j's workers; a report never moves an
// ended part back. It reports whether anything changed.
func applyReports(j *job.Job, reports map[string]protocol.JobReport) bool {
	changed := false
	for node, r := range reports {
		w := j.Part(node)
		if w == nil || job.PartEnded(w.State) {
			continue
		}
		next := job.Part{NodeID: node, State: workerState(r.State),
			BlocksDone: clampInt64(r.BlocksDone), BlocksTotal: clampInt64(r.BlocksTotal),
			BytesDone: clampInt64(r.BytesDone), BytesTotal: clampInt64(r.BytesTotal), Error: r.Error}
		if *w != next {
			*w, changed = next, true
		}
	}
	return changed
}

// endJob ends j when every part is over: done when all are done, partial
// otherwise. It reports whether it ended it.
func endJob(j *job.Job, nowMs int64) bool {
	if j.Ended() || slices.ContainsFunc(j.Workers, func(w job.Part) bool { return !job.PartEnded(w.State) }) {
		return false
	}
	j.State, j.EndedAtUnixMs = job.Done, nowMs
	if slices.ContainsFunc(j.Workers, func(w job.Part) bool { return w.State != job.PartDone }) {
		j.State = job.Partial
	}
	return true
}

func workerState(s protocol.JobState) string {
	switch s {
	case protocol.JobDone:
		return job.PartDone
	case protocol.JobFailed:
		return job.PartFailed
	case protocol.JobCancelled:
		return job.PartCancelled
	}
	return job.PartRunning
}

func clampInt64(v uint64) int64 {
	if v > 1<<62 {
		return 1 << 62
	}
	return int64(v)
}
