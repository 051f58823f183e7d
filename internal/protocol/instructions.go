package protocol

import (
	"github.com/talonhq/talon/internal/cluster"
)

// Instructions asks for the operator's standing instructions for the
// sending worker, as the store holds them on its record (an operator's
// cordon, a coordinator's revocation): operators act through the
// coordinators' /api/v1 only, never at a worker's own address, and the
// worker learns what they decided here, over its authenticated control
// connection. A worker sends it after each accepted heartbeat; the
// coordinator answers from its current view, with Instructed or Error.
// Only the worker the connection's credential names may ask.
type Instructions struct {
	ClusterID     string // cluster.ValidateID rules
	NodeID        string // cluster.ValidateID rules
	IncarnationID string // not empty
}

func (*Instructions) Type() Type { return TypeInstructions }

func (m *Instructions) validate() error {
	if err := cluster.ValidateID("clusterId", m.ClusterID); err != nil {
		return &FieldError{Type: TypeInstructions, Field: "clusterId", Kind: kindOf(len(m.ClusterID), cluster.MaxIDBytes), Detail: clusterDetail(err)}
	}
	if err := cluster.ValidateID("nodeId", m.NodeID); err != nil {
		return &FieldError{Type: TypeInstructions, Field: "nodeId", Kind: kindOf(len(m.NodeID), cluster.MaxIDBytes), Detail: clusterDetail(err)}
	}
	return checkStr(TypeInstructions, "incarnationId", m.IncarnationID, cluster.MaxIDBytes, true)
}

func (m *Instructions) AppendBinary(b []byte) ([]byte, error) {
	if err := m.validate(); err != nil {
		return b, err
	}
	b = appendStr(b, m.ClusterID)
	b = appendStr(b, m.NodeID)
	return appendStr(b, m.IncarnationID), nil
}

func (m *Instructions) UnmarshalBinary(p []byte) error {
	r := reader{t: TypeInstructions, b: p}
	var a Instructions
	a.ClusterID = r.str("clusterId", cluster.MaxIDBytes, true)
	a.NodeID = r.str("nodeId", cluster.MaxIDBytes, true)
	a.IncarnationID = r.str("incarnationId", cluster.MaxIDBytes, true)
	if err := r.finish(); err != nil {
		return err
	}
	if err := a.validate(); err != nil {
		return err
	}
	*m = a
	return nil
}

// Instructed answers Instructions: whether an operator's cordon holds the
// worker out of placement (and by whom, since when, and whether the
// worker keeps it across restarts), and whether a coordinator revoked its
// incarnation. A worker converges on it: it reports ready=false with
// reason "cordoned" while Cordoned, persists the cordon when Persist, and
// lifts both when an Instructed says Cordoned false.
type Instructed struct {
	Cordoned bool
	Persist  bool
	By       string // the operator's principal; at most cluster.MaxIDBytes
	AtUnixMs int64  // >= 0
	Revoked  bool
}

func (*Instructed) Type() Type { return TypeInstructed }

func (m *Instructed) validate() error {
	if err := checkStr(TypeInstructed, "by", m.By, cluster.MaxIDBytes, false); err != nil {
		return err
	}
	if m.AtUnixMs < 0 {
		return fieldErr(TypeInstructed, "atUnixMs", ErrInvalidValue, "%d is negative", m.AtUnixMs)
	}
	return nil
}

func (m *Instructed) AppendBinary(b []byte) ([]byte, error) {
	if err := m.validate(); err != nil {
		return b, err
	}
	b = appendBool(b, m.Cordoned)
	b = appendBool(b, m.Persist)
	b = appendStr(b, m.By)
	b = appendU64(b, uint64(m.AtUnixMs))
	return appendBool(b, m.Revoked), nil
}

func (m *Instructed) UnmarshalBinary(p []byte) error {
	r := reader{t: TypeInstructed, b: p}
	var a Instructed
	a.Cordoned = r.boolean("cordoned")
	a.Persist = r.boolean("persist")
	a.By = r.str("by", cluster.MaxIDBytes, false)
	a.AtUnixMs = int64(r.u64("atUnixMs"))
	a.Revoked = r.boolean("revoked")
	if err := r.finish(); err != nil {
		return err
	}
	if err := a.validate(); err != nil {
		return err
	}
	*m = a
	return nil
}
