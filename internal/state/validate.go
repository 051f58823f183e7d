package state

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/talonhq/talon/internal/cluster"
)

// ValidateRecord checks rec against the record's field rules
// (cluster.Record ValidateFields) without encoding it, and maps a failure
// onto ErrInvalidRecord. Upsert calls it for an update it rejects; an
// accepted one is checked by EncodeRecord, on the bytes stored.
func ValidateRecord(rec *cluster.Record) error {
	if rec == nil {
		return fmt.Errorf("%w: record is nil", ErrInvalidRecord)
	}
	if err := rec.ValidateFields(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRecord, err)
	}
	return nil
}

// EncodeRecord returns the stored form of rec (cluster.Encode: one
// marshal) and maps a failure onto the store's sentinels: the encoded size
// limit onto ErrRecordTooLarge, every other rule onto ErrInvalidRecord.
func EncodeRecord(rec *cluster.Record) ([]byte, error) {
	if rec == nil {
		return nil, fmt.Errorf("%w: record is nil", ErrInvalidRecord)
	}
	b, err := cluster.Encode(rec)
	if err == nil {
		return b, nil
	}
	var fe *cluster.FieldError
	if errors.As(err, &fe) && fe.Field == "record" {
		// Validate reports the encoded size limit on the pseudo-field "record".
		return nil, fmt.Errorf("%w: %w", ErrRecordTooLarge, err)
	}
	return nil, fmt.Errorf("%w: %w", ErrInvalidRecord, err)
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
		return fmt.Errorf("%w: %w", ErrInvalidRecord, &cluster.FieldError{Field: "role", Value: strconv.Quote(string(k.Role)), Rule: "must be coordinator or worker"})
	}
	return nil
}
