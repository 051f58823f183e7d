package format

import (
	"math"
	"testing"
)

func TestBytes(t *testing.T) {
	for _, tt := range []struct {
		n           uint64
		long, short string
	}{
		{0, "0 B", "0B"},
		{1023, "1023 B", "1023B"},
		{1024, "1.0 KiB", "1.0K"},
		{1536, "1.5 KiB", "1.5K"},
		{1<<20 - 1, "1.0 MiB", "1.0M"}, // 1023.999 KiB rounds up a unit
		{8 << 30, "8.0 GiB", "8.0G"},
		{13 << 29, "6.5 GiB", "6.5G"},
		{996 << 30 / 100, "10 GiB", "10G"},
		{64 << 30, "64 GiB", "64G"},
		{1 << 50, "1.0 PiB", "1.0P"},
		{math.MaxUint64, "16 EiB", "16E"},
	} {
		if got := Bytes(tt.n); got != tt.long {
			t.Errorf("Bytes(%d) = %q, want %q", tt.n, got, tt.long)
		}
		if got := BytesShort(tt.n); got != tt.short {
			t.Errorf("BytesShort(%d) = %q, want %q", tt.n, got, tt.short)
		}
	}
}

func TestRate(t *testing.T) {
	for _, tt := range []struct {
		v    float64
		want string
	}{
		{-1, "0"}, {math.NaN(), "0"}, {0, "0"}, {0.5234, "0.52"}, {9.999, "10.0"}, {12.34, "12.3"}, {123.4, "123"},
		{999.4, "999"}, {999.5, "1.00k"}, {1234, "1.23k"}, {45.6e6, "45.6M"},
	} {
		if got := Rate(tt.v); got != tt.want {
			t.Errorf("Rate(%v) = %q, want %q", tt.v, got, tt.want)
		}
	}
}

func TestRatio(t *testing.T) {
	if r := HitRatio(0, 0); r != -1 || Percent(r) != "-" {
		t.Errorf("no traffic: ratio %v, %q", r, Percent(r))
	}
	if r := HitRatio(9000, 1000); r != 0.9 || Percent(r) != "90.0%" {
		t.Errorf("9000/1000: ratio %v, %q", r, Percent(r))
	}
	if got := Percent(2.0 / 3); got != "66.7%" {
		t.Errorf("Percent(2/3) = %q", got)
	}
}

func TestText(t *testing.T) {
	for in, want := range map[string]string{
		"worker-1":         "worker-1",
		"héllo wörld":      "héllo wörld",
		"v1\x1b[31mred":    `v1\x1b[31mred`,
		"a\u0085b":         `a\u0085b`,
		"evil\u202etxt.sh": `evil\u202etxt.sh`,
		"bad\xffutf8":      `bad\xffutf8`,
		"keep \uFFFD":      "keep \uFFFD",
	} {
		if got := Text(in); got != want {
			t.Errorf("Text(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseBytes(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want uint64
	}{
		{"0", 0},
		{"1024", 1024},
		{"1,000", 1000},
		{"4MiB", 4 << 20},
		{"10 GiB", 10 << 30},
		{"64kib", 64 << 10},
		{"2Gi", 2 << 30},
		{"1.5k", 1500},
		{"1 MB", 1_000_000},
		{"1.5 KiB", 1536},
	} {
		got, err := ParseBytes(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "MiB", "4 parsecs", "-1", "1..2", "16EiB"} {
		if n, err := ParseBytes(bad); err == nil {
			t.Errorf("ParseBytes(%q) = %d, want an error", bad, n)
		}
	}
}

// TestBytesParsesBack: what Bytes writes, ParseBytes reads, within the
// rounding of one decimal or of the last digit.
func TestBytesParsesBack(t *testing.T) {
	for _, n := range []uint64{0, 1, 1023, 1024, 1536, 10 << 20, 1<<30 + 1, 64 << 30, 3 << 40, 1 << 62} {
		got, err := ParseBytes(Bytes(n))
		if err != nil {
			t.Fatalf("ParseBytes(Bytes(%d) = %q): %v", n, Bytes(n), err)
		}
		if d := math.Abs(float64(got) - float64(n)); d > 0.05*float64(n) {
			t.Errorf("ParseBytes(Bytes(%d) = %q) = %d, off by %.0f", n, Bytes(n), got, d)
		}
	}
}
