package memory

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

// Watch streams the cluster's changes after revision after: first those
// still in the history, then live ones, in revision order, at most maxBatch
// per batch.
//
// The watch reads the shared history at its consumer's pace and holds at
// most one undelivered batch in the channel plus one in hand, so a slow
// consumer never blocks writers. A consumer that falls more than
// Options.HistoryLimit changes (of all clusters) behind loses its place: the
// watch ends with state.ErrCompacted and the consumer re-snapshots. The same
// error ends a watch whose after is older than the history, is not a
// revision of this store (including the zero revision), or is newer than
// the current revision. An injected fault ends the watch with that fault.
func (s *Store) Watch(ctx context.Context, clusterID string, after state.Revision) <-chan state.WatchBatch {
	out := make(chan state.WatchBatch, 1)
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		out <- state.WatchBatch{Err: fmt.Errorf("memory store watch: %w", state.ErrClosed)}
		close(out)
		return out
	}
	s.wg.Add(1)
	s.mu.RUnlock()
	go s.runWatch(ctx, clusterID, after, out)
	return out
}

func (s *Store) runWatch(ctx context.Context, clusterID string, after state.Revision, out chan<- state.WatchBatch) {
	defer s.wg.Done()
	defer close(out)

	if err := cluster.ValidateID("clusterId", clusterID); err != nil {
		s.finish(ctx, out, fmt.Errorf("memory store watch: %w: %w", state.ErrInvalidRecord, err))
		return
	}
	cursor, err := strconv.ParseUint(after.String(), 10, 64)
	if err != nil {
		s.finish(ctx, out, fmt.Errorf("memory store watch: revision %q is not a revision of this store (watch from a snapshot's revision): %w", after.String(), state.ErrCompacted))
		return
	}
	var tick <-chan time.Time
	if s.sweepInterval > 0 {
		t := time.NewTicker(s.sweepInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		faultChanged, fault := s.currentFault()
		if fault != nil {
			s.finish(ctx, out, fmt.Errorf("memory store watch: %w", fault))
			return
		}
		events, next, wake, err := s.collect(clusterID, cursor)
		if err != nil {
			s.finish(ctx, out, err)
			return
		}
		cursor = next
		if len(events) > 0 {
			select {
			case out <- state.WatchBatch{Events: events}:
				continue
			case <-ctx.Done():
				return
			case <-s.closing:
				s.finishClosed(out)
				return
			}
		}
		select {
		case <-wake:
		case <-faultChanged:
		case <-tick:
			s.Sweep()
		case <-ctx.Done():
			return
		case <-s.closing:
			s.finishClosed(out)
			return
		}
	}
}

// collect returns up to maxBatch of the cluster's changes after cursor and
// the revision up to which it looked. When there are none it also returns a
// channel closed by the next change.
func (s *Store) collect(clusterID string, cursor uint64) (events []state.Event, next uint64, wake <-chan struct{}, err error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	switch {
	case s.closed:
		return nil, 0, nil, fmt.Errorf("memory store watch: %w", state.ErrClosed)
	case cursor < s.compacted:
		s.log.Debug("memory store watch compacted", "cluster", clusterID, "after", cursor, "compacted", s.compacted)
		return nil, 0, nil, fmt.Errorf("memory store watch: revision %d is older than the history, which starts after revision %d: %w", cursor, s.compacted, state.ErrCompacted)
	case cursor > s.rev:
		return nil, 0, nil, fmt.Errorf("memory store watch: revision %d is newer than the current revision %d, so it is not from this store: %w", cursor, s.rev, state.ErrCompacted)
	}
	i, _ := slices.BinarySearchFunc(s.history, cursor+1, func(c change, r uint64) int { return cmp.Compare(c.rev, r) })
	next = cursor
	for ; i < len(s.history) && len(events) < maxBatch; i++ {
		c := &s.history[i]
		if c.clusterID == clusterID {
			events = append(events, c.event)
		}
		next = c.rev
	}
	if len(events) == 0 {
		s.notifyTaken.Store(true)
		wake = s.notify
	}
	return events, next, wake, nil
}

// finish delivers a terminal error unless the consumer goes away first.
func (s *Store) finish(ctx context.Context, out chan<- state.WatchBatch, err error) {
	select {
	case out <- state.WatchBatch{Err: err}:
	case <-ctx.Done():
	case <-s.closing:
		s.finishClosed(out)
	}
}

// finishClosed delivers ErrClosed if the consumer can take it now; Close
// must not wait for a consumer that stopped reading.
func (s *Store) finishClosed(out chan<- state.WatchBatch) {
	select {
	case out <- state.WatchBatch{Err: fmt.Errorf("memory store watch: %w", state.ErrClosed)}:
	default:
	}
}
