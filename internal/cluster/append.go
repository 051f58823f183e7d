package cluster

import (
	"slices"
	"strings"
	"unicode/utf8"
)

// appendRecord appends the stored form of r to dst: byte for byte what
// encoding/json's Marshal writes for envelope{SchemaVersion, r}, the form
// operators see with etcdctl and kubectl. It exists because the heartbeat
// path (decode, validate, encode) has a budget of 10 µs, which a
// reflection-based encoder does not meet. TestAppendRecordMatchesMarshal
// and FuzzAppendString hold it to encoding/json's output. The members are
// written by appendRecordLabels (append_gen.go), which internal/tools/recordgen
// generates from Record's fields and tags (go generate ./internal/cluster/);
// this file keeps what is not a plain scalar: strings, labels, lists.
// TestAppendRecordCoversEveryField checks every field against encoding/json.
func appendRecord(dst []byte, r *Record) []byte {
	return appendRecordLabels(dst, r, sortLabels(collectLabels(r.Labels, nil)))
}

// appendLabels appends kv, sorted by key, as a JSON object.
func appendLabels(dst []byte, kv []label) []byte {
	dst = append(dst, '{')
	for i, l := range kv {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, l.k)
		dst = append(dst, ':')
		dst = appendString(dst, l.v)
	}
	return append(dst, '}')
}

// appendStrings appends ss as a JSON array of strings.
func appendStrings(dst []byte, ss []string) []byte {
	dst = append(dst, '[')
	for i, s := range ss {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, s)
	}
	return append(dst, ']')
}

// label is one member of Record.Labels.
type label struct{ k, v string }

// collectLabels appends the members of labels to kv.
func collectLabels(labels map[string]string, kv []label) []label {
	for k, v := range labels {
		kv = append(kv, label{k, v})
	}
	return kv
}

// collectValidLabels appends the members of labels to kv, and reports
// whether they pass ValidateLabels (and so fit in a buffer of
// MaxLabels): Encode's one pass over the map.
func collectValidLabels(labels map[string]string, kv []label) ([]label, bool) {
	if len(labels) > MaxLabels {
		return kv, false
	}
	ok := true
	for k, v := range labels {
		kv = append(kv, label{k, v})
		ok = ok && validLabel(k, v)
	}
	return kv, ok
}

// sortLabels sorts kv by key, as encoding/json orders a map with string
// keys, and returns it.
func sortLabels(kv []label) []label {
	if len(kv) > MaxLabels {
		// Not from Encode, which validates first.
		slices.SortFunc(kv, func(a, b label) int { return strings.Compare(a.k, b.k) })
		return kv
	}
	// Insertion sort: at most MaxLabels entries, and no closure call
	// per comparison.
	for i := 1; i < len(kv); i++ {
		for j := i; j > 0 && kv[j].k < kv[j-1].k; j-- {
			kv[j], kv[j-1] = kv[j-1], kv[j]
		}
	}
	return kv
}

// encodedSizeHint is the size of r's encoding, with labels kv, when
// nothing in it needs escaping, rounded up: enough for one allocation in
// the common case.
func encodedSizeHint(r *Record, kv []label) int {
	n := 900 + stringFieldsLen(r)
	for _, l := range kv {
		n += len(l.k) + len(l.v) + 6
	}
	for _, id := range r.Superseded {
		n += len(id) + 3
	}
	return n
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string exactly as encoding/json does
// with HTML escaping on (its default): '"', '\\' and control characters
// escaped, '<', '>' and '&' as \u003c, \u003e and \u0026, U+2028 and
// U+2029 as \u2028 and \u2029, and each byte of invalid UTF-8 as \ufffd.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if i += htmlSafePrefix(s[i:]); i == len(s) {
			break
		}
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
