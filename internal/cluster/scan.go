package cluster

import (
	"bytes"
	"strings"
	"unicode/utf8"
)

// decodeCanonical decodes b when it is in the shape Encode writes, and
// returns nil for anything else, which Decode then reads with the general
// decoder. It exists for the heartbeat path's budget: the general decoder
// (go-json-experiment with encoding/json v1's semantics) costs several
// times the rest of a heartbeat's record work.
//
// It accepts a subset of what the general decoder accepts, and for that
// subset it must return exactly the record the general decoder returns
// (FuzzDecodeCanonical checks both halves of that on arbitrary input):
//
//   - b starts with canonicalPrefix and holds one object, nothing after it,
//     no whitespace anywhere;
//   - object names are spelled exactly as Record's tags (no case folding)
//     and come in the order of the fields, each at most once (so neither
//     a repeated name nor a merge of repeated objects arises); any of them
//     may be missing, leaving the field zero as encoding/json does; no
//     other name (an unknown or future field) is accepted;
//   - strings hold no escape sequence, no control character and only
//     valid UTF-8 (so no U+FFFD replacement arises): every byte between
//     the quotes is the string's;
//   - integers are 0 or a digit 1-9 followed by digits, with no sign,
//     fraction or exponent, within the field's type; no null anywhere.
//
// Every string of the record is a substring of one copy of b, so the
// strings cost one allocation together; Role and Health are the package's
// constants when they hold a known value.
//
// labelsValid reports that every label read passed ValidateLabels' rules
// (so the record's labels do): Decode then skips that pass over the map.
func decodeCanonical(b []byte) (r *Record, labelsValid bool) {
	if !bytes.HasPrefix(b, canonicalPrefix) {
		return nil, false
	}
	d := scanner{s: string(b), i: len(canonicalPrefix), labelsValid: true}
	r = &Record{}
	if !d.record(r) || d.i != len(d.s) {
		return nil, false
	}
	return r, d.labelsValid
}

// scanner reads the canonical shape from s at i. Every method returns
// false as soon as the input leaves that shape; the caller then gives up.
type scanner struct {
	s string
	i int
	// labelsValid is cleared by a label that breaks a rule.
	labelsValid bool
}

// quoteNames returns names quoted and with their colon, as a member
// name is written: the tables of scan_gen.go, which
// internal/tools/recordgen generates from Record's tags with the scanner
// methods that read each member (record, capacity, counters).
func quoteNames(names ...string) []string {
	for i, n := range names {
		names[i] = `"` + n + `":`
	}
	return names
}

// members reads an object's members through its closing brace, its
// opening brace (or, for the record, canonicalPrefix) already read: each
// a name of names, in their order and at most once, whose value
// value(index) reads.
func (d *scanner) members(names []string, value func(f int) bool) bool {
	next := 0
	for {
		f := d.name(names, next)
		if f < 0 {
			return false
		}
		next = f + 1
		if !value(f) {
			return false
		}
		if end, ok := d.more(); !ok || end {
			return ok
		}
	}
}

// object reads a whole object of members (see members), {} included.
func (d *scanner) object(names []string, value func(f int) bool) bool {
	if !d.open('{') {
		return false
	}
	if d.peek('}') {
		d.i++
		return true
	}
	return d.members(names, value)
}

// labels reads a JSON object of strings into a new map (empty, not nil,
// for {}, as encoding/json does). A repeated key keeps its last value, as
// a map assignment does. An object of more than MaxLabels members is left
// to the general decoder, so that the map is sized once from a bounded
// buffer; validation refuses such a record either way.
func (d *scanner) labels() (map[string]string, bool) {
	if !d.open('{') {
		return nil, false
	}
	var kv [2 * MaxLabels]string
	n := 0
	if d.peek('}') {
		d.i++
	} else {
		for {
			if n == len(kv) {
				return nil, false
			}
			k, ok := d.str()
			if !ok || !d.open(':') {
				return nil, false
			}
			v, ok := d.str()
			if !ok {
				return nil, false
			}
			kv[n], kv[n+1] = k, v
			n += 2
			d.labelsValid = d.labelsValid && validLabel(k, v)
			end, ok := d.more()
			if !ok {
				return nil, false
			}
			if end {
				break
			}
		}
	}
	m := make(map[string]string, n/2)
	for j := 0; j < n; j += 2 {
		m[kv[j]] = kv[j+1]
	}
	return m, true
}

// strings reads a JSON array of strings (empty, not nil, for []).
func (d *scanner) strings() ([]string, bool) {
	if !d.open('[') {
		return nil, false
	}
	if d.peek(']') {
		d.i++
		return []string{}, true
	}
	var buf [MaxSuperseded]string
	out := buf[:0]
	for {
		s, ok := d.str()
		if !ok {
			return nil, false
		}
		out = append(out, s)
		if d.i >= len(d.s) {
			return nil, false
		}
		switch d.s[d.i] {
		case ',':
			d.i++
		case ']':
			d.i++
			return append([]string(nil), out...), true
		default:
			return nil, false
		}
	}
}

// name reads a member name and its colon and returns the index in names
// of the name, which must be at index next or later; -1 otherwise. A
// quoted name with no escape is the name itself, so comparing the bytes
// with the quoted names is reading the string and comparing it.
func (d *scanner) name(names []string, next int) int {
	rest := d.s[d.i:]
	for j := next; j < len(names); j++ {
		if strings.HasPrefix(rest, names[j]) {
			d.i += len(names[j])
			return j
		}
	}
	return -1
}

// more reads the separator after a member: a comma (end false) or the
// object's closing brace (end true).
func (d *scanner) more() (end, ok bool) {
	if d.i >= len(d.s) {
		return false, false
	}
	switch d.s[d.i] {
	case ',':
		d.i++
		return false, true
	case '}':
		d.i++
		return true, true
	}
	return false, false
}

// open consumes the byte c.
func (d *scanner) open(c byte) bool {
	if d.i < len(d.s) && d.s[d.i] == c {
		d.i++
		return true
	}
	return false
}

func (d *scanner) peek(c byte) bool { return d.i < len(d.s) && d.s[d.i] == c }

// str reads a string with no escape, no control character and only
// valid UTF-8.
func (d *scanner) str() (string, bool) {
	s, i := d.s, d.i
	if i >= len(s) || s[i] != '"' {
		return "", false
	}
	i++
	start := i
	ascii := true
	for {
		i += jsonPlainPrefix(s[i:])
		if i >= len(s) {
			return "", false
		}
		c := s[i]
		if c == '"' {
			break
		}
		if c < utf8.RuneSelf {
			return "", false // an escape or a control character
		}
		ascii = false
		i++
	}
	v := s[start:i]
	if !ascii && !utf8.ValidString(v) {
		return "", false // encoding/json would replace the invalid bytes
	}
	d.i = i + 1
	return v, true
}

// digits reads 0 or a nonzero digit followed by up to maxDigits-1 digits,
// ending where a member or value ends (a comma, brace or bracket), and
// returns their value, which fits in a uint64 when maxDigits is at most 19.
// A 20-digit number is left to uint64 below.
func (d *scanner) digits(maxDigits int) (uint64, int, bool) {
	s, i := d.s, d.i
	start := i
	var v uint64
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		v = v*10 + uint64(s[i]-'0') // wraps past maxDigits, refused below
		i++
	}
	n := i - start
	if n == 0 || n > maxDigits || (n > 1 && s[start] == '0') {
		return 0, 0, false
	}
	if i >= len(s) || (s[i] != ',' && s[i] != '}' && s[i] != ']') {
		return 0, 0, false // a fraction, an exponent, whitespace or anything else
	}
	d.i = i
	return v, n, true
}

func (d *scanner) int64() (int64, bool) {
	v, _, ok := d.digits(19)
	if !ok || v > 1<<63-1 {
		return 0, false
	}
	return int64(v), true
}

func (d *scanner) uint64() (uint64, bool) {
	save := d.i
	v, n, ok := d.digits(20)
	if !ok {
		return 0, false
	}
	if n == 20 {
		// v may have wrapped: the value fits only when it is at most
		// 18446744073709551615, which a string comparison settles.
		if d.s[save:d.i] > "18446744073709551615" {
			d.i = save
			return 0, false
		}
	}
	return v, true
}

func (d *scanner) bool() (bool, bool) {
	s := d.s[d.i:]
	switch {
	case len(s) >= 4 && s[:4] == "true":
		d.i += 4
		return true, true
	case len(s) >= 5 && s[:5] == "false":
		d.i += 5
		return false, true
	}
	return false, false
}

// internRole returns the Role constant spelled s, so that a decoded
// record's role refers to no input, or s itself when it is unknown
// (validation refuses it).
func internRole(s string) Role {
	switch Role(s) {
	case RoleWorker:
		return RoleWorker
	case RoleCoordinator:
		return RoleCoordinator
	}
	return Role(s)
}

// internHealth is internRole for Health.
func internHealth(s string) Health {
	switch Health(s) {
	case HealthHealthy:
		return HealthHealthy
	case HealthDegraded:
		return HealthDegraded
	case HealthUnhealthy:
		return HealthUnhealthy
	case HealthUnknown:
		return HealthUnknown
	}
	return Health(s)
}
