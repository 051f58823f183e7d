package coordinator

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestReadinessLoggedOncePerChange: a warm-up, then an outage seen by
// many probes, then the recovery: one line per change, the outage's with
// its reasons.
func TestReadinessLoggedOncePerChange(t *testing.T) {
	var buf bytes.Buffer
	l := readinessLog{log: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	warm := Readiness{Reasons: []string{"warming up: no cluster snapshot yet"}}
	down := Readiness{Reasons: []string{"store unreachable: etcd snapshot: timeout"}}
	for range 3 {
		l.note(warm)
	}
	l.note(Readiness{Ready: true})
	for range 100 {
		l.note(down)
	}
	for range 10 {
		l.note(Readiness{Ready: true})
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("logged %d lines, want 3 (ready, unready, ready again):\n%s", len(lines), buf.String())
	}
	for i, want := range []string{`msg="coordinator ready"`, `level=WARN msg="coordinator unready" reasons="store unreachable: etcd snapshot: timeout"`, `msg="coordinator ready again" was="store unreachable`} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d = %s, want it to contain %s", i, lines[i], want)
		}
	}
}
