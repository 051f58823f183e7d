package placement

import (
	"errors"
	"slices"
	"testing"
)

func FuzzParseVersion(f *testing.F) {
	for _, s := range []string{"", "0000000000000000", "ffffffffffffffff", "0123456789abcdef", "0123456789ABCDEF", "0x23456789abcdef", "123", "00000000000000000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseVersion(s)
		canonical := len(s) == 16 && !slices.ContainsFunc([]byte(s), func(c byte) bool {
			return !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f')
		})
		if err != nil {
			if canonical {
				t.Fatalf("ParseVersion(%q) rejected a canonical version: %v", s, err)
			}
			if !errors.Is(err, ErrInvalidVersion) {
				t.Fatalf("ParseVersion(%q) error %v does not wrap ErrInvalidVersion", s, err)
			}
			return
		}
		if !canonical {
			t.Fatalf("ParseVersion(%q) = %v, accepted a non-canonical string", s, v)
		}
		if got := v.String(); got != s {
			t.Fatalf("ParseVersion(%q).String() = %q, want the input back", s, got)
		}
	})
}

// FuzzLookupMatchesExplain checks Lookup(k, n) == Explain(k)[:n] (and
// LookupInto likewise) for arbitrary keys and n, on tables of several sizes
// including ones with forced score ties.
func FuzzLookupMatchesExplain(f *testing.F) {
	var tables []*Table
	for _, size := range []int{0, 1, 2, 3, 7, 16, 17, 64} {
		tables = append(tables, mustNew(f, workers(size)))
	}
	tied := mustNew(f, workers(9))
	for i := range tied.hashes {
		tied.hashes[i] = tied.hashes[i%3] // three groups of tied nodes
	}
	tables = append(tables, tied)

	f.Add("", 3, uint8(0))
	f.Add("bucket/object/block-0", 1, uint8(4))
	f.Add("w-0003", 20, uint8(7))
	f.Add("\x00\xff", -1, uint8(8))
	f.Fuzz(func(t *testing.T, key string, n int, which uint8) {
		tbl := tables[int(which)%len(tables)]
		ex := tbl.Explain(key)
		checkExplain(t, tbl, key, ex)
		want := candidateOwners(ex[:max(0, min(n, len(ex)))])
		if got := tbl.Lookup(key, n); !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("Lookup(%q, %d) = %v, want %v", key, n, got, want)
		}
		if got := tbl.LookupInto(key, n, make([]Owner, 2, 4)); !slices.Equal(got, want) {
			t.Fatalf("LookupInto(%q, %d) = %v, want %v", key, n, got, want)
		}
	})
}
