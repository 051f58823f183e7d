package bench

import (
	"context"
	"fmt"
	"slices"
)

// Interleave runs pairs Talon phases between pairs+1 raw phases, in the
// order raw 0, talon 0, raw 1, talon 1, ..., talon pairs-1, raw pairs, so
// that every Talon phase has a raw phase just before and just after it
// (PairRatios compares it with their mean). It stops at the first error,
// or before the next phase once ctx has ended, and returns that error.
func Interleave(ctx context.Context, pairs int, raw, talon func(ctx context.Context, i int) error) error {
	if pairs < 1 {
		return fmt.Errorf("interleave: pairs %d: must be at least 1", pairs)
	}
	for i := range pairs + 1 {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := raw(ctx, i); err != nil {
			return err
		}
		if i == pairs {
			break
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := talon(ctx, i); err != nil {
			return err
		}
	}
	return nil
}

// PairRatios returns, for each Talon phase i of an Interleave run,
// talon[i] over the mean of raw[i] and raw[i+1], the raw phases either
// side of it: a drift of the machine's speed during the run moves both
// sides of each ratio alike. raw holds one value more than talon; extra
// values on either side are ignored, and a pair whose raw mean is not
// positive gives no ratio.
func PairRatios(raw, talon []float64) []float64 {
	n := min(len(talon), len(raw)-1)
	out := make([]float64, 0, max(n, 0))
	for i := 0; i < n; i++ {
		if mean := (raw[i] + raw[i+1]) / 2; mean > 0 {
			out = append(out, talon[i]/mean)
		}
	}
	return out
}

// Spread is a median with the range it was taken from: the ratios of
// several raw/Talon pairs, or one figure measured several times.
type Spread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	// N is the number of values; zero means nothing was measured.
	N int `json:"n"`
}

// SpreadOf returns the median, minimum and maximum of xs (the mean of the
// two middle values for an even count); the zero Spread for none.
func SpreadOf(xs []float64) Spread {
	if len(xs) == 0 {
		return Spread{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	med := s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return Spread{Median: med, Min: s[0], Max: s[n-1], N: n}
}

// String renders s as "median (min–max)" with two decimals, the median
// alone for one value, and "-" for none.
func (s Spread) String() string { return s.Format("%.2f") }

// Format renders s as String does with verb (a fmt verb for one float64)
// for each figure.
func (s Spread) Format(verb string) string {
	switch s.N {
	case 0:
		return "-"
	case 1:
		return fmt.Sprintf(verb, s.Median)
	}
	return fmt.Sprintf(verb+" ("+verb+"–"+verb+")", s.Median, s.Min, s.Max)
}

// Merge pools several runs of the same measurement into one Result:
// operations, elapsed time, failures and renewals add up, the latencies
// are pooled, and PerSecond is the rate over all of them.
func Merge(rs ...Result) Result {
	out := Result{Failures: map[string]int{}}
	for _, r := range rs {
		out.Ops += r.Ops
		out.Elapsed += r.Elapsed
		out.Latencies = append(out.Latencies, r.Latencies...)
		for k, v := range r.Failures {
			out.Failures[k] += v
		}
		out.BackedOff += r.BackedOff
		out.Renewals += r.Renewals
		if out.FirstErr == nil {
			out.FirstErr = r.FirstErr
		}
	}
	slices.Sort(out.Latencies)
	return out
}

// Rates returns each result's PerSecond.
func Rates(rs []Result) []float64 {
	out := make([]float64, len(rs))
	for i, r := range rs {
		out[i] = r.PerSecond()
	}
	return out
}

// P99s returns each result's P99 as float64 nanoseconds.
func P99s(rs []Result) []float64 {
	out := make([]float64, len(rs))
	for i, r := range rs {
		out[i] = float64(r.P99())
	}
	return out
}
