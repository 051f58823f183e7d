package protocol

import (
	"errors"
	"fmt"
	"time"

	"github.com/talonhq/talon/internal/cluster"
)

// Type identifies a message. Values are never reused; TypeError is
// frozen at 1 for every version.
type Type uint16

// Message types. The payload layout of each is tabled in doc.go.
const (
	TypeError             Type = 1  // response or connection-level error; frozen layout
	TypePing              Type = 2  // request; empty payload
	TypePong              Type = 3  // response to Ping; empty payload
	TypeRegister          Type = 16 // request: a node's first record of an incarnation
	TypeHeartbeat         Type = 17 // request: a node's periodic record
	TypeDeregister        Type = 18 // request: remove a node's record
	TypeAck               Type = 19 // response to Register, Heartbeat, Deregister
	TypeAttest            Type = 20 // request: a platform token that attests the connection's node
	TypeAttested          Type = 21 // response to Attest
	TypeInstructions      Type = 22 // request: the operator's standing instructions for the sending worker
	TypeInstructed        Type = 23 // response to Instructions
	TypeJobs              Type = 24 // request: the operator's cache jobs for the sending worker, with its progress
	TypeJobOrders         Type = 25 // response to Jobs
	TypeSubscribe         Type = 32 // request: receive EpochBump pushes on this connection
	TypeEpochBump         Type = 33 // response to Subscribe, then pushed with request ID 0
	TypePlacementLookup   Type = 34 // request: owners of a key
	TypePlacementResponse Type = 35 // response to PlacementLookup
)

// typeNames are the types' snake_case names.
var typeNames = map[Type]string{
	TypeError: "error", TypePing: "ping", TypePong: "pong", TypeRegister: "register", TypeHeartbeat: "heartbeat",
	TypeDeregister: "deregister", TypeAck: "ack", TypeAttest: "attest", TypeAttested: "attested",
	TypeInstructions: "instructions", TypeInstructed: "instructed", TypeJobs: "jobs", TypeJobOrders: "job_orders",
	TypeSubscribe: "subscribe", TypeEpochBump: "epoch_bump", TypePlacementLookup: "placement_lookup",
	TypePlacementResponse: "placement_response",
}

// String returns the type's snake_case name, or "type_N" for a value this
// build does not know.
func (t Type) String() string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	return fmt.Sprintf("type_%d", uint16(t))
}

// Field limits. Identifier and address limits are the record's
// (cluster.MaxIDBytes, cluster.MaxAddressBytes).
const (
	MaxRecordBytes       = cluster.MaxRecordBytes // Register/Heartbeat record
	MaxErrorMessageBytes = 1024                   // Error message
	MaxRevisionBytes     = 256                    // Ack revision
	MaxKeyBytes          = 1024                   // PlacementLookup key
	MaxReplicas          = 16                     // PlacementLookup replicas and PlacementResponse owners
	MaxAttestTokenBytes  = 8192                   // Attest token (a projected service account token is about 1 KB)
)

// ErrUnknownType is returned by Decode for a message type this build does
// not know. The frame was read whole, so the connection stays usable.
var ErrUnknownType = errors.New("unknown message type")

// Message is implemented by every message type. AppendBinary appends the
// payload (not the frame header) and fails, appending nothing, when a
// field breaks the rule the decoder enforces. UnmarshalBinary decodes a
// payload strictly: truncated fields, oversize fields, invalid values and
// trailing bytes are *FieldError; on error the message is unchanged.
// Decoded byte slices and strings never alias the input.
type Message interface {
	Type() Type
	AppendBinary(b []byte) ([]byte, error)
	UnmarshalBinary(payload []byte) error
}

// newMessages make a zero message of each type.
var newMessages = map[Type]func() Message{
	TypeError: func() Message { return &Error{} }, TypePing: func() Message { return &Ping{} }, TypePong: func() Message { return &Pong{} },
	TypeRegister: func() Message { return &Register{} }, TypeHeartbeat: func() Message { return &Heartbeat{} },
	TypeDeregister: func() Message { return &Deregister{} }, TypeAck: func() Message { return &Ack{} },
	TypeAttest: func() Message { return &Attest{} }, TypeAttested: func() Message { return &Attested{} },
	TypeInstructions: func() Message { return &Instructions{} }, TypeInstructed: func() Message { return &Instructed{} },
	TypeJobs: func() Message { return &Jobs{} }, TypeJobOrders: func() Message { return &JobOrders{} },
	TypeSubscribe: func() Message { return &Subscribe{} }, TypeEpochBump: func() Message { return &EpochBump{} },
	TypePlacementLookup: func() Message { return &PlacementLookup{} }, TypePlacementResponse: func() Message { return &PlacementResponse{} },
}

// NewMessage returns a new zero message of type t, or nil for an unknown type.
func NewMessage(t Type) Message {
	if f, ok := newMessages[t]; ok {
		return f()
	}
	return nil
}

// Decode decodes payload as a message of type t. Use Frame.Message for a
// frame, which also checks its version.
func Decode(t Type, payload []byte) (Message, error) {
	m := NewMessage(t)
	if m == nil {
		return nil, fmt.Errorf("protocol: %w %d", ErrUnknownType, uint16(t))
	}
	if err := m.UnmarshalBinary(payload); err != nil {
		return nil, err
	}
	return m, nil
}

// empty is the codec of the messages without fields.
func emptyUnmarshal(t Type, p []byte) error {
	if len(p) != 0 {
		return fieldErr(t, "(end)", ErrTrailingData, "%d bytes in a message without fields", len(p))
	}
	return nil
}

// Ping asks the peer to answer with Pong; a liveness check of the
// connection and the peer's read loop.
type Ping struct{}

func (*Ping) Type() Type                            { return TypePing }
func (*Ping) AppendBinary(b []byte) ([]byte, error) { return b, nil }
func (*Ping) UnmarshalBinary(p []byte) error        { return emptyUnmarshal(TypePing, p) }

// Pong answers Ping.
type Pong struct{}

func (*Pong) Type() Type                            { return TypePong }
func (*Pong) AppendBinary(b []byte) ([]byte, error) { return b, nil }
func (*Pong) UnmarshalBinary(p []byte) error        { return emptyUnmarshal(TypePong, p) }

// Subscribe asks the coordinator to push EpochBump on this connection
// whenever the placement version changes. The response is an EpochBump
// carrying the current version under the Subscribe's request ID.
type Subscribe struct{}

func (*Subscribe) Type() Type                            { return TypeSubscribe }
func (*Subscribe) AppendBinary(b []byte) ([]byte, error) { return b, nil }
func (*Subscribe) UnmarshalBinary(p []byte) error        { return emptyUnmarshal(TypeSubscribe, p) }

// Deregister removes the record in slot (ClusterID, Role, NodeID) if it
// still belongs to IncarnationID. The coordinator answers with Ack
// (accepted, not_found or stale) or Error.
type Deregister struct {
	ClusterID     string       // cluster.ValidateID rules
	Role          cluster.Role // coordinator or worker
	NodeID        string       // cluster.ValidateID rules
	IncarnationID string       // 1..cluster.MaxIDBytes bytes of UTF-8
}

// Key returns the store slot named by m.
func (m *Deregister) Key() cluster.Key {
	return cluster.Key{ClusterID: m.ClusterID, Role: m.Role, NodeID: m.NodeID}
}

// Wire values of cluster.Role.
const (
	wireRoleCoordinator = 1
	wireRoleWorker      = 2
)

func (m *Deregister) validate() error {
	t := TypeDeregister
	if err := cluster.ValidateID("clusterId", m.ClusterID); err != nil {
		return &FieldError{Type: t, Field: "clusterId", Kind: kindOf(len(m.ClusterID), cluster.MaxIDBytes), Detail: clusterDetail(err)}
	}
	if !m.Role.Valid() {
		return fieldErr(t, "role", ErrInvalidValue, "%q is not coordinator or worker", string(m.Role))
	}
	if err := cluster.ValidateID("nodeId", m.NodeID); err != nil {
		return &FieldError{Type: t, Field: "nodeId", Kind: kindOf(len(m.NodeID), cluster.MaxIDBytes), Detail: clusterDetail(err)}
	}
	return checkStr(t, "incarnationId", m.IncarnationID, cluster.MaxIDBytes, true)
}

// clusterDetail renders a cluster validation error without repeating the
// field name, which the FieldError already carries.
func clusterDetail(err error) string {
	var fe *cluster.FieldError
	if errors.As(err, &fe) {
		return fe.Value + ": " + fe.Rule
	}
	return err.Error()
}

// kindOf classifies a cluster validation error of a field of n bytes.
func kindOf(n, max int) error {
	if n > max {
		return ErrFieldTooLarge
	}
	return ErrInvalidValue
}

func (*Deregister) Type() Type { return TypeDeregister }

func (m *Deregister) AppendBinary(b []byte) ([]byte, error) {
	if err := m.validate(); err != nil {
		return b, err
	}
	b = appendStr(b, m.ClusterID)
	role := byte(wireRoleWorker)
	if m.Role == cluster.RoleCoordinator {
		role = wireRoleCoordinator
	}
	b = append(b, role)
	b = appendStr(b, m.NodeID)
	return appendStr(b, m.IncarnationID), nil
}

func (m *Deregister) UnmarshalBinary(p []byte) error {
	r := reader{t: TypeDeregister, b: p}
	var d Deregister
	d.ClusterID = r.str("clusterId", cluster.MaxIDBytes, true)
	switch role := r.u8("role"); {
	case r.err != nil:
	case role == wireRoleCoordinator:
		d.Role = cluster.RoleCoordinator
	case role == wireRoleWorker:
		d.Role = cluster.RoleWorker
	default:
		r.err = fieldErr(TypeDeregister, "role", ErrInvalidValue, "%d is not 1 (coordinator) or 2 (worker)", role)
	}
	d.NodeID = r.str("nodeId", cluster.MaxIDBytes, true)
	d.IncarnationID = r.str("incarnationId", cluster.MaxIDBytes, true)
	if err := r.finish(); err != nil {
		return err
	}
	if err := d.validate(); err != nil {
		return err
	}
	*m = d
	return nil
}

// Outcome is what a Register, Heartbeat or Deregister did. The values are
// fixed here because they are on the wire; the server maps its store's
// outcomes to them.
type Outcome uint8

// Outcomes (ADR 0001 section 3): duplicate and stale updates are
// idempotently ignored and are not errors.
const (
	OutcomeAccepted  Outcome = 1 // written (or removed)
	OutcomeDuplicate Outcome = 2 // same incarnation and sequence: nothing changed
	OutcomeStale     Outcome = 3 // older sequence, or removal of another incarnation: nothing changed
	OutcomeNotFound  Outcome = 4 // removal of a slot with no record
)

// String returns the outcome's lowercase name ("accepted", "duplicate",
// "stale", "not_found"), or "invalid".
func (o Outcome) String() string {
	switch o {
	case OutcomeAccepted:
		return "accepted"
	case OutcomeDuplicate:
		return "duplicate"
	case OutcomeStale:
		return "stale"
	case OutcomeNotFound:
		return "not_found"
	}
	return "invalid"
}

// Valid reports whether o is a defined outcome.
func (o Outcome) Valid() bool { return o >= OutcomeAccepted && o <= OutcomeNotFound }

// Ack answers Register, Heartbeat and Deregister when the store decided.
// Failures are answered with Error instead.
type Ack struct {
	Outcome Outcome
	// Retry asks the node to send the request again promptly rather than
	// at its next scheduled heartbeat. The coordinator decides when; a
	// node that sees it resends once, it does not loop.
	Retry bool
	// HeartbeatIntervalMs is the interval the coordinator wants heartbeats
	// at; zero means unchanged.
	HeartbeatIntervalMs uint32
	// LeaseTTLMs is the lease the record was written with; zero when the
	// store wrote nothing.
	LeaseTTLMs uint32
	// UpdatedAtUnixMs is the store's observation time of the record the
	// slot now holds; zero when none. Never negative.
	UpdatedAtUnixMs int64
	// Revision is the store's opaque revision after the write, for
	// diagnostics; compare for equality only. At most MaxRevisionBytes.
	Revision string
}

// HeartbeatInterval returns HeartbeatIntervalMs as a duration.
func (m *Ack) HeartbeatInterval() time.Duration {
	return time.Duration(m.HeartbeatIntervalMs) * time.Millisecond
}

// LeaseTTL returns LeaseTTLMs as a duration.
func (m *Ack) LeaseTTL() time.Duration { return time.Duration(m.LeaseTTLMs) * time.Millisecond }

func (*Ack) Type() Type { return TypeAck }

func (m *Ack) AppendBinary(b []byte) ([]byte, error) {
	if !m.Outcome.Valid() {
		return b, fieldErr(TypeAck, "outcome", ErrInvalidValue, "%d is not an outcome (1..4)", m.Outcome)
	}
	if m.UpdatedAtUnixMs < 0 {
		return b, fieldErr(TypeAck, "updatedAtUnixMs", ErrInvalidValue, "%d is negative", m.UpdatedAtUnixMs)
	}
	if err := checkStr(TypeAck, "revision", m.Revision, MaxRevisionBytes, false); err != nil {
		return b, err
	}
	b = append(b, byte(m.Outcome))
	b = appendBool(b, m.Retry)
	b = appendU32(b, m.HeartbeatIntervalMs)
	b = appendU32(b, m.LeaseTTLMs)
	b = appendU64(b, uint64(m.UpdatedAtUnixMs))
	return appendStr(b, m.Revision), nil
}

func (m *Ack) UnmarshalBinary(p []byte) error {
	r := reader{t: TypeAck, b: p}
	var a Ack
	a.Outcome = Outcome(r.u8("outcome"))
	if r.err == nil && !a.Outcome.Valid() {
		r.err = fieldErr(TypeAck, "outcome", ErrInvalidValue, "%d is not an outcome (1..4)", a.Outcome)
	}
	a.Retry = r.boolean("retry")
	a.HeartbeatIntervalMs = r.u32("heartbeatIntervalMs")
	a.LeaseTTLMs = r.u32("leaseTtlMs")
	a.UpdatedAtUnixMs = int64(r.u64("updatedAtUnixMs"))
	if r.err == nil && a.UpdatedAtUnixMs < 0 {
		r.err = fieldErr(TypeAck, "updatedAtUnixMs", ErrInvalidValue, "%d is negative", a.UpdatedAtUnixMs)
	}
	a.Revision = r.str("revision", MaxRevisionBytes, false)
	if err := r.finish(); err != nil {
		return err
	}
	*m = a
	return nil
}

// EpochBump carries the placement version (ADR 0001 section 7): an
// opaque equality token, zero for the empty worker set. It answers
// Subscribe and is then pushed with request ID 0 whenever the version
// changes.
type EpochBump struct {
	Version uint64
}

func (*EpochBump) Type() Type                              { return TypeEpochBump }
func (m *EpochBump) AppendBinary(b []byte) ([]byte, error) { return appendU64(b, m.Version), nil }

func (m *EpochBump) UnmarshalBinary(p []byte) error {
	r := reader{t: TypeEpochBump, b: p}
	v := r.u64("version")
	if err := r.finish(); err != nil {
		return err
	}
	m.Version = v
	return nil
}

// PlacementLookup asks for the Replicas owners of Key. The coordinator
// answers with PlacementResponse or Error (no_workers when no healthy
// worker exists, not_ready when it has no current snapshot).
type PlacementLookup struct {
	Key      []byte // 1..MaxKeyBytes
	Replicas uint16 // 1..MaxReplicas
}

func (*PlacementLookup) Type() Type { return TypePlacementLookup }

func checkReplicas(t Type, field string, n int) error {
	switch {
	case n > MaxReplicas:
		return fieldErr(t, field, ErrFieldTooLarge, "%d exceeds the limit of %d", n, MaxReplicas)
	case n == 0 && t == TypePlacementLookup:
		return fieldErr(t, field, ErrInvalidValue, "must be at least 1")
	}
	return nil
}

func (m *PlacementLookup) AppendBinary(b []byte) ([]byte, error) {
	if err := checkReplicas(TypePlacementLookup, "replicas", int(m.Replicas)); err != nil {
		return b, err
	}
	switch {
	case len(m.Key) == 0:
		return b, fieldErr(TypePlacementLookup, "key", ErrInvalidValue, "must not be empty")
	case len(m.Key) > MaxKeyBytes:
		return b, fieldErr(TypePlacementLookup, "key", ErrFieldTooLarge, "%d bytes exceeds the %d byte limit", len(m.Key), MaxKeyBytes)
	}
	b = appendU16(b, m.Replicas)
	return appendRaw(b, m.Key), nil
}

func (m *PlacementLookup) UnmarshalBinary(p []byte) error {
	r := reader{t: TypePlacementLookup, b: p}
	replicas := r.u16("replicas")
	if r.err == nil {
		r.err = checkReplicas(TypePlacementLookup, "replicas", int(replicas))
	}
	key := r.raw("key", MaxKeyBytes)
	if err := r.finish(); err != nil {
		return err
	}
	if len(key) == 0 {
		return fieldErr(TypePlacementLookup, "key", ErrInvalidValue, "must not be empty")
	}
	m.Replicas = replicas
	m.Key = append(m.Key[:0], key...)
	return nil
}

// Owner is one worker that owns a key, in its wire form. The codec knows
// no placement: the domain type is placement.Owner, and each side converts
// at its edge (the coordinator's server, the client's Lookup).
type Owner struct {
	NodeID      string // cluster.ValidateID rules
	DataAddress string // 1..cluster.MaxAddressBytes bytes of UTF-8
}

// PlacementResponse answers PlacementLookup: the owners in HRW order
// (first is primary) and the placement version they were computed from.
type PlacementResponse struct {
	Version uint64
	Owners  []Owner // at most MaxReplicas
}

func (*PlacementResponse) Type() Type { return TypePlacementResponse }

func checkOwner(i int, o *Owner) error {
	t := TypePlacementResponse
	if err := cluster.ValidateID("nodeId", o.NodeID); err != nil {
		return &FieldError{Type: t, Field: fmt.Sprintf("owners[%d].nodeId", i), Kind: kindOf(len(o.NodeID), cluster.MaxIDBytes), Detail: clusterDetail(err)}
	}
	if err := checkStrField(t, "dataAddress", o.DataAddress, cluster.MaxAddressBytes, true); err != nil {
		// The indexed name is built only on failure: it would allocate.
		err.Field = fmt.Sprintf("owners[%d].dataAddress", i)
		return err
	}
	return nil
}

func (m *PlacementResponse) AppendBinary(b []byte) ([]byte, error) {
	if err := checkReplicas(TypePlacementResponse, "owners.count", len(m.Owners)); err != nil {
		return b, err
	}
	for i := range m.Owners {
		if err := checkOwner(i, &m.Owners[i]); err != nil {
			return b, err
		}
	}
	b = appendU64(b, m.Version)
	b = appendU16(b, uint16(len(m.Owners)))
	for _, o := range m.Owners {
		b = appendStr(b, o.NodeID)
		b = appendStr(b, o.DataAddress)
	}
	return b, nil
}

func (m *PlacementResponse) UnmarshalBinary(p []byte) error {
	r := reader{t: TypePlacementResponse, b: p}
	version := r.u64("version")
	n := int(r.u16("owners.count"))
	if r.err == nil {
		// Checked before anything is allocated for the owners.
		r.err = checkReplicas(TypePlacementResponse, "owners.count", n)
	}
	if r.err != nil {
		return r.err
	}
	var owners [MaxReplicas]Owner
	for i := range n {
		owners[i].NodeID = r.str("owners.nodeId", cluster.MaxIDBytes, true)
		owners[i].DataAddress = r.str("owners.dataAddress", cluster.MaxAddressBytes, true)
		if r.err != nil {
			if fe, ok := r.err.(*FieldError); ok {
				fe.Field = fmt.Sprintf("owners[%d].%s", i, fe.Field[len("owners."):])
			}
			return r.err
		}
	}
	if err := r.finish(); err != nil {
		return err
	}
	for i := range n {
		if err := checkOwner(i, &owners[i]); err != nil {
			return err
		}
	}
	m.Version = version
	m.Owners = append(m.Owners[:0], owners[:n]...)
	return nil
}
