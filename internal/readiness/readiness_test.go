package readiness

import (
	"bytes"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
)

// TestReportOrder: reasons come in the tracker's order whatever order
// conditions were set or probed in; unlisted conditions come last by
// name; an empty reason clears; a probe is asked on every report.
func TestReportOrder(t *testing.T) {
	tr := New(Options{Order: []Condition{Draining, "store", OwnRecord}})
	if r := tr.Report(); !r.Ready || len(r.Reasons) != 0 {
		t.Fatalf("new tracker: %+v, want ready", r)
	}
	own := "warming up"
	tr.Probe(OwnRecord, func() string { return own })
	tr.Set("zz_extra", "extra")
	tr.ProbeAll("store", func() []string { return []string{"alarm NOSPACE", "alarm CORRUPT"} })
	tr.Set(Draining, DrainingReason)
	want := []string{DrainingReason, "alarm NOSPACE", "alarm CORRUPT", "warming up", "extra"}
	for range 20 { // map order varies between reports
		if r := tr.Report(); r.Ready || !slices.Equal(r.Reasons, want) {
			t.Fatalf("report %+v, want %v", r, want)
		}
	}
	tr.Clear(Draining)
	tr.Set("zz_extra", "")
	tr.ProbeAll("store", func() []string { return nil })
	own = ""
	if r := tr.Report(); !r.Ready {
		t.Fatalf("after clearing: %+v, want ready", r)
	}
}

// TestLoggedOncePerChange: a warm-up, then an outage seen by many
// reports, then the recovery and a drain: one line per change, the
// outage's with its reasons; OnChange sees the same changes.
func TestLoggedOncePerChange(t *testing.T) {
	var buf bytes.Buffer
	var changes []Change
	reason := "warming up: no cluster snapshot yet"
	tr := New(Options{Role: "coordinator", Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})),
		OnChange: func(c Change) { changes = append(changes, c) }})
	tr.Probe("store", func() string { return reason })
	for range 3 {
		tr.Report()
	}
	reason = ""
	tr.Report()
	reason = "store unreachable: etcd snapshot: timeout"
	for range 100 {
		tr.Report()
	}
	reason = ""
	for range 10 {
		tr.Ready()
	}
	tr.Set(Draining, DrainingReason)
	tr.Report()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	wantLines := []string{`msg="coordinator ready"`, `level=WARN msg="coordinator unready" reasons="store unreachable: etcd snapshot: timeout"`,
		`msg="coordinator ready again" was="store unreachable`, `level=INFO msg="coordinator unready: draining"`}
	if len(lines) != len(wantLines) {
		t.Fatalf("logged %d lines, want %d:\n%s", len(lines), len(wantLines), buf.String())
	}
	for i, want := range wantLines {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d = %s, want it to contain %s", i, lines[i], want)
		}
	}
	type c struct {
		ready, first bool
		was          string
	}
	var got []c
	for _, ch := range changes {
		got = append(got, c{ch.Ready, ch.First, ch.Was})
	}
	wantChanges := []c{{false, true, ""}, {true, true, ""}, {false, false, ""}, {true, false, "store unreachable: etcd snapshot: timeout"}, {false, false, ""}}
	if !slices.Equal(got, wantChanges) {
		t.Errorf("changes %+v, want %+v", got, wantChanges)
	}
}

func TestOwnRecordReason(t *testing.T) {
	for _, tc := range []struct {
		registered bool
		refusal    string
		err        error
		want       string
	}{
		{registered: true, want: ""},
		{want: "warming up"},
		{err: errors.New("dial: refused"), want: "warming up: dial: refused"},
		{registered: true, refusal: "clock skew", want: "own record refused: clock skew"},
	} {
		if got := OwnRecordReason(tc.registered, tc.refusal, "warming up", tc.err); got != tc.want {
			t.Errorf("OwnRecordReason(%t, %q, %v) = %q, want %q", tc.registered, tc.refusal, tc.err, got, tc.want)
		}
	}
}
