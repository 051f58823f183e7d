// Package suggest finds the names closest to a mistyped one, for "did you
// mean" hints in talon's configuration errors and talonctl's usage errors.
// Pure functions.
package suggest

import (
	"slices"
	"strings"
)

// MaxDistance is the largest edit distance Closest suggests at.
const MaxDistance = 2

// Distance returns the Levenshtein edit distance between a and b (bytes).
func Distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Closest returns the candidates nearest to name (case-insensitive): those
// at the smallest edit distance up to MaxDistance, or, when none is that
// close, those name is a prefix of (at least 3 bytes). Sorted; nil when
// nothing is close.
func Closest(name string, candidates []string) []string {
	n := strings.ToLower(name)
	best, out := MaxDistance+1, []string(nil)
	for _, c := range candidates {
		switch d := Distance(n, strings.ToLower(c)); {
		case d < best:
			best, out = d, []string{c}
		case d == best:
			out = append(out, c)
		}
	}
	if out == nil && len(n) >= 3 {
		for _, c := range candidates {
			if strings.HasPrefix(strings.ToLower(c), n) {
				out = append(out, c)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Hint returns ` (did you mean "x"?)` for the closest candidates, or "".
func Hint(name string, candidates []string) string {
	c := Closest(name, candidates)
	if len(c) == 0 {
		return ""
	}
	q := make([]string, len(c))
	for i, s := range c {
		q[i] = `"` + s + `"`
	}
	return " (did you mean " + strings.Join(q, " or ") + "?)"
}
