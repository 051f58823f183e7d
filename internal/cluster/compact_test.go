package cluster

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

// strs returns every non-empty string held in v (fields, slice elements,
// map keys and values, named string types too), by reflection, so that a
// string field added to Record is seen here.
func strs(v reflect.Value, out []string) []string {
	switch v.Kind() {
	case reflect.String:
		if v.Len() > 0 {
			out = append(out, v.String())
		}
	case reflect.Pointer:
		if !v.IsNil() {
			out = strs(v.Elem(), out)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			out = strs(v.Field(i), out)
		}
	case reflect.Slice:
		for i := range v.Len() {
			out = strs(v.Index(i), out)
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			out = strs(it.Value(), strs(it.Key(), out))
		}
	}
	return out
}

// overlaps reports whether a and b share a byte of memory.
func overlaps(a, b string) bool {
	pa, pb := uintptr(unsafe.Pointer(unsafe.StringData(a))), uintptr(unsafe.Pointer(unsafe.StringData(b)))
	return pa < pb+uintptr(len(b)) && pb < pa+uintptr(len(a))
}

// sliced returns r with every string replaced by an equal substring of
// one string holding them all, as Decode leaves a record.
func sliced(r *Record) *Record {
	c := r.Clone()
	var all strings.Builder
	var set []func(string, *int)
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.String:
			s := v.String()
			all.WriteString(s)
			set = append(set, func(buf string, off *int) { v.SetString(buf[*off : *off+len(s)]); *off += len(s) })
		case reflect.Struct:
			for i := range v.NumField() {
				walk(v.Field(i))
			}
		case reflect.Slice:
			for i := range v.Len() {
				walk(v.Index(i))
			}
		case reflect.Map:
			// Rebuilt below from substrings: map entries are not settable.
		}
	}
	walk(reflect.ValueOf(c).Elem())
	labels := c.Labels
	keys := slices.Collect(maps.Keys(labels)) // one order for both passes
	for _, k := range keys {
		all.WriteString(k)
		all.WriteString(labels[k])
	}
	buf, off := all.String(), 0
	for _, f := range set {
		f(buf, &off)
	}
	if labels != nil {
		c.Labels = make(map[string]string, len(labels))
		for _, k := range keys {
			v := labels[k]
			kk := buf[off : off+len(k)]
			off += len(k)
			c.Labels[kk] = buf[off : off+len(v)]
			off += len(v)
		}
	}
	return c
}

// TestCompactCopiesEveryString: a compacted record equals the original and
// none of its strings shares memory with the original's, for records with
// every field filled at random (a string field Compact does not know of
// fails here).
func TestCompactCopiesEveryString(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	in := NewInterner(64)
	for i := range 500 {
		var r Record
		fill(rng, reflect.ValueOf(&r).Elem())
		src := sliced(&r)
		got := in.Compact(src)
		if !reflect.DeepEqual(got, src) {
			t.Fatalf("record %d: Compact =\n %#v\nwant\n %#v", i, got, src)
		}
		before, after := strs(reflect.ValueOf(src), nil), strs(reflect.ValueOf(got), nil)
		if len(after) != len(before) {
			t.Fatalf("record %d: %d strings after, %d before", i, len(after), len(before))
		}
		for _, a := range after {
			for _, b := range before {
				if overlaps(a, b) {
					t.Fatalf("record %d: compacted string %q shares memory with the original's %q", i, a, b)
				}
			}
		}
	}
	if got := in.Compact(nil); got != nil {
		t.Fatalf("Compact(nil) = %v", got)
	}
}

// TestCompactShares: two workers' records share their common strings
// (cluster ID, version, label keys and values) and not their own (node
// and incarnation IDs, addresses), which sit in one buffer per record; a
// full interner starts again rather than grow.
func TestCompactShares(t *testing.T) {
	in := NewInterner(0)
	rec := func(node string) *Record {
		r := validRecord()
		r.NodeID, r.IncarnationID, r.Address = node, "inc-"+node, "10.0.0.1:7000"
		r.Version = "v1.4.2 (go1.26.8, linux/amd64)"
		r.Labels = map[string]string{"zone": "eu-west-1b", "host": "ip-" + node, "long": strings.Repeat("x", MaxInternedBytes+1)}
		r.Superseded = []string{"old-" + node}
		return sliced(r)
	}
	a, b := in.Compact(rec("w1")), in.Compact(rec("w2"))
	same := func(x, y string) bool { return unsafe.StringData(x) == unsafe.StringData(y) }
	for _, f := range []struct {
		name string
		x, y string
	}{{"cluster ID", a.ClusterID, b.ClusterID}, {"version", a.Version, b.Version}, {"zone", a.Labels["zone"], b.Labels["zone"]}} {
		if !same(f.x, f.y) {
			t.Errorf("%s %q not shared", f.name, f.x)
		}
	}
	if same(a.Address, b.Address) || same(a.Labels["long"], b.Labels["long"]) {
		t.Errorf("the address or a label value over %d bytes is shared: they are the record's own", MaxInternedBytes)
	}
	// The record's own strings are consecutive in one buffer.
	end := func(s string) uintptr { return uintptr(unsafe.Pointer(unsafe.StringData(s))) + uintptr(len(s)) }
	if end(a.NodeID) != uintptr(unsafe.Pointer(unsafe.StringData(a.IncarnationID))) {
		t.Errorf("node ID and incarnation ID are not in one buffer")
	}

	small := NewInterner(8)
	for i := range 100 {
		small.Compact(&Record{ClusterID: fmt.Sprintf("c%d", i), Version: fmt.Sprintf("v%d", i)})
		if n := len(small.strings); n > 8 {
			t.Fatalf("interner of 8 holds %d strings", n)
		}
	}
}

// BenchmarkCompact is the cost a cache pays to keep a worker's record
// compact.
func BenchmarkCompact(b *testing.B) {
	in := NewInterner(0)
	r := validRecord()
	r.Labels = map[string]string{}
	for i := range 13 {
		r.Labels[fmt.Sprintf("label-%d", i)] = fmt.Sprintf("value-%d", i)
	}
	b.ReportAllocs()
	for b.Loop() {
		in.Compact(r)
	}
}
