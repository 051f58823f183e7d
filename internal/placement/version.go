package placement

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"github.com/zeebo/xxh3"
)

// Version is the PlacementVersion: an opaque token naming the set of
// placement-eligible workers a decision was built from. It travels as the
// existing u64 field of PlacementResponse and EpochBump.
//
// A Version is an equality token and nothing else. Equal versions mean the
// same membership; clients must treat any difference, whichever way it
// goes, as "invalidate the cached decision and refresh". Versions are hashes,
// so they have no order: this package offers no comparison beyond ==, and
// callers must not use < or > on them (a coordinator still running the old
// wall-clock epoch may emit a numerically larger or smaller value; both just
// mean "refresh").
//
// EmptyVersion (0) is reserved for the empty set. A non-empty set whose
// hash happens to be 0 is given the fixed substitute 0x9e3779b97f4a7c15 (the
// 64-bit golden-ratio constant) instead, so 0 always and only means "no
// workers". The substitute shares the set's 2^-64 collision odds with any
// other value.
type Version uint64

// EmptyVersion is the Version of the empty worker set.
const EmptyVersion Version = 0

// zeroHashSubstitute replaces a hash of 0 for a non-empty set. Frozen: it is
// part of the canonical encoding.
const zeroHashSubstitute Version = 0x9e3779b97f4a7c15

// versionHexDigits is the length of the text form.
const versionHexDigits = 16

// ErrInvalidVersion is wrapped by every ParseVersion error.
var ErrInvalidVersion = errors.New("invalid placement version")

// String renders v as exactly 16 lowercase hexadecimal digits, the form
// ParseVersion reads.
func (v Version) String() string {
	var b [versionHexDigits]byte
	return string(v.appendHex(b[:0]))
}

func (v Version) appendHex(b []byte) []byte {
	const digits = "0123456789abcdef"
	for shift := 60; shift >= 0; shift -= 4 {
		b = append(b, digits[(uint64(v)>>uint(shift))&0xf])
	}
	return b
}

// ParseVersion parses the form String writes: exactly 16 lowercase
// hexadecimal digits, nothing else (no 0x prefix, sign, space or upper
// case). Errors are *FieldError wrapping ErrInvalidVersion.
func ParseVersion(s string) (Version, error) {
	if len(s) != versionHexDigits {
		return 0, &FieldError{Field: "version", Value: quote(s), Rule: fmt.Sprintf("must be exactly %d lowercase hex digits, got %d bytes", versionHexDigits, len(s)), err: ErrInvalidVersion}
	}
	var v uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		default:
			return 0, &FieldError{Field: "version", Value: quote(s), Rule: fmt.Sprintf("has %s at byte %d; must be exactly %d lowercase hex digits (0-9, a-f)", describeByte(c), i, versionHexDigits), err: ErrInvalidVersion}
		}
		v = v<<4 | uint64(d)
	}
	return Version(v), nil
}

// MarshalText implements encoding.TextMarshaler with the String form, so a
// Version is a JSON string rather than a number that JavaScript would round.
func (v Version) MarshalText() ([]byte, error) {
	return v.appendHex(make([]byte, 0, versionHexDigits)), nil
}

// UnmarshalText implements encoding.TextUnmarshaler with ParseVersion.
func (v *Version) UnmarshalText(b []byte) error {
	p, err := ParseVersion(string(b))
	if err != nil {
		return err
	}
	*v = p
	return nil
}

// appendCanonical appends the frozen canonical encoding of nodes, which must
// already be sorted by ID: per node, each of ID, Address and Role as a
// uvarint byte length followed by the bytes.
func appendCanonical(b []byte, nodes []Node) []byte {
	for i := range nodes {
		n := &nodes[i]
		b = appendField(b, n.ID)
		b = appendField(b, n.Address)
		b = appendField(b, string(n.Role))
	}
	return b
}

func appendField(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// versionOf computes the Version of nodes sorted canonically.
func versionOf(sorted []Node) Version {
	if len(sorted) == 0 {
		return EmptyVersion
	}
	size := 0
	for i := range sorted {
		size += len(sorted[i].ID) + len(sorted[i].Address) + len(sorted[i].Role) + 3*binary.MaxVarintLen16
	}
	return versionFromHash(xxh3.Hash(appendCanonical(make([]byte, 0, size), sorted)))
}

// versionFromHash maps the hash of a non-empty set to its Version.
func versionFromHash(h uint64) Version {
	if h == 0 {
		return zeroHashSubstitute
	}
	return Version(h)
}

// FieldError reports an input that broke a rule: the field, its value (or a
// description of it) and the rule. It wraps the sentinel of its class
// (ErrInvalidVersion, ErrInvalidNode or ErrDuplicateNode).
type FieldError struct {
	Field string // e.g. "version", "nodes[3].id"
	Value string // the value, quoted, or a description such as "of 300 bytes"
	Rule  string // the rule broken
	err   error
}

func (e *FieldError) Error() string { return e.Field + " " + e.Value + ": " + e.Rule }

// Unwrap returns the sentinel, for errors.Is.
func (e *FieldError) Unwrap() error { return e.err }

// describeByte renders a byte for an error: quoted when printable ASCII,
// hex otherwise (a lone byte of a UTF-8 sequence is not a character).
func describeByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf("0x%02x", c)
}

// quote shortens a value for an error message while keeping its size visible.
func quote(s string) string {
	if len(s) > 40 {
		return fmt.Sprintf("%q... (%d bytes)", s[:40], len(s))
	}
	return strconv.Quote(s)
}
