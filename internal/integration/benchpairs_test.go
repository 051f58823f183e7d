package integration

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/bench/harness"
)

// benchPairsEnv sets how many raw/Talon pairs a heartbeat row of the
// report measures (default 3): the host's speed drifts between runs (two
// runs 20 minutes apart gave 0.74 and 0.58 of raw), so a ratio is the
// median of pairs measured back to back, printed with its spread.
const benchPairsEnv = "TALON_BENCH_PAIRS"

// benchPairs is TALON_BENCH_PAIRS, at least 1 (default 3).
func benchPairs(t *testing.T) int {
	v := os.Getenv(benchPairsEnv)
	if v == "" {
		return 3
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 20 {
		t.Fatalf("%s=%q: want a number of pairs from 1 to 20", benchPairsEnv, v)
	}
	return n
}

// medianSpread returns the median of xs (the mean of the middle two for
// an even count) and their minimum and maximum; NaN for none.
func medianSpread(xs []float64) (median, lo, hi float64) {
	if len(xs) == 0 {
		return math.NaN(), math.NaN(), math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := len(s) / 2
	median = s[m]
	if len(s)%2 == 0 {
		median = (s[m-1] + s[m]) / 2
	}
	return median, s[0], s[len(s)-1]
}

// medianIndex returns the index in xs of the value closest to the median
// (the pair whose figures a row shows beside the median ratio).
func medianIndex(xs []float64) int {
	med, _, _ := medianSpread(xs)
	best := 0
	for i, x := range xs {
		if math.Abs(x-med) < math.Abs(xs[best]-med)-1e-9 { // ties: the first
			best = i
		}
	}
	return best
}

// pairedRow runs pairs raw/Talon pairs with run (each a raw phase, then a
// Talon phase, on the same servers, one after the other) and returns the
// row: the median pair's figures, and the ratio as the median of the
// pairs' ratios with their range. The goal is judged on the median.
func pairedRow(t *testing.T, path string, pairs int, goalRatio, p99Factor float64, p99Cap time.Duration, run func(i int) (harness.HeartbeatReport, error)) reportRow {
	t.Helper()
	reps := make([]harness.HeartbeatReport, 0, pairs)
	ratios := make([]float64, 0, pairs)
	for i := range pairs {
		rep, err := run(i)
		if err != nil {
			t.Fatal(err)
		}
		logFailures(t, fmt.Sprintf("%s: pair %d raw", path, i+1), rep.RawResult)
		logFailures(t, fmt.Sprintf("%s: pair %d talon", path, i+1), rep.TalonResult)
		reps = append(reps, rep)
		ratios = append(ratios, rep.TalonResult.PerSecond()/rep.RawResult.PerSecond())
		t.Logf("%s: pair %d of %d: ratio %.2f", path, i+1, pairs, ratios[i])
	}
	mid := reps[medianIndex(ratios)]
	row := rateRow(path, mid.TalonResult, mid.RawResult, goalRatio, p99Factor, p99Cap)
	med, lo, hi := medianSpread(ratios)
	row.ratio = formatSpread(med, lo, hi, pairs)
	row.met = row.met && med >= goalRatio
	return row
}

// formatSpread is "median (min–max, n pairs)".
func formatSpread(med, lo, hi float64, n int) string {
	if n == 1 {
		return fmt.Sprintf("%.2f (1 pair)", med)
	}
	return fmt.Sprintf("%.2f (%.2f–%.2f, %d pairs)", med, lo, hi, n)
}

func TestMedianSpread(t *testing.T) {
	for _, tc := range []struct {
		xs            []float64
		med, lo, hi   float64
		closest       int
		formattedWith int
		formatted     string
	}{
		{[]float64{0.74, 0.58, 0.66}, 0.66, 0.58, 0.74, 2, 3, "0.66 (0.58–0.74, 3 pairs)"},
		{[]float64{0.9, 0.5}, 0.7, 0.5, 0.9, 0, 2, "0.70 (0.50–0.90, 2 pairs)"},
		{[]float64{0.8}, 0.8, 0.8, 0.8, 0, 1, "0.80 (1 pair)"},
		{[]float64{1, 5, 2, 4, 3}, 3, 1, 5, 4, 5, "3.00 (1.00–5.00, 5 pairs)"},
	} {
		med, lo, hi := medianSpread(tc.xs)
		if med != tc.med || lo != tc.lo || hi != tc.hi {
			t.Errorf("medianSpread(%v) = %v, %v, %v; want %v, %v, %v", tc.xs, med, lo, hi, tc.med, tc.lo, tc.hi)
		}
		if got := medianIndex(tc.xs); got != tc.closest {
			t.Errorf("medianIndex(%v) = %d, want %d", tc.xs, got, tc.closest)
		}
		if got := formatSpread(med, lo, hi, tc.formattedWith); got != tc.formatted {
			t.Errorf("formatSpread = %q, want %q", got, tc.formatted)
		}
	}
	if med, _, _ := medianSpread(nil); !math.IsNaN(med) {
		t.Errorf("medianSpread(nil) = %v, want NaN", med)
	}
}
