package state

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/talonhq/talon/internal/cluster"
)

// CordonLog keeps operators' persisted cordons by node, apart from any
// record: a record goes with its process (deregistration, expiry), but a
// persisted cordon is the operator's word about the node, so it must hold
// when the node registers again with a record that does not carry it
// (issue 47: a worker lifted its persisted cordon by deregistering and
// registering again). A coordinator that accepts a new record (no record
// in the slot) applies the node's persisted cordon in the same write, so
// placement, read from the records alone, never places the node between
// its registration and its cordon. Uncordon lifts it.
//
// Backends implement it beside Store (the coordinator finds it with a type
// assertion), outside the records' keyspace, so a reader of the records
// (an older release among them) never sees it. At most MaxPersistedCordons
// per cluster: each is an operator's action, lifted by uncordon.
type CordonLog interface {
	// PersistCordon keeps c for key's node, replacing what it kept.
	PersistCordon(ctx context.Context, key cluster.Key, c Cordon) error
	// LiftCordon forgets key's persisted cordon; none is no error.
	LiftCordon(ctx context.Context, key cluster.Key) error
	// PersistedCordon returns key's persisted cordon, if any.
	PersistedCordon(ctx context.Context, key cluster.Key) (Cordon, bool, error)
}

// MaxPersistedCordons bounds the persisted cordons of a cluster.
const MaxPersistedCordons = 10_000

// ErrTooManyCordons is PersistCordon's answer past MaxPersistedCordons.
var ErrTooManyCordons = fmt.Errorf("persisted cordons: at most %d per cluster; uncordon some first", MaxPersistedCordons)

// storedCordon is a persisted cordon's stored form.
type storedCordon struct {
	By       string `json:"by"`
	AtUnixMs int64  `json:"atUnixMs"`
}

// ValidateCordon checks a cordon to persist for key.
func ValidateCordon(key cluster.Key, c Cordon) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if key.Role != cluster.RoleWorker {
		return fmt.Errorf("%w: persisted cordon of %s %q: only workers are cordoned", ErrInvalidRecord, key.Role, key.NodeID)
	}
	if c.By == "" {
		return fmt.Errorf("%w: persisted cordon of %q: by must not be empty", ErrInvalidRecord, key.NodeID)
	}
	if err := cluster.ValidateMarkText("cordonedBy", c.By); err != nil {
		return fmt.Errorf("%w: persisted cordon of %q: %v", ErrInvalidRecord, key.NodeID, err)
	}
	if c.AtUnixMs < 0 {
		return fmt.Errorf("%w: persisted cordon of %q: atUnixMs %d: must not be negative", ErrInvalidRecord, key.NodeID, c.AtUnixMs)
	}
	return nil
}

// EncodeCordon is the stored form of a persisted cordon.
func EncodeCordon(c Cordon) ([]byte, error) {
	return json.Marshal(storedCordon{By: c.By, AtUnixMs: c.AtUnixMs})
}

// DecodeCordon reads EncodeCordon's bytes (untrusted: the store's).
func DecodeCordon(key cluster.Key, b []byte) (Cordon, error) {
	var s storedCordon
	if err := json.Unmarshal(b, &s); err != nil {
		return Cordon{}, fmt.Errorf("%w: persisted cordon of %q: %v", cluster.ErrMalformed, key.NodeID, err)
	}
	c := Cordon{By: s.By, AtUnixMs: s.AtUnixMs, Persist: true}
	if err := ValidateCordon(key, c); err != nil {
		return Cordon{}, fmt.Errorf("%w: %v", cluster.ErrMalformed, err)
	}
	return c, nil
}
