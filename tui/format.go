package tui

import (
	"fmt"
	"math"
	"time"
)

// formatAgeMs formats a heartbeat age: 0.4s, 12s, 3m04s, 2h03m, 4d02h.
func formatAgeMs(ms int64) string {
	return formatAge(time.Duration(ms) * time.Millisecond)
}

// formatAge formats a non-negative duration compactly; negative values
// format as 0s.
func formatAge(d time.Duration) string {
	d = max(d, 0)
	switch {
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d/time.Minute), int(d%time.Minute/time.Second))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	return fmt.Sprintf("%dd%02dh", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
}

// formatCountdown formats a wait in whole seconds, rounding up, so that a
// countdown never shows 0s while time remains.
func formatCountdown(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	s := int64(math.Ceil(d.Seconds()))
	if s < 60 {
		return fmt.Sprintf("%ds", s)
	}
	return fmt.Sprintf("%dm%02ds", s/60, s%60)
}

// formatInterval formats a configured interval: 500ms, 2s, 1m30s.
func formatInterval(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
	return d.Round(100 * time.Millisecond).String()
}

// formatClock formats a wall-clock time for the header; the date is added
// when it is not the day of now.
func formatClock(t, now time.Time) string {
	y1, m1, d1 := t.Date()
	y2, m2, d2 := now.Date()
	if y1 != y2 || m1 != m2 || d1 != d2 {
		return t.Format("2006-01-02 15:04:05")
	}
	return t.Format("15:04:05")
}
