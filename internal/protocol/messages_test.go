package protocol

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/talonhq/talon/internal/cluster"
)

func TestMessageRoundTrip(t *testing.T) {
	for _, m := range sampleMessages(t) {
		t.Run(m.Type().String(), func(t *testing.T) {
			b := mustAppend(t, m)
			got, err := Decode(m.Type(), b)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(got, m) {
				t.Fatalf("round trip:\n got %#v\nwant %#v", got, m)
			}
			if got.Type() != m.Type() {
				t.Fatalf("Type() = %v, want %v", got.Type(), m.Type())
			}
			// Appending to a non-empty buffer keeps what was there.
			prefix := []byte("xyz")
			b2, err := m.AppendBinary(prefix)
			if err != nil || !bytes.Equal(b2[:3], prefix) || !bytes.Equal(b2[3:], b) {
				t.Fatalf("AppendBinary(prefix) = %x, %v", b2, err)
			}
		})
	}
}

func TestDecodeDoesNotAlias(t *testing.T) {
	m := &PlacementLookup{Key: []byte("key"), Replicas: 1}
	b := mustAppend(t, m)
	var got PlacementLookup
	if err := got.UnmarshalBinary(b); err != nil {
		t.Fatalf("UnmarshalBinary: %v", err)
	}
	for i := range b {
		b[i] = 0xff
	}
	if string(got.Key) != "key" {
		t.Fatalf("Key = %q after the payload was overwritten: it aliases the input", got.Key)
	}
}

// Every strict prefix of a valid payload is truncated, and one extra byte
// is trailing data.
func TestTruncatedAtEveryOffsetAndTrailing(t *testing.T) {
	for _, m := range sampleMessages(t) {
		t.Run(m.Type().String(), func(t *testing.T) {
			b := mustAppend(t, m)
			for n := 0; n < len(b); n++ {
				fresh := NewMessage(m.Type())
				err := fresh.UnmarshalBinary(b[:n])
				if !errors.Is(err, ErrTruncated) || !errors.Is(err, ErrMalformed) {
					t.Fatalf("UnmarshalBinary(first %d of %d bytes) = %v, want ErrTruncated", n, len(b), err)
				}
				var fe *FieldError
				if !errors.As(err, &fe) || fe.Type != m.Type() || fe.Field == "" {
					t.Fatalf("error %v is not a *FieldError naming a field of %s", err, m.Type())
				}
				if !reflect.DeepEqual(fresh, NewMessage(m.Type())) {
					t.Fatalf("failed decode changed the message: %#v", fresh)
				}
			}
			err := NewMessage(m.Type()).UnmarshalBinary(append(bytes.Clone(b), 0))
			if !errors.Is(err, ErrTrailingData) || !errors.Is(err, ErrMalformed) {
				t.Fatalf("UnmarshalBinary(payload + 1 byte) = %v, want ErrTrailingData", err)
			}
		})
	}
}

func TestFailedDecodeKeepsMessage(t *testing.T) {
	for _, m := range sampleMessages(t) {
		t.Run(m.Type().String(), func(t *testing.T) {
			b := mustAppend(t, m)
			got := NewMessage(m.Type())
			if err := got.UnmarshalBinary(b); err != nil {
				t.Fatalf("UnmarshalBinary: %v", err)
			}
			if err := got.UnmarshalBinary(append(bytes.Clone(b), 0)); err == nil {
				t.Fatalf("UnmarshalBinary(trailing) = nil")
			}
			if !reflect.DeepEqual(got, m) {
				t.Fatalf("failed decode changed the message:\n got %#v\nwant %#v", got, m)
			}
		})
	}
}

// u16 returns v big-endian.
func u16(v int) []byte { return []byte{byte(v >> 8), byte(v)} }

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func str16(s string) []byte { return cat(u16(len(s)), []byte(s)) }

func TestDecodeErrors(t *testing.T) {
	rec := encodedRecord(t, testRecord())
	u64 := make([]byte, 8)
	ack := func(outcome, retry byte, updated []byte, rev []byte) []byte {
		return cat([]byte{outcome, retry}, make([]byte, 8), updated, rev)
	}
	tests := []struct {
		name    string
		typ     Type
		payload []byte
		kind    error
		field   string // the FieldError's Field
		detail  string // substring of the error
	}{
		{"error retryable not bool", TypeError, cat(u16(1), []byte{2}, u16(1), u16(1), str16("x")), ErrInvalidValue, "retryable", "byte 2 is not a boolean"},
		{"error message too long", TypeError, cat(u16(1), []byte{0}, u16(1), u16(1), u16(1025)), ErrFieldTooLarge, "message", "1025 bytes exceeds the 1024 byte limit"},
		{"error message bad utf8", TypeError, cat(u16(1), []byte{0}, u16(1), u16(1), str16("\xff")), ErrInvalidValue, "message", "UTF-8"},
		{"ping with payload", TypePing, []byte{0}, ErrTrailingData, "(end)", "1 bytes"},
		{"subscribe with payload", TypeSubscribe, []byte{0, 0}, ErrTrailingData, "(end)", "2 bytes"},
		{"register empty record", TypeRegister, u16(0), ErrInvalidValue, "record", "must not be empty"},
		{"heartbeat record over limit", TypeHeartbeat, u16(cluster.MaxRecordBytes + 1), ErrFieldTooLarge, "record", "16385 bytes exceeds the 16384 byte limit"},
		{"heartbeat record truncated", TypeHeartbeat, cat(u16(len(rec)), rec[:10]), ErrTruncated, "record", ""},
		{"deregister role unknown", TypeDeregister, cat(str16("prod"), []byte{3}, str16("w1"), str16("i")), ErrInvalidValue, "role", "3 is not 1 (coordinator) or 2 (worker)"},
		{"deregister role zero", TypeDeregister, cat(str16("prod"), []byte{0}, str16("w1"), str16("i")), ErrInvalidValue, "role", ""},
		{"deregister cluster empty", TypeDeregister, cat(str16(""), []byte{2}, str16("w1"), str16("i")), ErrInvalidValue, "clusterId", "must not be empty"},
		{"deregister node id too long", TypeDeregister, cat(str16("prod"), []byte{2}, u16(257)), ErrFieldTooLarge, "nodeId", "257 bytes exceeds the 256 byte limit"},
		{"deregister node id slash", TypeDeregister, cat(str16("prod"), []byte{2}, str16("a/b"), str16("i")), ErrInvalidValue, "nodeId", "only letters, digits"},
		{"deregister incarnation empty", TypeDeregister, cat(str16("prod"), []byte{2}, str16("w1"), str16("")), ErrInvalidValue, "incarnationId", "must not be empty"},
		{"attest empty token", TypeAttest, u16(0), ErrInvalidValue, "token", "must not be empty"},
		{"attest token over limit", TypeAttest, u16(MaxAttestTokenBytes + 1), ErrFieldTooLarge, "token", "8193 bytes exceeds the 8192 byte limit"},
		{"attest trailing", TypeAttest, cat(str16("t"), []byte{0}), ErrTrailingData, "(end)", "1 bytes"},
		{"attested node id slash", TypeAttested, cat(str16("a/b"), u64), ErrInvalidValue, "nodeId", "only letters, digits"},
		{"attested expiry zero", TypeAttested, cat(str16("w1"), make([]byte, 8)), ErrInvalidValue, "expiresUnixMs", "0 is not positive"},
		{"instructions node id slash", TypeInstructions, cat(str16("c"), str16("a/b"), str16("i")), ErrInvalidValue, "nodeId", "only letters, digits"},
		{"instructions no incarnation", TypeInstructions, cat(str16("c"), str16("w1"), str16("")), ErrInvalidValue, "incarnationId", "must not be empty"},
		{"instructed negative time", TypeInstructed, cat([]byte{1, 0}, str16("ops"), []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, []byte{0}), ErrInvalidValue, "atUnixMs", "-1 is negative"},
		{"instructed bad bool", TypeInstructed, cat([]byte{2, 0}, str16(""), make([]byte, 8), []byte{0}), ErrInvalidValue, "cordoned", ""},
		{"jobs too many reports", TypeJobs, cat(str16("c"), str16("w1"), str16("i"), []byte{0, 9}), ErrFieldTooLarge, "reports", "at most 8"},
		{"jobs bad state", TypeJobs, cat(str16("c"), str16("w1"), str16("i"), []byte{0, 1}, str16("j1"), []byte{9}, make([]byte, 32), str16("")), ErrInvalidValue, "state", "must be 1 running"},
		{"jobs done past total", TypeJobs, cat(str16("c"), str16("w1"), str16("i"), []byte{0, 1}, str16("j1"), []byte{1}, []byte{0, 0, 0, 0, 0, 0, 0, 5}, make([]byte, 24), str16("")), ErrInvalidValue, "blocksDone", "must not exceed total"},
		{"job orders bad op", TypeJobOrders, cat([]byte{0, 1}, str16("j1"), []byte{3}, []byte{0, 1}, []byte{0}, str16("k")), ErrInvalidValue, "op", "must be 1 warm or 2 free"},
		{"job orders no target", TypeJobOrders, cat([]byte{0, 1}, str16("j1"), []byte{1}, []byte{0, 0}), ErrInvalidValue, "targets", "must be 1 to 8"},
		{"job orders too many", TypeJobOrders, []byte{0, 7}, ErrFieldTooLarge, "orders", "at most 6"},
		{"instructed trailing", TypeInstructed, cat([]byte{0, 0}, str16(""), make([]byte, 8), []byte{0, 9}), ErrTrailingData, "(end)", "1 bytes"},
		{"ack outcome zero", TypeAck, ack(0, 0, u64, str16("")), ErrInvalidValue, "outcome", "0 is not an outcome"},
		{"ack outcome five", TypeAck, ack(5, 0, u64, str16("")), ErrInvalidValue, "outcome", "5 is not an outcome"},
		{"ack retry not bool", TypeAck, ack(1, 7, u64, str16("")), ErrInvalidValue, "retry", ""},
		{"ack negative time", TypeAck, ack(1, 0, []byte{0x80, 0, 0, 0, 0, 0, 0, 0}, str16("")), ErrInvalidValue, "updatedAtUnixMs", "is negative"},
		{"ack revision too long", TypeAck, ack(1, 0, u64, u16(257)), ErrFieldTooLarge, "revision", "257 bytes exceeds the 256 byte limit"},
		{"lookup replicas zero", TypePlacementLookup, cat(u16(0), str16("k")), ErrInvalidValue, "replicas", "at least 1"},
		{"lookup replicas over", TypePlacementLookup, cat(u16(17), str16("k")), ErrFieldTooLarge, "replicas", "17 exceeds the limit of 16"},
		{"lookup key empty", TypePlacementLookup, cat(u16(1), u16(0)), ErrInvalidValue, "key", "must not be empty"},
		{"lookup key over", TypePlacementLookup, cat(u16(1), u16(1025)), ErrFieldTooLarge, "key", "1025 bytes exceeds the 1024 byte limit"},
		{"response count over", TypePlacementResponse, cat(u64, u16(17)), ErrFieldTooLarge, "owners.count", "17 exceeds the limit of 16"},
		{"response count max u16", TypePlacementResponse, cat(u64, u16(65535)), ErrFieldTooLarge, "owners.count", "65535"},
		{"response owner truncated", TypePlacementResponse, cat(u64, u16(2), str16("w1"), str16("h:1"), str16("w2")), ErrTruncated, "owners[1].dataAddress.length", ""},
		{"response owner address over", TypePlacementResponse, cat(u64, u16(1), str16("w1"), u16(257)), ErrFieldTooLarge, "owners[0].dataAddress", "257 bytes"},
		{"response owner id invalid", TypePlacementResponse, cat(u64, u16(1), str16("-w"), str16("h:1")), ErrInvalidValue, "owners[0].nodeId", "must start with a letter or digit"},
		{"response owner address empty", TypePlacementResponse, cat(u64, u16(1), str16("w1"), str16("")), ErrInvalidValue, "owners[0].dataAddress", "must not be empty"},
		{"epoch bump short", TypeEpochBump, make([]byte, 7), ErrTruncated, "version", "needs 8 bytes at offset 0, 7 remain"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(tt.typ, tt.payload)
			wantErrIs(t, err, ErrMalformed, tt.kind)
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not a *FieldError", err)
			}
			if fe.Type != tt.typ || fe.Field != tt.field {
				t.Fatalf("FieldError names %s.%s, want %s.%s (%v)", fe.Type, fe.Field, tt.typ, tt.field, err)
			}
			if !strings.Contains(err.Error(), tt.detail) {
				t.Fatalf("error %q does not contain %q", err, tt.detail)
			}
		})
	}
}

func TestDecodeUnknownType(t *testing.T) {
	for _, typ := range []Type{0, 4, 15, 26, 31, 36, 0xffff} {
		_, err := Decode(typ, nil)
		wantErrIs(t, err, ErrUnknownType)
		if errors.Is(err, ErrMalformed) {
			t.Fatalf("unknown type error %v matches ErrMalformed", err)
		}
		if NewMessage(typ) != nil {
			t.Fatalf("NewMessage(%d) != nil", typ)
		}
	}
}

// A count or length is checked before anything is allocated for it.
func TestOversizeCountDoesNotAllocate(t *testing.T) {
	payload := cat(make([]byte, 8), u16(65535))
	var m PlacementResponse
	allocs := testing.AllocsPerRun(100, func() {
		if err := m.UnmarshalBinary(payload); err == nil {
			t.Fatal("UnmarshalBinary accepted 65535 owners")
		}
	})
	// The error value itself allocates; the owners never do.
	if allocs > 4 {
		t.Fatalf("rejecting an oversize count made %v allocations", allocs)
	}
}

func TestEncodeRejectsWhatDecodeRejects(t *testing.T) {
	long := func(n int) string { return strings.Repeat("a", n) }
	tests := []struct {
		name  string
		m     Message
		kind  error
		field string
	}{
		{"error message over", &Error{Code: 1, Message: long(MaxErrorMessageBytes + 1)}, ErrFieldTooLarge, "message"},
		{"error message utf8", &Error{Code: 1, Message: "\xff"}, ErrInvalidValue, "message"},
		{"register empty", &Register{}, ErrInvalidValue, "record"},
		{"heartbeat over", &Heartbeat{Record: make([]byte, MaxRecordBytes+1)}, ErrFieldTooLarge, "record"},
		{"deregister cluster over", &Deregister{ClusterID: long(257), Role: cluster.RoleWorker, NodeID: "w", IncarnationID: "i"}, ErrFieldTooLarge, "clusterId"},
		{"deregister role", &Deregister{ClusterID: "c", Role: "leader", NodeID: "w", IncarnationID: "i"}, ErrInvalidValue, "role"},
		{"deregister incarnation over", &Deregister{ClusterID: "c", Role: cluster.RoleWorker, NodeID: "w", IncarnationID: long(257)}, ErrFieldTooLarge, "incarnationId"},
		{"ack outcome", &Ack{}, ErrInvalidValue, "outcome"},
		{"ack negative", &Ack{Outcome: OutcomeAccepted, UpdatedAtUnixMs: -1}, ErrInvalidValue, "updatedAtUnixMs"},
		{"ack revision over", &Ack{Outcome: OutcomeAccepted, Revision: long(257)}, ErrFieldTooLarge, "revision"},
		{"lookup replicas zero", &PlacementLookup{Key: []byte("k")}, ErrInvalidValue, "replicas"},
		{"lookup replicas over", &PlacementLookup{Key: []byte("k"), Replicas: 17}, ErrFieldTooLarge, "replicas"},
		{"lookup key over", &PlacementLookup{Key: make([]byte, MaxKeyBytes+1), Replicas: 1}, ErrFieldTooLarge, "key"},
		{"response owners over", &PlacementResponse{Owners: make([]Owner, MaxReplicas+1)}, ErrFieldTooLarge, "owners.count"},
		{"response owner id", &PlacementResponse{Owners: []Owner{{NodeID: "w", DataAddress: "h:1"}, {NodeID: "", DataAddress: "h:1"}}}, ErrInvalidValue, "owners[1].nodeId"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := tt.m.AppendBinary([]byte("pre"))
			wantErrIs(t, err, ErrMalformed, tt.kind)
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tt.field {
				t.Fatalf("error %v does not name field %q", err, tt.field)
			}
			if string(b) != "pre" {
				t.Fatalf("failed AppendBinary changed the buffer to %q", b)
			}
		})
	}
}

func TestLimitsAtTheBoundary(t *testing.T) {
	owners := make([]Owner, MaxReplicas)
	for i := range owners {
		owners[i] = Owner{NodeID: strings.Repeat("n", cluster.MaxIDBytes), DataAddress: strings.Repeat("h", cluster.MaxAddressBytes)}
	}
	msgs := []Message{
		&Error{Code: 0xffff, Message: strings.Repeat("é", MaxErrorMessageBytes/2)},
		&Heartbeat{Record: make([]byte, MaxRecordBytes)},
		&Ack{Outcome: OutcomeNotFound, Revision: strings.Repeat("r", MaxRevisionBytes), HeartbeatIntervalMs: 1<<32 - 1, UpdatedAtUnixMs: 1<<63 - 1},
		&PlacementLookup{Key: make([]byte, MaxKeyBytes), Replicas: MaxReplicas},
		&PlacementResponse{Version: 1<<64 - 1, Owners: owners},
		&Deregister{ClusterID: strings.Repeat("c", 256), Role: cluster.RoleCoordinator, NodeID: strings.Repeat("n", 256), IncarnationID: strings.Repeat("i", 256)},
	}
	for _, m := range msgs {
		t.Run(m.Type().String(), func(t *testing.T) {
			b := mustAppend(t, m)
			got, err := Decode(m.Type(), b)
			if err != nil {
				t.Fatalf("Decode(at limit): %v", err)
			}
			if !reflect.DeepEqual(got, m) {
				t.Fatalf("round trip at limit changed the message")
			}
			if _, err := AppendFrame(nil, 1, m); err != nil {
				t.Fatalf("AppendFrame(at limit): %v", err)
			}
		})
	}
}

func TestErrorPayloadMaxIsFrozenSize(t *testing.T) {
	b := mustAppend(t, &Error{Message: strings.Repeat("m", MaxErrorMessageBytes)})
	if len(b) != maxErrorPayload || maxErrorPayload != 1033 {
		t.Fatalf("largest Error payload is %d bytes, maxErrorPayload %d, doc.go says 1033", len(b), maxErrorPayload)
	}
}

func TestOutcomeNames(t *testing.T) {
	want := map[Outcome]string{
		OutcomeAccepted: "accepted", OutcomeDuplicate: "duplicate", OutcomeStale: "stale",
		OutcomeNotFound: "not_found", 0: "invalid", 5: "invalid",
	}
	for o, name := range want {
		if o.String() != name {
			t.Fatalf("Outcome(%d).String() = %q, want %q", o, o, name)
		}
		if o.Valid() != (name != "invalid") {
			t.Fatalf("Outcome(%d).Valid() = %v", o, o.Valid())
		}
	}
}

func TestNewRegisterHeartbeat(t *testing.T) {
	r, err := NewRegister(testRecord())
	if err != nil {
		t.Fatalf("NewRegister: %v", err)
	}
	h, err := NewHeartbeat(testRecord())
	if err != nil {
		t.Fatalf("NewHeartbeat: %v", err)
	}
	for _, b := range [][]byte{r.Record, h.Record} {
		got, err := DecodeRecordPayload(b)
		if err != nil || !reflect.DeepEqual(got, testRecord()) {
			t.Fatalf("DecodeRecordPayload = %+v, %v", got, err)
		}
	}
	bad := testRecord()
	bad.NodeID = ""
	if _, err := NewHeartbeat(bad); !errors.Is(err, cluster.ErrInvalid) {
		t.Fatalf("NewHeartbeat(invalid) = %v, want cluster.ErrInvalid", err)
	}
}

func TestResponseType(t *testing.T) {
	for req, want := range map[Type]Type{
		TypePing: TypePong, TypeRegister: TypeAck, TypeHeartbeat: TypeAck, TypeDeregister: TypeAck,
		TypeSubscribe: TypeEpochBump, TypePlacementLookup: TypePlacementResponse,
	} {
		if got, ok := ResponseType(req); !ok || got != want {
			t.Fatalf("ResponseType(%s) = %s, %v; want %s", req, got, ok, want)
		}
	}
	for _, typ := range []Type{TypeError, TypePong, TypeAck, TypeEpochBump, TypePlacementResponse, 99} {
		if _, ok := ResponseType(typ); ok {
			t.Fatalf("ResponseType(%s) reports a request", typ)
		}
	}
}

// Mixed record schema versions: a newer (2) or older (0) record is refused
// as unsupported_version, not retryable, naming both versions, and
// nothing of it is returned.
func TestDecodeRecordPayloadVersions(t *testing.T) {
	rec, err := DecodeRecordPayload(recordWithVersion(t, "1"))
	if err != nil || rec.NodeID != "worker-1" {
		t.Fatalf("DecodeRecordPayload(version 1) = %+v, %v", rec, err)
	}
	for _, v := range []string{"2", "0", "-1", "99"} {
		t.Run("version "+v, func(t *testing.T) {
			rec, err := DecodeRecordPayload(recordWithVersion(t, v))
			if rec != nil {
				t.Fatalf("returned a record of version %s: %+v", v, rec)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not an *Error", err)
			}
			if e.Code != CodeUnsupportedVersion || e.Retryable {
				t.Fatalf("Error = %+v, want unsupported_version, not retryable", e)
			}
			want := fmt.Sprintf("record schema version %s is not supported (this build reads version %d)", v, cluster.SchemaVersion)
			if e.Message != want {
				t.Fatalf("message %q, want %q", e.Message, want)
			}
			wantErrIs(t, err, cluster.ErrUnsupportedVersion)
			// What goes on the wire decodes to the same code and message.
			got, derr := Decode(TypeError, mustAppend(t, e))
			if derr != nil || got.(*Error).Message != want || got.(*Error).Code != CodeUnsupportedVersion {
				t.Fatalf("wire Error = %+v, %v", got, derr)
			}
		})
	}
	for name, b := range map[string][]byte{
		"not json":       []byte("{"),
		"no version":     []byte(`{"nodeId":"w"}`),
		"invalid record": []byte(`{"schemaVersion":1,"nodeId":""}`),
	} {
		t.Run(name, func(t *testing.T) {
			rec, err := DecodeRecordPayload(b)
			if rec != nil || !IsCode(err, CodeInvalidArgument) || Retryable(err) {
				t.Fatalf("DecodeRecordPayload = %+v, %v; want invalid_argument", rec, err)
			}
		})
	}
}
