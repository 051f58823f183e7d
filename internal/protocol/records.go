package protocol

import "github.com/talonhq/talon/internal/cluster"

// Record payloads: Register and Heartbeat carry the cluster.Encode form
// of a record, opaque to this layer, so that a record of a schema version
// the coordinator cannot read is still framed and can be refused with
// CodeUnsupportedVersion (see DecodeRecordPayload).

func appendRecord(t Type, b, rec []byte) ([]byte, error) {
	switch {
	case len(rec) == 0:
		return b, fieldErr(t, "record", ErrInvalidValue, "must not be empty")
	case len(rec) > MaxRecordBytes:
		return b, fieldErr(t, "record", ErrFieldTooLarge, "%d bytes exceeds the %d byte limit", len(rec), MaxRecordBytes)
	}
	return appendRaw(b, rec), nil
}

// DecodeRecordPayload decodes the record carried by a Register or
// Heartbeat. On failure it returns an *Error ready to send, which unwraps
// to cluster's error: a record of another schema version (older or newer)
// gives unsupported_version, not retryable, with a message naming the
// version received and the version this build reads; a record that does
// not parse or breaks a rule gives invalid_argument. Nothing of a refused
// record is returned, so nothing can be half-applied, and the connection
// stays usable.
func DecodeRecordPayload(b []byte) (*cluster.Record, error) {
	r, err := cluster.Decode(b)
	if err != nil {
		return nil, ErrorOf(err)
	}
	return r, nil
}

func decodeRecord(t Type, p []byte, dst *[]byte) error {
	r := reader{t: t, b: p}
	rec := r.raw("record", MaxRecordBytes)
	if err := r.finish(); err != nil {
		return err
	}
	if len(rec) == 0 {
		return fieldErr(t, "record", ErrInvalidValue, "must not be empty")
	}
	*dst = append((*dst)[:0], rec...)
	return nil
}

// Register announces a process's record at the start of an incarnation.
// The coordinator answers with Ack or Error.
type Register struct {
	Record []byte // cluster.Encode form, 1..MaxRecordBytes
}

// NewRegister encodes rec (validating it) into a Register.
func NewRegister(rec *cluster.Record) (*Register, error) {
	b, err := cluster.Encode(rec)
	if err != nil {
		return nil, err
	}
	return &Register{Record: b}, nil
}

func (*Register) Type() Type { return TypeRegister }

func (m *Register) AppendBinary(b []byte) ([]byte, error) {
	return appendRecord(TypeRegister, b, m.Record)
}

func (m *Register) UnmarshalBinary(p []byte) error {
	return decodeRecord(TypeRegister, p, &m.Record)
}

// Heartbeat carries a process's current record, with a greater
// heartbeatSeq than the last one of its incarnation. The coordinator
// answers with Ack or Error.
type Heartbeat struct {
	Record []byte // cluster.Encode form, 1..MaxRecordBytes
}

// NewHeartbeat encodes rec (validating it) into a Heartbeat.
func NewHeartbeat(rec *cluster.Record) (*Heartbeat, error) {
	b, err := cluster.Encode(rec)
	if err != nil {
		return nil, err
	}
	return &Heartbeat{Record: b}, nil
}

func (*Heartbeat) Type() Type { return TypeHeartbeat }

func (m *Heartbeat) AppendBinary(b []byte) ([]byte, error) {
	return appendRecord(TypeHeartbeat, b, m.Record)
}

func (m *Heartbeat) UnmarshalBinary(p []byte) error {
	return decodeRecord(TypeHeartbeat, p, &m.Record)
}
