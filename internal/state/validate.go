package state

import (
	"errors"
	"fmt"

	"github.com/talonhq/talon/internal/cluster"
)

// ValidateRecord checks rec against the record rules (cluster.Record
// Validate) and maps a failure onto the store's sentinels: the encoded
// size limit onto ErrRecordTooLarge, every other rule onto
// ErrInvalidRecord. Every backend calls it before writing.
func ValidateRecord(rec *cluster.Record) error {
	if rec == nil {
		return fmt.Errorf("%w: record is nil", ErrInvalidRecord)
	}
	err := rec.Validate()
	if err == nil {
		return nil
	}
	var fe *cluster.FieldError
	if errors.As(err, &fe) && fe.Field == "record" {
		// Validate reports the encoded size limit on the pseudo-field "record".
		return fmt.Errorf("%w: %w", ErrRecordTooLarge, err)
	}
	return fmt.Errorf("%w: %w", ErrInvalidRecord, err)
}

// ValidateKey checks a slot named by a caller (RemoveNode, Watch).
func ValidateKey(k cluster.Key) error {
	if err := cluster.ValidateID("clusterId", k.ClusterID); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRecord, err)
	}
	if err := cluster.ValidateID("nodeId", k.NodeID); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRecord, err)
	}
	if !k.Role.Valid() {
		return fmt.Errorf("%w: role %q: must be coordinator or worker", ErrInvalidRecord, k.Role)
	}
	return nil
}
