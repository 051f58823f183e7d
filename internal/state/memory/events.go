package memory

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/talonhq/talon/internal/state"
)

// eventRing is the memory backend's shared event log: per cluster, the
// newest state.DefaultEventMax events no older than
// state.DefaultEventMaxAge, deduplicated by ID.
type eventRing struct {
	mu       sync.Mutex                   // guards the field below
	clusters map[string][]state.NodeEvent // oldest first
}

// AppendEvent implements state.EventLog.
func (s *Store) AppendEvent(ctx context.Context, ev state.NodeEvent) (bool, error) {
	if err := state.ValidateEvent(ev); err != nil {
		return false, err
	}
	if err := s.gate(ctx, "append event"); err != nil {
		return false, err
	}
	r := &s.events
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.clusters == nil {
		r.clusters = make(map[string][]state.NodeEvent)
	}
	list := r.clusters[ev.ClusterID]
	for _, e := range list {
		if e.ID == ev.ID {
			return false, nil
		}
	}
	list = append(list, ev)
	floor := s.clock().Add(-state.DefaultEventMaxAge)
	list = slices.DeleteFunc(list, func(e state.NodeEvent) bool { return e.Time.Before(floor) })
	r.clusters[ev.ClusterID] = state.KeepEvents(list, state.DefaultEventMax)
	return true, nil
}

// ListEvents implements state.EventLog.
func (s *Store) ListEvents(ctx context.Context, clusterID string, since time.Time, limit int) ([]state.NodeEvent, error) {
	if err := s.gate(ctx, "list events"); err != nil {
		return nil, err
	}
	if floor := s.clock().Add(-state.DefaultEventMaxAge); since.Before(floor) {
		since = floor
	}
	r := &s.events
	r.mu.Lock()
	out := append([]state.NodeEvent(nil), r.clusters[clusterID]...)
	r.mu.Unlock()
	return state.TrimEvents(out, since, limit), nil
}

var _ state.EventLog = (*Store)(nil)
