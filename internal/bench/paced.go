package bench

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// Paced is what an open-loop run (RunPaced) measured: the calls made, as
// Result counts them, the calls sent and the slot times skipped.
type Paced struct {
	Result
	// Sent counts the calls made, whatever their outcome.
	Sent int
	// Missed counts slot times skipped because the slot's previous call
	// was still running: the load a slow answer kept from being offered.
	Missed int
}

// RunPaced calls op open loop for d: each of slots slots (slot is its
// index, 0 to slots-1) once per interval, slot i first at i*interval/slots
// after the start, so that the calls are spread evenly over every
// interval whatever the answers' latency, as many independent workers'
// heartbeats are. A slot runs one call at a time: a slot time that comes
// while its call is still running is skipped and counted in Missed, as a
// worker's ticker drops ticks. Latencies are measured from each call's
// start; ErrBackedOff counts as BackedOff, other errors by Code. Elapsed
// is d, or less when ctx ended first; the calls started before the end
// are waited for and counted, failures after ctx ended are not.
func RunPaced(ctx context.Context, slots int, interval, d time.Duration, op func(ctx context.Context, slot int) error) Paced {
	start := time.Now()
	end := start.Add(d)
	var (
		mu  sync.Mutex // guards res below
		res = Paced{Result: Result{Failures: map[string]int{}}}
		wg  sync.WaitGroup
	)
	for s := range slots {
		wg.Go(func() {
			local := paceSlot(ctx, start.Add(time.Duration(int64(interval)*int64(s)/int64(slots))), end, interval, func(ctx context.Context) error { return op(ctx, s) })
			mu.Lock()
			res.merge(local)
			mu.Unlock()
		})
	}
	wg.Wait()
	// The window is d, over which the load was offered, although the
	// last calls start just before its end; less when ctx ended first.
	res.Elapsed = d
	if el := time.Since(start); ctx.Err() != nil && el < d {
		res.Elapsed = el
	}
	res.Ops = len(res.Latencies)
	slices.Sort(res.Latencies)
	return res
}

// paceSlot runs one slot of RunPaced from its first time next until end.
func paceSlot(ctx context.Context, next, end time.Time, interval time.Duration, call func(ctx context.Context) error) Paced {
	res := Paced{Result: Result{Failures: map[string]int{}}}
	timer := time.NewTimer(time.Until(next))
	defer timer.Stop()
	for next.Before(end) {
		select {
		case <-ctx.Done():
			return res
		case <-timer.C:
		}
		t0 := time.Now()
		err := call(ctx)
		res.Sent++
		switch {
		case err == nil:
			res.Latencies = append(res.Latencies, time.Since(t0))
		case errors.Is(err, ErrBackedOff):
			res.BackedOff++
		case ctx.Err() == nil:
			res.Failures[Code(err)]++
			if res.FirstErr == nil {
				res.FirstErr = err
			}
		}
		next, res.Missed = skipMissed(next.Add(interval), time.Now(), end, interval, res.Missed)
		timer.Reset(time.Until(next))
	}
	return res
}

// skipMissed returns the first slot time from next on that is not before
// now, and missed plus the slot times skipped before end.
func skipMissed(next, now, end time.Time, interval time.Duration, missed int) (time.Time, int) {
	for next.Before(now) {
		if next.Before(end) {
			missed++
		}
		next = next.Add(interval)
	}
	return next, missed
}

// merge adds o's counts to p (the latencies unsorted).
func (p *Paced) merge(o Paced) {
	p.Latencies = append(p.Latencies, o.Latencies...)
	for k, v := range o.Failures {
		p.Failures[k] += v
	}
	p.BackedOff += o.BackedOff
	p.Sent += o.Sent
	p.Missed += o.Missed
	if p.FirstErr == nil {
		p.FirstErr = o.FirstErr
	}
}
