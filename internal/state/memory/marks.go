package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

// SetMarks applies m to slot key's record while incarnationID ("" for
// any) holds it, keeping its lease deadline.
func (s *Store) SetMarks(ctx context.Context, key cluster.Key, incarnationID string, m state.MarkChange) (state.WriteResult, error) {
	if err := s.gate(ctx, "marks"); err != nil {
		return state.WriteResult{}, err
	}
	if err := state.ValidateMarks(key, m); err != nil {
		return state.WriteResult{}, fmt.Errorf("memory store marks %s: %w", key, err)
	}
	return s.write(ctx, "marks", key, func(time.Time) state.Decide { return state.Mark(incarnationID, m) })
}
