package eventtable

import (
	"flag"
	"fmt"
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

// TestCoalesce: repeats of an event (same type, node, change and reason,
// from any coordinator) fold into their last occurrence with a count and
// the first time, as Kubernetes Events do; different changes stay apart;
// rows follow their last occurrence; a piped table says "(xN over D)".
func TestCoalesce(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	ev := func(s int, typ, node, old, new, coord string) apiv1.Event {
		return apiv1.Event{TimeUnixMs: t0.Add(time.Duration(s) * time.Second).UnixMilli(), Type: typ, Role: "worker", NodeID: node, Old: old, New: new, Coordinator: coord, ID: fmt.Sprint("id-", s)}
	}
	evs := []apiv1.Event{
		ev(0, "node_joined", "w-1", "", "healthy", "c1"),
		ev(1, "node_readiness_changed", "flood", "ready", "not_ready", "c1"),
		ev(2, "node_readiness_changed", "flood", "not_ready", "ready", "c2"),
		ev(3, "node_readiness_changed", "flood", "ready", "not_ready", "c2"),
		ev(4, "node_cordoned", "w-1", "", "cordoned", "c1"),
		ev(61, "node_readiness_changed", "flood", "ready", "not_ready", "c1"),
	}
	got := Coalesce(evs)
	var rows []string
	for _, f := range got {
		rows = append(rows, fmt.Sprintf("%s %s %s->%s x%d first+%ds last+%ds", f.Type, f.NodeID, f.Old, f.New, f.Count, (f.FirstUnixMs-t0.UnixMilli())/1000, (f.TimeUnixMs-t0.UnixMilli())/1000))
	}
	want := []string{
		"node_joined w-1 ->healthy x1 first+0s last+0s",
		"node_readiness_changed flood not_ready->ready x1 first+2s last+2s",
		"node_cordoned w-1 ->cordoned x1 first+4s last+4s",
		"node_readiness_changed flood ready->not_ready x3 first+1s last+61s",
	}
	if strings.Join(rows, "\n") != strings.Join(want, "\n") {
		t.Fatalf("Coalesce:\n%s\nwant:\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}
	var b strings.Builder
	if err := (&Printer{}).WriteFolded(&b, got); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "(x3 over 1m0s)") && !strings.Contains(b.String(), "(x3 over 1m)") {
		t.Fatalf("piped table has no count for the repeated event:\n%s", b.String())
	}
	if n := strings.Count(b.String(), "\n"); n != 5 {
		t.Fatalf("piped table has %d lines, want a header and 4 rows:\n%s", n, b.String())
	}
}
