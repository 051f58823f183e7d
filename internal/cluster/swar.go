package cluster

// Byte-class scans eight bytes at a time (SWAR: SIMD within a register).
// The strings of a record are mostly printable ASCII; each scan below
// returns how many leading bytes of s are in its class, and the callers
// look at the byte that stops it one at a time.

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// load64 returns s[i:i+8] as a little-endian word; the compiler merges
// the byte loads into one.
func load64(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// hasByte reports whether some byte of w is c (exact, as a whole word).
func hasByte(w uint64, c byte) bool {
	x := w ^ (lsb * uint64(c))
	return (x-lsb)&^x&msb != 0
}

// hasLess reports whether some byte of w, all of whose bytes are below
// 0x80, is below n (n at most 0x80).
func hasLess(w uint64, n byte) bool {
	return (w-lsb*uint64(n))&^w&msb != 0
}

// plainPrefix returns the length of the longest prefix of s of printable
// ASCII (0x20..0x7e): the bytes a validated text field holds in the common
// case.
func plainPrefix(s string) int {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		w := load64(s, i)
		if w&msb != 0 || hasLess(w, 0x20) || hasByte(w, 0x7f) {
			break
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			return i
		}
	}
	return i
}

// jsonPlainPrefix returns the length of the longest prefix of s that a
// JSON string holds as itself: printable ASCII and DEL, but the quote and
// the backslash. The scanner reads canonical strings with it.
func jsonPlainPrefix(s string) int {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		w := load64(s, i)
		if w&msb != 0 || hasLess(w, 0x20) || hasByte(w, '"') || hasByte(w, '\\') {
			break
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
			return i
		}
	}
	return i
}

// htmlSafePrefix returns the length of the longest prefix of s that
// encoding/json writes as itself with HTML escaping on: ASCII from 0x20
// but '"', '\\', '<', '>' and '&'.
func htmlSafePrefix(s string) int {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		w := load64(s, i)
		if w&msb != 0 || hasLess(w, 0x20) || hasByte(w, '"') || hasByte(w, '\\') ||
			hasByte(w, '<') || hasByte(w, '>') || hasByte(w, '&') {
			break
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return i
		}
	}
	return i
}
