package eventtable

import (
	"flag"
	"os"
	"path/filepath"
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

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestWatchRowsLineUpPiped: piped, a watch's rows (RFC 3339 timestamps
// with and without milliseconds, coordinator names longer than the
// default column, cordon changes) line up with the header above them and
// with each other, even when the listing before the watch was empty.
func TestWatchRowsLineUpPiped(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 14, 3, 7, 0, time.UTC)
	p := &Printer{Now: t0, Stream: true, Coordinators: []string{"coordinator-1", "coordinator-2"}}
	var b strings.Builder
	if err := p.Write(&b, nil); err != nil {
		t.Fatal(err)
	}
	p.NoHeaders, p.Clock = true, true
	for _, e := range []apiv1.Event{
		{TimeUnixMs: t0.UnixMilli(), Type: "node_joined", Role: "worker", NodeID: "worker-4", New: "healthy", Coordinator: "coordinator-1", Reason: "address 127.0.0.1:40829"},
		{TimeUnixMs: t0.Add(1234 * time.Millisecond).UnixMilli(), Type: "node_cordoned", Role: "worker", NodeID: "worker-2", Old: "uncordoned", New: "cordoned_persist", Coordinator: "coordinator-2", Reason: "talonctl nodes cordon"},
		{TimeUnixMs: t0.Add(2 * time.Second).UnixMilli(), Type: "node_readiness_changed", Role: "worker", NodeID: "worker-2", Old: "ready", New: "not_ready", Coordinator: "coordinator-1", Reason: "cordoned"},
		{TimeUnixMs: t0.Add(2500 * time.Millisecond).UnixMilli(), Type: "placement_version_changed", Coordinator: "coordinator-2", Old: "00000000000000aa", New: "00000000000000bb"},
	} {
		if err := p.Write(&b, []apiv1.Event{e}); err != nil {
			t.Fatal(err)
		}
	}
	got := b.String()
	lines := strings.Split(strings.TrimRight(got, "\n"), "\n")
	header := lines[0]
	for _, h := range p.headers()[1:] {
		col := strings.Index(header, h)
		for _, l := range lines[1:] {
			if col >= len(l) || l[col-1] != ' ' || l[col] == ' ' {
				t.Errorf("column %s starts at %d in the header but not in %q", h, col, l)
			}
		}
	}
	path := filepath.Join("testdata", "watch_piped.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update after checking the output)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (run with -update after checking the change):\n--- got\n%s--- want\n%s", path, got, want)
	}
}
