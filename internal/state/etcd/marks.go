package etcd

import (
	"context"
	"fmt"

	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/state"
)

// SetMarks applies m to slot key's record while incarnationID ("" for
// any) holds it: a transaction comparing the key's mod revision with a
// put that keeps the key's lease (as a late mark does).
func (s *Store) SetMarks(ctx context.Context, key cluster.Key, incarnationID string, m state.MarkChange) (state.WriteResult, error) {
	if err := state.ValidateMarks(key, m); err != nil {
		return state.WriteResult{}, fmt.Errorf("etcd marks: %w", err)
	}
	return s.writeSlot(ctx, "marks", key, state.Mark(incarnationID, m))
}
