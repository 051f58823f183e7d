package memory

import (
	"context"
	"fmt"
	"sync"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

// cordonTable holds the persisted cordons (state.CordonLog).
type cordonTable struct {
	mu sync.Mutex // guards byKey
	// byKey: the persisted cordon of each node; created on first use.
	byKey map[cluster.Key]state.Cordon
}

// PersistCordon implements state.CordonLog.
func (s *Store) PersistCordon(ctx context.Context, key cluster.Key, c state.Cordon) error {
	if err := s.gate(ctx, "persist cordon"); err != nil {
		return err
	}
	if err := state.ValidateCordon(key, c); err != nil {
		return fmt.Errorf("memory store persist cordon: %w", err)
	}
	t := &s.cordons
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byKey == nil {
		t.byKey = map[cluster.Key]state.Cordon{}
	}
	if _, ok := t.byKey[key]; !ok && countCluster(t.byKey, key.ClusterID) >= state.MaxPersistedCordons {
		return fmt.Errorf("memory store persist cordon of %q: %w", key.NodeID, state.ErrTooManyCordons)
	}
	c.Persist = true
	t.byKey[key] = c
	return nil
}

func countCluster(m map[cluster.Key]state.Cordon, clusterID string) int {
	n := 0
	for k := range m {
		if k.ClusterID == clusterID {
			n++
		}
	}
	return n
}

// LiftCordon implements state.CordonLog.
func (s *Store) LiftCordon(ctx context.Context, key cluster.Key) error {
	if err := s.gate(ctx, "lift cordon"); err != nil {
		return err
	}
	t := &s.cordons
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.byKey, key)
	return nil
}

// PersistedCordon implements state.CordonLog.
func (s *Store) PersistedCordon(ctx context.Context, key cluster.Key) (state.Cordon, bool, error) {
	if err := s.gate(ctx, "read cordon"); err != nil {
		return state.Cordon{}, false, err
	}
	t := &s.cordons
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.byKey[key]
	return c, ok, nil
}

var _ state.CordonLog = (*Store)(nil)
