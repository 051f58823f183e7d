package kube

import (
	"context"
	"fmt"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

// SetMarks applies m to slot key's record while incarnationID ("" for
// any) holds it: an update of the Lease on its resourceVersion that keeps
// its renew time (as a late mark does).
func (s *Store) SetMarks(ctx context.Context, key cluster.Key, incarnationID string, m state.MarkChange) (state.WriteResult, error) {
	if err := s.checkOpen(); err != nil {
		return state.WriteResult{}, err
	}
	if err := state.ValidateMarks(key, m); err != nil {
		return state.WriteResult{}, fmt.Errorf("kube marks: %w", err)
	}
	return s.write(ctx, func() string { return "kube marks " + key.String() }, key, true, state.Mark(incarnationID, m))
}
