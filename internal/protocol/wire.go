package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Kinds of payload decoding error. Every one is reported inside a
// *FieldError naming the message and field, and every one also matches
// ErrMalformed.
var (
	// ErrMalformed is matched by every error about bytes that are not a
	// valid message payload or frame header.
	ErrMalformed = errors.New("malformed message")
	// ErrTruncated: the payload ends inside a field.
	ErrTruncated = errors.New("truncated field")
	// ErrTrailingData: bytes remain after the last field.
	ErrTrailingData = errors.New("trailing data")
	// ErrFieldTooLarge: a length or count exceeds the field's limit.
	ErrFieldTooLarge = errors.New("field too large")
	// ErrInvalidValue: a field holds a value outside its domain (an
	// unknown enum value, a boolean other than 0 or 1, invalid UTF-8, an
	// empty required field).
	ErrInvalidValue = errors.New("invalid field value")
)

// FieldError reports one field of one message that could not be decoded
// or encoded. It matches ErrMalformed and its Kind with errors.Is.
type FieldError struct {
	Type   Type   // the message being decoded or encoded
	Field  string // the field, as named in doc.go, e.g. "owners[2].nodeId"
	Kind   error  // ErrTruncated, ErrTrailingData, ErrFieldTooLarge or ErrInvalidValue
	Detail string // the value or size found and the rule it broke
}

func (e *FieldError) Error() string {
	if e.Detail == "" {
		return fmt.Sprintf("protocol: %s.%s: %v", e.Type, e.Field, e.Kind)
	}
	return fmt.Sprintf("protocol: %s.%s: %v: %s", e.Type, e.Field, e.Kind, e.Detail)
}

// Unwrap lets errors.Is match both ErrMalformed and the kind.
func (e *FieldError) Unwrap() []error { return []error{ErrMalformed, e.Kind} }

func fieldErr(t Type, field string, kind error, format string, args ...any) *FieldError {
	return &FieldError{Type: t, Field: field, Kind: kind, Detail: fmt.Sprintf(format, args...)}
}

// reader decodes one payload strictly. The first error sticks: later reads
// return zero values, so decoders read linearly and check err once.
type reader struct {
	t   Type
	b   []byte
	off int
	err error
}

func (r *reader) need(field string, n int) bool {
	if r.err != nil {
		return false
	}
	if len(r.b)-r.off < n {
		r.err = fieldErr(r.t, field, ErrTruncated, "needs %d bytes at offset %d, %d remain", n, r.off, len(r.b)-r.off)
		return false
	}
	return true
}

func (r *reader) u8(field string) uint8 {
	if !r.need(field, 1) {
		return 0
	}
	v := r.b[r.off]
	r.off++
	return v
}

func (r *reader) u16(field string) uint16 {
	if !r.need(field, 2) {
		return 0
	}
	v := binary.BigEndian.Uint16(r.b[r.off:])
	r.off += 2
	return v
}

func (r *reader) u32(field string) uint32 {
	if !r.need(field, 4) {
		return 0
	}
	v := binary.BigEndian.Uint32(r.b[r.off:])
	r.off += 4
	return v
}

func (r *reader) u64(field string) uint64 {
	if !r.need(field, 8) {
		return 0
	}
	v := binary.BigEndian.Uint64(r.b[r.off:])
	r.off += 8
	return v
}

func (r *reader) boolean(field string) bool {
	if !r.need(field, 1) {
		return false
	}
	v := r.b[r.off]
	if v > 1 {
		r.err = fieldErr(r.t, field, ErrInvalidValue, "byte %d is not a boolean (0 or 1)", v)
		return false
	}
	r.off++
	return v == 1
}

// raw returns a u16-length-prefixed byte field, aliasing the payload. The
// declared length is checked against max before the bytes are looked at,
// so an oversize field is reported as such even when it is also truncated.
func (r *reader) raw(field string, max int) []byte {
	if r.err != nil {
		return nil
	}
	if len(r.b)-r.off < 2 {
		// The name is built only here: concatenation would allocate.
		r.need(field+".length", 2)
		return nil
	}
	n := int(binary.BigEndian.Uint16(r.b[r.off:]))
	r.off += 2
	if n > max {
		r.err = fieldErr(r.t, field, ErrFieldTooLarge, "%d bytes exceeds the %d byte limit", n, max)
		return nil
	}
	if !r.need(field, n) {
		return nil
	}
	v := r.b[r.off : r.off+n : r.off+n]
	r.off += n
	return v
}

// str returns a u16-length-prefixed UTF-8 string of at most max bytes.
func (r *reader) str(field string, max int, required bool) string {
	v := r.raw(field, max)
	if r.err != nil {
		return ""
	}
	if required && len(v) == 0 {
		r.err = fieldErr(r.t, field, ErrInvalidValue, "must not be empty")
		return ""
	}
	if !utf8.Valid(v) {
		r.err = fieldErr(r.t, field, ErrInvalidValue, "is not valid UTF-8")
		return ""
	}
	return string(v)
}

// finish returns the first error, or ErrTrailingData if bytes remain.
func (r *reader) finish() error {
	if r.err != nil {
		return r.err
	}
	if r.off != len(r.b) {
		return fieldErr(r.t, "(end)", ErrTrailingData, "%d bytes after the last field", len(r.b)-r.off)
	}
	return nil
}

// checkStr validates a string field for encoding with the same rules the
// decoder applies, so that nothing is sent that a peer would reject.
func checkStr(t Type, field, s string, max int, required bool) error {
	if err := checkStrField(t, field, s, max, required); err != nil {
		return err
	}
	return nil
}

// checkStrField is checkStr returning the concrete type, so that a caller
// can rename the field without a type assertion on a nil interface.
func checkStrField(t Type, field, s string, max int, required bool) *FieldError {
	switch {
	case len(s) > max:
		return fieldErr(t, field, ErrFieldTooLarge, "%d bytes exceeds the %d byte limit", len(s), max)
	case required && s == "":
		return fieldErr(t, field, ErrInvalidValue, "must not be empty")
	case !utf8.ValidString(s):
		return fieldErr(t, field, ErrInvalidValue, "is not valid UTF-8")
	}
	return nil
}

func appendU16(b []byte, v uint16) []byte { return binary.BigEndian.AppendUint16(b, v) }
func appendU32(b []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(b, v) }
func appendU64(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// appendStr appends a u16-length-prefixed string; callers check the bound.
func appendStr(b []byte, s string) []byte {
	b = appendU16(b, uint16(len(s)))
	return append(b, s...)
}

func appendRaw(b []byte, v []byte) []byte {
	b = appendU16(b, uint16(len(v)))
	return append(b, v...)
}
