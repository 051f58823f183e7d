package bench_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/bench"
)

func TestInterleaveOrder(t *testing.T) {
	for _, pairs := range []int{1, 3, 5} {
		t.Run(fmt.Sprint(pairs), func(t *testing.T) {
			var got []string
			err := bench.Interleave(context.Background(), pairs,
				func(_ context.Context, i int) error { got = append(got, fmt.Sprintf("raw%d", i)); return nil },
				func(_ context.Context, i int) error { got = append(got, fmt.Sprintf("talon%d", i)); return nil })
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for i := range pairs {
				want = append(want, fmt.Sprintf("raw%d", i), fmt.Sprintf("talon%d", i))
			}
			want = append(want, fmt.Sprintf("raw%d", pairs))
			if !slices.Equal(got, want) {
				t.Fatalf("order %v, want %v", got, want)
			}
		})
	}
}

func TestInterleaveStops(t *testing.T) {
	boom := errors.New("boom")
	var calls []string
	err := bench.Interleave(context.Background(), 3,
		func(_ context.Context, i int) error { calls = append(calls, fmt.Sprint("raw", i)); return nil },
		func(_ context.Context, i int) error {
			calls = append(calls, fmt.Sprint("talon", i))
			if i == 1 {
				return boom
			}
			return nil
		})
	if !errors.Is(err, boom) || !slices.Equal(calls, []string{"raw0", "talon0", "raw1", "talon1"}) {
		t.Fatalf("error %v after %v", err, calls)
	}

	ctx, cancel := context.WithCancel(context.Background())
	calls = nil
	err = bench.Interleave(ctx, 3,
		func(_ context.Context, i int) error {
			calls = append(calls, fmt.Sprint("raw", i))
			cancel()
			return nil
		},
		func(_ context.Context, i int) error { calls = append(calls, fmt.Sprint("talon", i)); return nil })
	if !errors.Is(err, context.Canceled) || !slices.Equal(calls, []string{"raw0"}) {
		t.Fatalf("cancelled: error %v after %v", err, calls)
	}
	if err := bench.Interleave(context.Background(), 0, nil, nil); err == nil || !strings.Contains(err.Error(), "pairs 0") {
		t.Fatalf("pairs 0: %v", err)
	}
}

func TestPairRatios(t *testing.T) {
	tests := []struct {
		name       string
		raw, talon []float64
		want       []float64
	}{
		// Each Talon phase over the mean of the raw phases either side.
		{"three pairs", []float64{100, 200, 100, 300}, []float64{75, 75, 100}, []float64{0.5, 0.5, 0.5}},
		// A machine that slows down steadily: the raw phases around each
		// Talon phase follow it, so the ratio holds.
		{"drift", []float64{1000, 800, 600, 400}, []float64{630, 490, 350}, []float64{0.7, 0.7, 0.7}},
		{"no closing raw phase", []float64{100, 100}, []float64{50, 60}, []float64{0.5}},
		{"zero raw mean skipped", []float64{0, 0, 100}, []float64{10, 50}, []float64{1}},
		{"nothing", nil, nil, []float64{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := bench.PairRatios(tt.raw, tt.talon)
			if len(got) != len(tt.want) {
				t.Fatalf("PairRatios = %v, want %v", got, tt.want)
			}
			for i := range got {
				if math.Abs(got[i]-tt.want[i]) > 1e-9 {
					t.Fatalf("PairRatios = %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func TestSpread(t *testing.T) {
	tests := []struct {
		xs   []float64
		want bench.Spread
		text string
	}{
		{nil, bench.Spread{}, "-"},
		{[]float64{0.7}, bench.Spread{Median: 0.7, Min: 0.7, Max: 0.7, N: 1}, "0.70"},
		{[]float64{0.74, 0.58, 0.81}, bench.Spread{Median: 0.74, Min: 0.58, Max: 0.81, N: 3}, "0.74 (0.58–0.81)"},
		{[]float64{4, 1, 3, 2}, bench.Spread{Median: 2.5, Min: 1, Max: 4, N: 4}, "2.50 (1.00–4.00)"},
		// One outlier moves the range, not the median.
		{[]float64{0.7, 0.71, 0.2, 0.69, 0.72}, bench.Spread{Median: 0.7, Min: 0.2, Max: 0.72, N: 5}, "0.70 (0.20–0.72)"},
	}
	for _, tt := range tests {
		in := slices.Clone(tt.xs)
		got := bench.SpreadOf(tt.xs)
		if got != tt.want || got.String() != tt.text {
			t.Errorf("SpreadOf(%v) = %+v %q, want %+v %q", tt.xs, got, got.String(), tt.want, tt.text)
		}
		if !slices.Equal(in, tt.xs) {
			t.Errorf("SpreadOf reordered its input: %v", tt.xs)
		}
	}
	if got := bench.SpreadOf([]float64{7.3, 5.4, 6}).Format("%.1f µs"); got != "6.0 µs (5.4 µs–7.3 µs)" {
		t.Errorf("Format = %q", got)
	}
}

func TestMerge(t *testing.T) {
	a := bench.Result{Ops: 3, Elapsed: time.Second, Latencies: []time.Duration{1, 5, 9}, Failures: map[string]int{"timeout": 1}, Renewals: 2}
	b := bench.Result{Ops: 1, Elapsed: time.Second, Latencies: []time.Duration{4}, Failures: map[string]int{"timeout": 2, "conflict": 1},
		BackedOff: 3, Renewals: 1, FirstErr: errors.New("b")}
	m := bench.Merge(a, b)
	if m.Ops != 4 || m.Elapsed != 2*time.Second || m.PerSecond() != 2 || !slices.Equal(m.Latencies, []time.Duration{1, 4, 5, 9}) ||
		m.Failures["timeout"] != 3 || m.Failures["conflict"] != 1 || m.BackedOff != 3 || m.Renewals != 3 || m.FirstErr == nil {
		t.Fatalf("Merge = %+v", m)
	}
	if e := bench.Merge(); e.Ops != 0 || e.Failures == nil || e.PerSecond() != 0 {
		t.Fatalf("Merge() = %+v", e)
	}
	if r := bench.Rates([]bench.Result{a, b}); !slices.Equal(r, []float64{3, 1}) {
		t.Fatalf("Rates = %v", r)
	}
	if p := bench.P99s([]bench.Result{a, b}); !slices.Equal(p, []float64{9, 4}) {
		t.Fatalf("P99s = %v", p)
	}
}
