package backoff

import (
	"context"
	"testing"
	"time"
)

func TestDelay(t *testing.T) {
	p := Policy{Initial: 100 * time.Millisecond, Max: time.Second, Multiplier: 2, Jitter: 0.5}
	tests := []struct {
		attempt int
		r       float64
		want    time.Duration
	}{
		{0, 0.5, 100 * time.Millisecond}, // counts as the first
		{1, 0.5, 100 * time.Millisecond},
		{2, 0.5, 200 * time.Millisecond},
		{4, 0.5, 800 * time.Millisecond},
		{5, 0.5, time.Second}, // capped
		{50, 0.5, time.Second},
		{1, 0, 50 * time.Millisecond},     // -50%
		{2, 0.75, 250 * time.Millisecond}, // +25%
		{5, 0.99, time.Second},            // jitter never passes Max
	}
	for _, tt := range tests {
		if got := p.Delay(tt.attempt, tt.r); got != tt.want {
			t.Errorf("Delay(%d, %v) = %v, want %v", tt.attempt, tt.r, got, tt.want)
		}
	}
}

func TestDelayDefaults(t *testing.T) {
	p := Policy{Initial: time.Millisecond}
	if got := p.Delay(3, 0.5); got != 4*time.Millisecond {
		t.Fatalf("default multiplier: Delay(3) = %v, want 4ms", got)
	}
	if got := p.Delay(40, 0.5); got != 1024*time.Millisecond {
		t.Fatalf("default cap: Delay(40) = %v, want 1.024s", got)
	}
	if got := (Policy{Initial: time.Second, Max: time.Millisecond}).Delay(1, 0.5); got != time.Second {
		t.Fatalf("Max below Initial: Delay(1) = %v, want Initial", got)
	}
	if got := (Policy{Initial: time.Second, Multiplier: 0.5}).Delay(3, 0.5); got != time.Second {
		t.Fatalf("Multiplier below 1: Delay(3) = %v, want 1s", got)
	}
}

func TestBackoffNextReset(t *testing.T) {
	b := New(Policy{Initial: 10 * time.Millisecond, Max: 40 * time.Millisecond})
	b.rand = func() float64 { return 0.5 }
	var got []time.Duration
	for range 4 {
		got = append(got, b.Next())
	}
	want := []time.Duration{10, 20, 40, 40}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("Next sequence %v, want %v ms", got, want)
		}
	}
	if b.Attempts() != 4 {
		t.Fatalf("Attempts = %d", b.Attempts())
	}
	b.Reset()
	if d := b.Next(); d != 10*time.Millisecond {
		t.Fatalf("after Reset: Next = %v, want 10ms", d)
	}
}

func TestSleep(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); err != context.Canceled {
		t.Fatalf("Sleep on a cancelled context = %v", err)
	}
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("Sleep = %v", err)
	}
}

func TestSleepOrWake(t *testing.T) {
	wake := make(chan struct{}, 1)
	wake <- struct{}{}
	start := time.Now()
	if err := SleepOrWake(context.Background(), time.Hour, wake); err != nil || time.Since(start) > time.Minute {
		t.Fatalf("woken sleep: %v after %s", err, time.Since(start))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := SleepOrWake(ctx, time.Hour, nil); err != context.Canceled {
		t.Fatalf("cancelled sleep: %v, want context.Canceled", err)
	}
	if err := SleepOrWake(context.Background(), time.Millisecond, nil); err != nil {
		t.Fatalf("elapsed sleep: %v", err)
	}
}
