package eventtable

import (
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/apiv1"
)

// TestWatchRowsLineUp: rows a watch prints one by one keep the columns of
// the table above them, and on a terminal show the time of day instead of
// an age that always reads "0ms ago" (issue 38).
func TestWatchRowsLineUp(t *testing.T) {
	now := time.Date(2026, 12, 4, 14, 3, 7, 0, time.UTC)
	p := &Printer{TTY: true, Now: now}
	var b strings.Builder
	first := apiv1.Event{TimeUnixMs: now.Add(-90 * time.Second).UnixMilli(), Type: "node_joined", Role: "worker", NodeID: "worker-with-a-long-name", New: "healthy", Coordinator: "coord-a"}
	if err := p.Write(&b, []apiv1.Event{first}); err != nil {
		t.Fatal(err)
	}
	p.NoHeaders, p.Clock = true, true
	next := apiv1.Event{TimeUnixMs: now.UnixMilli(), Type: "node_health_changed", Role: "worker", NodeID: "w-1", Old: "healthy", New: "unhealthy", Coordinator: "coord-a"}
	if err := p.Write(&b, []apiv1.Event{next}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines:\n%s", len(lines), b.String())
	}
	if !strings.Contains(lines[1], "1.5m ago") && !strings.Contains(lines[1], "1m30s ago") {
		t.Errorf("listed row has no age: %q", lines[1])
	}
	if !strings.HasPrefix(lines[2], "14:03:07") {
		t.Errorf("watched row %q: want the time of day first", lines[2])
	}
	// Every column starts where the header's does.
	header := lines[0]
	for _, h := range p.headers()[1:] {
		col := strings.Index(header, h)
		for _, l := range lines[1:] {
			if col >= len(l) || l[col-1] != ' ' || l[col] == ' ' {
				t.Errorf("column %s starts at %d in the header but not in %q", h, col, l)
			}
		}
	}
}
