package memory

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

// Watch streams the cluster's changes after revision after, in revision
// order, from the store's state.FanOut, as the reflector of etcd and
// Kubernetes does: the history (Options.HistoryLimit events of every
// cluster) replays what after is behind by, in batches of at most 512
// events, then every change follows as it is made.
//
// Writers never wait for a watcher: one that falls Options.HistoryLimit
// events behind ends with state.ErrUnavailable (the rule of every
// backend) and reads again. A watch whose after is older than the
// history, is not a revision of this store (including the zero revision)
// or is newer than the current revision ends with state.ErrCompacted. An
// injected fault ends the watch with that fault.
func (s *Store) Watch(ctx context.Context, clusterID string, after state.Revision) <-chan state.WatchBatch {
	ch, err := s.subscribe(ctx, clusterID, after)
	if err != nil {
		out := make(chan state.WatchBatch, 1)
		out <- state.WatchBatch{Err: err}
		close(out)
		return out
	}
	return ch
}

func (s *Store) subscribe(ctx context.Context, clusterID string, after state.Revision) (<-chan state.WatchBatch, error) {
	if err := cluster.ValidateID("clusterId", clusterID); err != nil {
		return nil, fmt.Errorf("memory store watch: %w: %w", state.ErrInvalidRecord, err)
	}
	cursor, err := strconv.ParseUint(after.String(), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("memory store watch: revision %q is not a revision of this store (watch from a snapshot's revision): %w", after.String(), state.ErrCompacted)
	}
	if _, fault := s.currentFault(); fault != nil {
		return nil, fmt.Errorf("memory store watch: %w", fault)
	}
	// mu is held across the subscription so that no write comes between
	// the revision checked and the history replayed (writers publish
	// under mu).
	s.mu.RLock()
	defer s.mu.RUnlock()
	switch {
	case s.closed:
		return nil, fmt.Errorf("memory store watch: %w", state.ErrClosed)
	case cursor > s.rev:
		return nil, fmt.Errorf("memory store watch: revision %d is newer than the current revision %d, so it is not from this store: %w", cursor, s.rev, state.ErrCompacted)
	}
	ch, err := s.fan.Subscribe(ctx, clusterID, cursor)
	if err != nil {
		s.log.Debug("memory store watch refused", "cluster", clusterID, "after", cursor, "err", err)
		return nil, fmt.Errorf("memory store watch: %w", err)
	}
	// A fault set meanwhile ended the watchers it found; end this one too.
	if _, fault := s.currentFault(); fault != nil {
		s.fan.End(fmt.Errorf("memory store watch: %w", fault))
	}
	return ch, nil
}

// spawnWatch runs one watch's delivery f (the fan-out's goroutine) and,
// beside it until it returns, a sweeper that expires due leases every
// Options.SweepInterval, so a watcher sees an expiry when nothing else
// touches the store. It returns false once the store is closed.
func (s *Store) spawnWatch(f func()) bool {
	done := make(chan struct{})
	if !s.spawn(func() { defer close(done); f() }) {
		return false
	}
	if s.sweepInterval > 0 {
		s.spawn(func() {
			t := time.NewTicker(s.sweepInterval)
			defer t.Stop()
			for {
				select {
				case <-t.C:
					s.Sweep()
				case <-done:
					return
				}
			}
		})
	}
	return true
}

// spawn runs f on a goroutine Close waits for, or returns false once the
// store is closed.
func (s *Store) spawn(f func()) bool {
	s.spawnMu.Lock()
	defer s.spawnMu.Unlock()
	if s.spawnOff {
		return false
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
	return true
}
