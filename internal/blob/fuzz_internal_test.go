package blob

import "testing"

// FuzzParseContentRange feeds arbitrary Content-Range values, which come
// from any server the store points at.
func FuzzParseContentRange(f *testing.F) {
	for _, s := range []string{"bytes 0-0/1", "bytes */0", "bytes 5-9/*", "bytes 9-5/10", "bytes -1-2/3", "bytes 0-9/5", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		first, last, total, err := parseContentRange(s)
		if err != nil {
			return
		}
		if first == -1 {
			if last != -1 {
				t.Fatalf("%q: unsatisfied range with last %d", s, last)
			}
			return
		}
		if first < 0 || last < first || (total >= 0 && last >= total) || total < -1 {
			t.Fatalf("%q parsed to first %d last %d total %d", s, first, last, total)
		}
	})
}
