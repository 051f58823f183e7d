package protocol

import (
	"fmt"
	"io"
	"strings"
	"testing"
)

// heartbeat2K returns a Heartbeat whose record encodes to about 2 KiB:
// a worker with a full set of counters and a dozen deployment labels.
func heartbeat2K(b *testing.B) *Heartbeat {
	rec := testRecord()
	for i := range 12 {
		rec.Labels[fmt.Sprintf("topology.talon.io/label-%02d", i)] = strings.Repeat("v", 100)
	}
	hb, err := NewHeartbeat(rec)
	if err != nil {
		b.Fatal(err)
	}
	if n := len(hb.Record); n < 1900 || n > 2300 {
		b.Fatalf("record is %d bytes, want about 2 KiB", n)
	}
	return hb
}

func placementResponse3() *PlacementResponse {
	return &PlacementResponse{Version: 0x9e3779b97f4a7c15, Owners: []Owner{
		{NodeID: "worker-a-0001", DataAddress: "10.0.1.17:7500"},
		{NodeID: "worker-b-0002", DataAddress: "10.0.2.17:7500"},
		{NodeID: "worker-c-0003", DataAddress: "10.0.3.17:7500"},
	}}
}

func benchEncode(b *testing.B, m Message) {
	enc := NewEncoder(io.Discard)
	frame, err := AppendFrame(nil, 1, m)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if err := enc.Encode(1, m); err != nil {
			b.Fatal(err)
		}
	}
}

// benchDecode reads the frame from a stream and decodes it into a reused
// message, as a server loop does.
func benchDecode(b *testing.B, m Message) {
	frame, err := AppendFrame(nil, 1, m)
	if err != nil {
		b.Fatal(err)
	}
	dec := NewDecoder(&loopReader{b: frame})
	into := NewMessage(m.Type())
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		f, err := dec.ReadFrame()
		if err != nil {
			b.Fatal(err)
		}
		if err := into.UnmarshalBinary(f.Payload); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkHeartbeat2K(b *testing.B) {
	hb := heartbeat2K(b)
	b.Run("encode", func(b *testing.B) { benchEncode(b, hb) })
	b.Run("decode", func(b *testing.B) { benchDecode(b, hb) })
	// The record itself is JSON (cluster.Decode); this is what a
	// coordinator pays per heartbeat in total.
	b.Run("decode+record", func(b *testing.B) {
		frame, _ := AppendFrame(nil, 1, hb)
		dec := NewDecoder(&loopReader{b: frame})
		var into Heartbeat
		b.SetBytes(int64(len(frame)))
		b.ReportAllocs()
		for b.Loop() {
			f, err := dec.ReadFrame()
			if err != nil {
				b.Fatal(err)
			}
			if err := into.UnmarshalBinary(f.Payload); err != nil {
				b.Fatal(err)
			}
			if _, err := DecodeRecordPayload(into.Record); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkPlacementLookup(b *testing.B) {
	m := &PlacementLookup{Key: []byte("datasets/imagenet/train/shard-00417.tar#block-000123"), Replicas: 3}
	b.Run("encode", func(b *testing.B) { benchEncode(b, m) })
	b.Run("decode", func(b *testing.B) { benchDecode(b, m) })
}

func BenchmarkPlacementResponse(b *testing.B) {
	m := placementResponse3()
	b.Run("encode", func(b *testing.B) { benchEncode(b, m) })
	b.Run("decode", func(b *testing.B) { benchDecode(b, m) })
}
