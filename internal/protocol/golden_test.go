package protocol

import (
	"bytes"
	"encoding/hex"
	"reflect"
	"strings"
	"testing"

	"github.com/talonhq/talon/internal/cluster"
)

// goldenMessages are fixed inputs for the golden frames. The record bytes
// are a literal, not cluster.Encode output, so that a change to the record
// schema does not show up as a change to the wire.
func goldenMessages() []Message {
	rec := []byte(`{"schemaVersion":1,"nodeId":"w1"}`)
	return []Message{
		&Error{Code: CodeUnsupportedVersion, Retryable: false, MinVersion: 1, MaxVersion: 1, Message: "v2?"},
		&Ping{},
		&Pong{},
		&Register{Record: rec},
		&Heartbeat{Record: rec},
		&Deregister{ClusterID: "c", Role: cluster.RoleCoordinator, NodeID: "n", IncarnationID: "i"},
		&Ack{Outcome: OutcomeStale, Retry: true, HeartbeatIntervalMs: 5000, LeaseTTLMs: 30000, UpdatedAtUnixMs: 1700000000000, Revision: "r9"},
		&Subscribe{},
		&EpochBump{Version: 0x0102030405060708},
		&PlacementLookup{Key: []byte("k1"), Replicas: 2},
		&PlacementResponse{Version: 0xa1a2a3a4a5a6a7a8, Owners: []Owner{{NodeID: "w1", DataAddress: "h:1"}}},
		&Attest{Token: []byte("t1")},
		&Attested{NodeID: "w1", ExpiresUnixMs: 1700000000000},
		&Instructions{ClusterID: "c", NodeID: "w1", IncarnationID: "i"},
		&Instructed{Cordoned: true, Persist: true, By: "ops", AtUnixMs: 1700000000000, Revoked: false},
		&Jobs{ClusterID: "c", NodeID: "w1", IncarnationID: "i", Reports: []JobReport{{JobID: "j1", State: JobRunning, BlocksDone: 1, BlocksTotal: 2, BytesDone: 3, BytesTotal: 4}}},
		&JobOrders{Orders: []JobOrder{{JobID: "j1", Op: JobWarm, Targets: []JobTarget{{Prefix: true, Key: "d/"}}}}},
	}
}

// golden holds the exact bytes of one frame of each type, request IDs 1
// to 17 in goldenMessages order. Spaces separate the header fields (magic,
// version, type, flags, length, request ID) and the payload fields. A
// failure here means the wire format changed: if that is intended, the
// protocol version must change too.
var golden = map[Type]string{
	TypeError:             "544c4e43 0001 0001 00000000 0000000c 0000000000000001  0006 00 0001 0001 0003 76323f",
	TypePing:              "544c4e43 0001 0002 00000000 00000000 0000000000000002",
	TypePong:              "544c4e43 0001 0003 00000000 00000000 0000000000000003",
	TypeRegister:          "544c4e43 0001 0010 00000000 00000023 0000000000000004  0021 7b22736368656d6156657273696f6e223a312c226e6f64654964223a227731227d",
	TypeHeartbeat:         "544c4e43 0001 0011 00000000 00000023 0000000000000005  0021 7b22736368656d6156657273696f6e223a312c226e6f64654964223a227731227d",
	TypeDeregister:        "544c4e43 0001 0012 00000000 0000000a 0000000000000006  0001 63 01 0001 6e 0001 69",
	TypeAck:               "544c4e43 0001 0013 00000000 00000016 0000000000000007  03 01 00001388 00007530 0000018bcfe56800 0002 7239",
	TypeSubscribe:         "544c4e43 0001 0020 00000000 00000000 0000000000000008",
	TypeEpochBump:         "544c4e43 0001 0021 00000000 00000008 0000000000000009  0102030405060708",
	TypePlacementLookup:   "544c4e43 0001 0022 00000000 00000006 000000000000000a  0002 0002 6b31",
	TypePlacementResponse: "544c4e43 0001 0023 00000000 00000013 000000000000000b  a1a2a3a4a5a6a7a8 0001 0002 7731 0003 683a31",
	TypeAttest:            "544c4e43 0001 0014 00000000 00000004 000000000000000c  0002 7431",
	TypeAttested:          "544c4e43 0001 0015 00000000 0000000c 000000000000000d  0002 7731 0000018bcfe56800",
	TypeInstructions:      "544c4e43 0001 0016 00000000 0000000a 000000000000000e  0001 63 0002 7731 0001 69",
	TypeInstructed:        "544c4e43 0001 0017 00000000 00000010 000000000000000f  01 01 0003 6f7073 0000018bcfe56800 00",
	TypeJobs:              "544c4e43 0001 0018 00000000 00000033 0000000000000010  0001 63 0002 7731 0001 69 0001 0002 6a31 01 0000000000000001 0000000000000002 0000000000000003 0000000000000004 0000",
	TypeJobOrders:         "544c4e43 0001 0019 00000000 0000000e 0000000000000011  0001 0002 6a31 01 0001 01 0002 642f",
}

func TestGoldenFrames(t *testing.T) {
	msgs := goldenMessages()
	if len(golden) != len(msgs) {
		t.Fatalf("%d golden frames for %d messages", len(golden), len(msgs))
	}
	for i, m := range msgs {
		t.Run(m.Type().String(), func(t *testing.T) {
			want, err := hex.DecodeString(strings.ReplaceAll(golden[m.Type()], " ", ""))
			if err != nil {
				t.Fatalf("bad golden hex: %v", err)
			}
			got := mustFrame(t, uint64(i+1), m)
			if !bytes.Equal(got, want) {
				t.Fatalf("wire format changed:\n got %x\nwant %x", got, want)
			}
			f, err := NewDecoder(bytes.NewReader(want)).ReadFrame()
			if err != nil {
				t.Fatalf("ReadFrame(golden): %v", err)
			}
			dm, err := f.Message()
			if err != nil || !reflect.DeepEqual(dm, m) || f.RequestID != uint64(i+1) {
				t.Fatalf("golden decodes to %#v (id %d), %v", dm, f.RequestID, err)
			}
		})
	}
}
