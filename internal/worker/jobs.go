package worker

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/talonhq/talon/internal/blob"
	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/protocol"
)

// JobCache is what a worker's cache jobs need of its cache
// (*cache.Cache implements it).
type JobCache interface {
	Stat(ctx context.Context, object string) (blob.Info, error)
	BlockSize() int64
	Load(ctx context.Context, object string, info blob.Info, index int64) (loaded bool, n int64, err error)
	Free(match func(object string) bool) (blocks, bytes int64)
	Source() blob.Store
}

// JobOptions lets a worker run the operator's cache jobs (warm, free),
// which it asks the coordinators for after each accepted heartbeat
// (protocol.Jobs). A warm loads the blocks of the jobs' objects that this
// worker owns (Owns, the data server's ownership check), at most Rate a
// second and Parallel at once; a free evicts every resident block of
// them.
type JobOptions struct {
	Cache JobCache
	// counted, when set, counts blocks loaded (op warm) or freed (op
	// free); the worker sets it to its talon_worker_job_blocks_total.
	counted func(op string, blocks int)
	Owns    func(object string, block int64) (bool, uint64)
	// Rate bounds a warm's loads a second (the worker's warmup-rate); 0
	// is no bound.
	Rate float64
	// Parallel bounds a warm's loads in flight; 0 means DefaultJobParallel.
	Parallel int
}

// Job limits.
const (
	// DefaultJobParallel is a warm's loads in flight by default.
	DefaultJobParallel = 4
	// MaxJobObjects bounds the objects a warm lists under one prefix.
	MaxJobObjects = 10_000
	// MaxJobBlocks bounds the blocks one worker plans for one warm (16
	// TiB of 4 MiB blocks).
	MaxJobBlocks = 1 << 22
	// jobsUnsupportedFor is how long a worker stops asking after a
	// coordinator of a lower level answered that it does not know the
	// Jobs message.
	jobsUnsupportedFor = time.Minute
)

// jobRunner runs the jobs the coordinators hand this worker. Its
// goroutines end with lifetime, cancelled by stop.
type jobRunner struct {
	opts JobOptions
	log  *slog.Logger
	// lifetime bounds every job's goroutine; cancelled by stop.
	lifetime context.Context
	stop     context.CancelFunc
	wg       sync.WaitGroup
	asking   atomic.Bool

	mu sync.Mutex // guards the fields below
	// running holds the jobs this incarnation runs or ran, until the
	// coordinators stop listing them.
	running    map[string]*runningJob
	quietUntil time.Time
}

// runningJob is one job's progress on this worker.
type runningJob struct {
	order  protocol.JobOrder
	cancel context.CancelFunc
	// blocksDone, blocksTotal, bytesDone, bytesTotal and state are read
	// by reports while the job's goroutine writes them.
	blocksDone, blocksTotal, bytesDone, bytesTotal atomic.Uint64
	state                                          atomic.Uint32 // protocol.JobState
	errMu                                          sync.Mutex
	err                                            string // guarded by errMu
}

func newJobRunner(opts JobOptions, log *slog.Logger) *jobRunner {
	if opts.Parallel <= 0 {
		opts.Parallel = DefaultJobParallel
	}
	lifetime, stop := context.WithCancel(context.Background())
	return &jobRunner{opts: opts, log: log, lifetime: lifetime, stop: stop, running: map[string]*runningJob{}}
}

// newJobs returns the runner of Options.Jobs, nil without them.
func (w *Worker) newJobs() *jobRunner {
	if w.opts.Jobs == nil {
		return nil
	}
	jo := *w.opts.Jobs
	jo.counted = func(op string, n int) { w.metrics.jobBlocks.WithLabelValues(op).Add(float64(n)) }
	return newJobRunner(jo, w.log.With("part", "jobs"))
}

// close cancels every job and waits for their goroutines.
func (r *jobRunner) close() {
	r.stop()
	r.wg.Wait()
}

// askJobs sends this worker's job reports to the coordinator that just
// accepted a heartbeat and applies the answer, on a goroutine of its own
// (one at a time) so that a slow answer never delays a heartbeat.
func (w *Worker) askJobs() {
	r := w.jobs
	if r == nil || !r.asking.CompareAndSwap(false, true) {
		return
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer r.asking.Store(false)
		if r.quiet(w.opts.Clock()) {
			return
		}
		msg := &protocol.Jobs{ClusterID: w.opts.ClusterID, NodeID: w.opts.NodeID, IncarnationID: w.incarnation, Reports: r.reports()}
		budget := heartbeatBudget(w.opts.RequestTimeout, w.hb.Status().Interval) / 2
		ctx, cancel := context.WithTimeout(r.lifetime, budget)
		defer cancel()
		resp, err := w.opts.Client.CallWith(ctx, msg, client.CallOptions{AttemptTimeout: budget, Once: true})
		if protocol.CodeOf(err) == protocol.CodeInvalidArgument {
			// A coordinator of a level before jobs: no job runs until
			// every process speaks cluster.LevelJobs; ask again later.
			r.quietFor(w.opts.Clock(), jobsUnsupportedFor)
			return
		}
		if err != nil {
			w.log.Debug("jobs not answered; asking again after the next heartbeat", "err", err)
			return
		}
		if orders, ok := resp.(*protocol.JobOrders); ok {
			r.apply(orders)
		}
	}()
}

func (r *jobRunner) quiet(now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return now.Before(r.quietUntil)
}

func (r *jobRunner) quietFor(now time.Time, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.quietUntil = now.Add(d)
}

// reports returns the progress of the jobs this worker runs or ran, those
// that ended first.
func (r *jobRunner) reports() []protocol.JobReport {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ended, running []protocol.JobReport
	for id, j := range r.running {
		rep := protocol.JobReport{JobID: id, State: protocol.JobState(j.state.Load()),
			BlocksDone: j.blocksDone.Load(), BlocksTotal: j.blocksTotal.Load(), BytesDone: j.bytesDone.Load(), BytesTotal: j.bytesTotal.Load()}
		rep.BlocksDone, rep.BytesDone = min(rep.BlocksDone, rep.BlocksTotal), min(rep.BytesDone, rep.BytesTotal)
		if rep.State == protocol.JobFailed {
			j.errMu.Lock()
			rep.Error = j.err
			j.errMu.Unlock()
		}
		if rep.State == protocol.JobRunning {
			running = append(running, rep)
		} else {
			ended = append(ended, rep)
		}
	}
	all := append(ended, running...)
	return all[:min(len(all), protocol.MaxJobReports)]
}

// apply starts the listed jobs this worker does not run yet, and stops
// and forgets those no longer listed (ended, cancelled, or folded).
func (r *jobRunner) apply(orders *protocol.JobOrders) {
	r.mu.Lock()
	defer r.mu.Unlock()
	listed := map[string]bool{}
	for _, o := range orders.Orders {
		listed[o.JobID] = true
		if _, ok := r.running[o.JobID]; ok || r.lifetime.Err() != nil {
			continue
		}
		ctx, cancel := context.WithCancel(r.lifetime)
		j := &runningJob{order: o, cancel: cancel}
		j.state.Store(uint32(protocol.JobRunning))
		r.running[o.JobID] = j
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer cancel()
			r.run(ctx, j)
		}()
	}
	for id, j := range r.running {
		if !listed[id] {
			j.cancel()
			delete(r.running, id)
		}
	}
}

// run does one job and records how it ended.
func (r *jobRunner) run(ctx context.Context, j *runningJob) {
	var err error
	start := time.Now()
	switch j.order.Op {
	case protocol.JobWarm:
		err = r.warm(ctx, j)
	case protocol.JobFree:
		r.free(j)
	}
	switch {
	case ctx.Err() != nil:
		j.state.Store(uint32(protocol.JobCancelled))
	case err != nil:
		j.errMu.Lock()
		j.err = cutError(err.Error())
		j.errMu.Unlock()
		j.state.Store(uint32(protocol.JobFailed))
		r.log.Warn("cache job failed", "job", j.order.JobID, "error", err)
	default:
		j.state.Store(uint32(protocol.JobDone))
		r.log.Info("cache job done", "job", j.order.JobID, "op", j.order.Op.String(), "blocks", j.blocksDone.Load(), "bytes", j.bytesDone.Load(), "took", time.Since(start).Round(time.Millisecond))
	}
}

func cutError(s string) string {
	if len(s) > protocol.MaxJobErrorBytes {
		return s[:protocol.MaxJobErrorBytes]
	}
	return s
}

// free evicts every resident block of the job's objects.
func (r *jobRunner) free(j *runningJob) {
	blocks, bytes := r.opts.Cache.Free(func(object string) bool { return matchTargets(j.order.Targets, object) })
	j.blocksTotal.Store(uint64(blocks))
	j.bytesTotal.Store(uint64(bytes))
	j.blocksDone.Store(uint64(blocks))
	j.bytesDone.Store(uint64(bytes))
	r.count("free", int(blocks))
}

func (r *jobRunner) count(op string, blocks int) {
	if r.opts.counted != nil {
		r.opts.counted(op, blocks)
	}
}

func matchTargets(ts []protocol.JobTarget, object string) bool {
	for _, t := range ts {
		if object == t.Key || (t.Prefix && len(object) >= len(t.Key) && object[:len(t.Key)] == t.Key) {
			return true
		}
	}
	return false
}

// block is one block a warm loads.
type block struct {
	object string
	info   blob.Info
	index  int64
}

// planned is one object of a warm's plan and the blocks of it this
// worker owns (8 bytes a block: a plan of MaxJobBlocks is 32 MiB).
type planned struct {
	object string
	info   blob.Info
	blocks []int64
}

// warm plans the blocks of the job's objects this worker owns, then loads
// them, Parallel at once and at most Rate a second.
func (r *jobRunner) warm(ctx context.Context, j *runningJob) error {
	plan, err := r.plan(ctx, j)
	if err != nil {
		return err
	}
	var lim *rate.Limiter
	if r.opts.Rate > 0 {
		lim = rate.NewLimiter(rate.Limit(r.opts.Rate), max(1, int(r.opts.Rate)))
	}
	next := make(chan block)
	errs := make(chan error, r.opts.Parallel)
	var wg sync.WaitGroup
	for range r.opts.Parallel {
		wg.Go(func() {
			for b := range next {
				loaded, n, err := r.opts.Cache.Load(ctx, b.object, b.info, b.index)
				if err != nil {
					select {
					case errs <- err:
					default:
					}
					continue
				}
				j.blocksDone.Add(1)
				j.bytesDone.Add(uint64(n))
				if loaded {
					r.count("warm", 1)
				}
			}
		})
	}
	feedErr := feed(ctx, plan, lim, next, errs)
	close(next)
	wg.Wait()
	if feedErr != nil {
		return feedErr
	}
	select {
	case err := <-errs:
		return err
	default:
	}
	return ctx.Err()
}

// feed sends the plan's blocks at the limiter's pace, stopping at the
// first load error.
func feed(ctx context.Context, plan []planned, lim *rate.Limiter, next chan<- block, errs <-chan error) error {
	for _, p := range plan {
		for _, i := range p.blocks {
			if lim != nil {
				if err := lim.Wait(ctx); err != nil {
					return nil // cancelled: run records it
				}
			}
			select {
			case next <- block{object: p.object, info: p.info, index: i}:
			case err := <-errs:
				return err
			case <-ctx.Done():
				return nil
			}
		}
	}
	return nil
}

// plan lists the job's objects (a prefix through the store's listing),
// reads their sizes, and keeps the blocks this worker owns.
func (r *jobRunner) plan(ctx context.Context, j *runningJob) ([]planned, error) {
	var objects []string
	for _, t := range j.order.Targets {
		if !t.Prefix {
			objects = append(objects, t.Key)
			continue
		}
		keys, more, err := blob.List(ctx, r.opts.Cache.Source(), t.Key, MaxJobObjects)
		if err != nil {
			return nil, err
		}
		if more {
			return nil, &jobLimitError{prefix: t.Key}
		}
		objects = append(objects, keys...)
	}
	bs := r.opts.Cache.BlockSize()
	var plan []planned
	total := 0
	for _, o := range objects {
		info, err := r.opts.Cache.Stat(ctx, o)
		if err != nil {
			return nil, err
		}
		p := planned{object: o, info: info}
		for i := int64(0); i*bs < info.Size; i++ {
			if owned, _ := r.opts.Owns(o, i); !owned {
				continue
			}
			if total == MaxJobBlocks {
				return nil, fmt.Errorf("more than %d blocks of the job's objects are this worker's (the most a warm plans); warm narrower prefixes", MaxJobBlocks)
			}
			p.blocks = append(p.blocks, i)
			total++
			j.bytesTotal.Add(uint64(min(bs, info.Size-i*bs)))
		}
		if len(p.blocks) > 0 {
			plan = append(plan, p)
		}
	}
	j.blocksTotal.Store(uint64(total))
	return plan, nil
}

// jobLimitError is a prefix with more objects than a warm lists.
type jobLimitError struct{ prefix string }

func (e *jobLimitError) Error() string {
	return fmt.Sprintf("prefix %s: more than %d objects (the most a warm lists under one prefix); warm narrower prefixes", quoteKey(e.prefix), MaxJobObjects)
}

func quoteKey(k string) string {
	if len(k) > 64 {
		k = k[:64] + "…"
	}
	return `"` + k + `"`
}
