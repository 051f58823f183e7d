// Package format is the one place where sizes, rates and ratios are
// written and sizes are read. It renders the numbers that talonctl, its
// top view and `talon config print` show: sizes in IEC units, rates with
// an SI suffix and hit ratios as percentages, so that a size or a ratio
// reads the same everywhere (and as the web UI shows the API's raw
// numbers: binary units, one decimal). ParseBytes reads the sizes that
// talon's flags and files take. Pure functions; no I/O.
package format

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dustin/go-humanize"
)

// iecUnits are the binary prefixes after bytes.
const iecUnits = "KMGTPE"

// scaleIEC returns n in its largest binary unit (v < 1024) and the unit's
// index in iecUnits; -1 for plain bytes (n < 1024). The value is rounded
// the way Bytes prints it, so 1023.96 KiB becomes 1.0 MiB.
func scaleIEC(n uint64) (v float64, unit int) {
	if n < 1024 {
		return float64(n), -1
	}
	v = float64(n)
	for unit = -1; unit < len(iecUnits)-1; unit++ {
		if v < 1024 && round(v) < 1024 {
			break
		}
		v /= 1024
	}
	return v, unit
}

// round is v rounded as number prints it.
func round(v float64) float64 {
	if v < 9.95 {
		return math.Round(v*10) / 10
	}
	return math.Round(v)
}

// number prints a scaled value: one decimal below 10, none from 10 up.
func number(v float64) string {
	prec := 0
	if v < 9.95 {
		prec = 1
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

// Bytes renders a byte count in IEC units: 0 B, 1023 B, 1.5 KiB, 8.0 GiB,
// 64 GiB.
func Bytes(n uint64) string {
	v, u := scaleIEC(n)
	if u < 0 {
		return fmt.Sprintf("%d B", n)
	}
	return number(v) + " " + string(iecUnits[u]) + "iB"
}

// ParseBytes reads a size: a byte count or a number with a unit, binary
// (KiB, Ki, MiB, ..., EiB) or decimal (kB, k, MB, ..., EB), in any case,
// with or without a space and with optional thousands commas: 1024, 4MiB,
// 10 GiB, 1.5k, 1,000. It is go-humanize's ParseBytes, kept behind this
// package so that sizes are read and written in one place.
func ParseBytes(s string) (uint64, error) { return humanize.ParseBytes(s) }

// BytesShort is Bytes for narrow columns, the same number with the unit's
// letter only: 512B, 1.5K, 8.0G, 64G.
func BytesShort(n uint64) string {
	v, u := scaleIEC(n)
	if u < 0 {
		return fmt.Sprintf("%dB", n)
	}
	return number(v) + string(iecUnits[u])
}

// Rate renders a non-negative per-second rate with three significant
// digits and an SI suffix: 0, 0.52, 12.3, 123, 1.23k, 45.6M. Negative and
// NaN values render as 0.
func Rate(v float64) string {
	if v <= 0 || math.IsNaN(v) {
		return "0"
	}
	const units = "kMGTPE"
	u := -1
	for v >= 999.5 && u < len(units)-1 {
		v /= 1000
		u++
	}
	prec := 0
	switch {
	case v < 9.995:
		prec = 2
	case v < 99.95:
		prec = 1
	}
	var buf [24]byte
	b := strconv.AppendFloat(buf[:0], v, 'f', prec, 64)
	if u >= 0 {
		b = append(b, units[u])
	}
	return string(b)
}

// HitRatio is hits/(hits+misses), or -1 when there were neither.
func HitRatio(hits, misses uint64) float64 {
	if hits+misses == 0 {
		return -1
	}
	return float64(hits) / float64(hits+misses)
}

// Percent renders a ratio in [0, 1] as a percentage with one decimal:
// 90.0%. A negative ratio (unknown, see HitRatio) renders as "-".
func Percent(ratio float64) string {
	if ratio < 0 || math.IsNaN(ratio) {
		return "-"
	}
	var buf [24]byte
	return string(append(strconv.AppendFloat(buf[:0], 100*ratio, 'f', 1, 64), '%'))
}

// Text returns s safe to print on a terminal: control characters (C0,
// DEL, C1), bidirectional controls and invalid UTF-8 are written as Go
// escapes (\x1b, \u202e), so a record cannot move the cursor, recolour the
// screen or reorder what a reader sees. Other text is unchanged.
func Text(s string) string {
	if PrintableASCII(s) {
		return s // the common case, without decoding a rune
	}
	clean := utf8.ValidString(s)
	for _, r := range s {
		if unsafeRune(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unsafeRune(r):
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// PrintableASCII reports whether s is printable ASCII only (space to
// tilde): Text leaves it as it is, and its display width is len(s).
func PrintableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

func unsafeRune(r rune) bool {
	return unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Bidi_Control, r)
}
