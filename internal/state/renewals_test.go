package state

import (
	"bytes"
	"compress/flate"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/talonhq/talon/internal/cluster"
)

func renewalBatch(n int, at int64) []Renewal {
	out := make([]Renewal, n)
	for i := range out {
		out[i] = Renewal{Role: cluster.RoleWorker, NodeID: fmt.Sprintf("worker-%05d", i), Incarnation: IncarnationTag(fmt.Sprintf("inc-%d", i)), AtUnixMs: at + int64(i*7%5000)}
	}
	return out
}

func TestRenewalsRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, 3, 1000} {
		in := renewalBatch(n, 1_780_000_000_000)
		// Reversed input: the encoding sorts.
		rev := make([]Renewal, n)
		for i := range in {
			rev[n-1-i] = in[i]
		}
		b, err := EncodeRenewals(rev)
		if err != nil {
			t.Fatalf("EncodeRenewals(%d) = %v", n, err)
		}
		got, err := DecodeRenewals(b)
		if err != nil {
			t.Fatalf("DecodeRenewals(%d renewals) = %v", n, err)
		}
		if len(got) != n || (n > 0 && !reflect.DeepEqual(got, in)) {
			t.Fatalf("round trip of %d renewals: got %d, first %+v; want sorted input", n, len(got), got[:min(1, len(got))])
		}
		if n == 1000 {
			t.Logf("1000 renewals: %d bytes, %.1f bytes a renewal", len(b), float64(len(b))/1000)
			if per := float64(len(b)) / 1000; per > 8 {
				t.Errorf("1000 renewals of patterned node IDs took %.1f bytes each: want at most 8 (the cost peers pay for exact ages)", per)
			}
		}
	}
}

func TestRenewalsRefused(t *testing.T) {
	raw := func(b []byte) []byte {
		var out bytes.Buffer
		out.WriteByte(renewalFormat)
		zw, _ := flate.NewWriter(&out, flate.BestSpeed)
		zw.Write(b)
		zw.Close()
		return out.Bytes()
	}
	bomb := raw(make([]byte, maxRenewalRaw+10))
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "unknown format"},
		{"other format", []byte{9, 1, 2}, "unknown format"},
		{"not deflate", []byte{renewalFormat, 0xff, 0xff}, "renewal batch"},
		{"count past limit", raw([]byte{0xff, 0xff, 0xff, 0xff, 0x0f}), "bad count"},
		{"truncated", raw([]byte{2, 6, 'w', 'o', 'r', 'k', 'e', 'r'}), "truncated"},
		{"bad role", raw([]byte{1, 3, 'b', 'a', 'd', 1, 'n', 0, 0, 0, 0, 0}), "not a valid role"},
		{"trailing", raw([]byte{0, 7}), "1 trailing bytes"},
		{"decompression bomb", bomb, "more than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeRenewals(tc.b)
			if !errors.Is(err, ErrRenewalBatch) || !bytes.Contains([]byte(err.Error()), []byte(tc.want)) {
				t.Fatalf("DecodeRenewals = %v; want ErrRenewalBatch saying %q", err, tc.want)
			}
		})
	}
	if _, err := EncodeRenewals([]Renewal{{Role: cluster.RoleWorker, NodeID: "bad id"}}); !errors.Is(err, ErrRenewalBatch) {
		t.Fatalf("EncodeRenewals of an invalid node ID = %v; want ErrRenewalBatch", err)
	}
}

func FuzzDecodeRenewals(f *testing.F) {
	b, _ := EncodeRenewals(renewalBatch(3, 1000))
	f.Add(b)
	f.Add([]byte{renewalFormat})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := DecodeRenewals(b)
		if err != nil {
			return
		}
		again, err := EncodeRenewals(got)
		if err != nil {
			t.Fatalf("a decoded batch does not encode: %v", err)
		}
		back, err := DecodeRenewals(again)
		if err != nil || len(back) != len(got) {
			t.Fatalf("re-encoded batch decodes to %d, %v; want %d", len(back), err, len(got))
		}
	})
}
