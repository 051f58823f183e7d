package admin

import (
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/testsupport"
)

// TestRefusedWritesAggregated: a metrics-scope token that POSTs a cordon
// with a 4 KiB node ID in a loop makes one audit line, carrying the ID
// quoted and cut to 256 bytes with its length, not one line of 4 KiB per
// request (21 MB of log in 5 s from one address); the rest are counted
// into one "N refusals from principal prometheus" line at the minute's
// end.
func TestRefusedWritesAggregated(t *testing.T) {
	cfg := scopedTokens(t)
	cfg.RateLimit = 0
	e := startCoordinator(t, envOptions{admin: cfg})
	var shift atomic.Int64 // how far the refusal log's clock is ahead
	e.srv.refusals.now = func() time.Time { return time.Now().Add(time.Duration(shift.Load())) }
	node := "w\x1b[31m" + strings.Repeat("A", 4096)
	path := apiv1.NodeActionPath(node, apiv1.SuffixCordon)
	const n = 300
	for range n {
		if r := e.do(t, http.MethodPost, path, tokMetrics); r.status != http.StatusForbidden {
			t.Fatalf("cordon with a metrics token: %d %s, want 403", r.status, r.body)
		}
	}
	var audits []string
	for _, line := range strings.Split(e.logs.String(), "\n") {
		if strings.Contains(line, "audit") {
			audits = append(audits, line)
		}
	}
	if len(audits) != 1 {
		t.Fatalf("%d audit lines for %d refused writes of one principal, want 1:\n%s", len(audits), n, strings.Join(audits, "\n"))
	}
	if l := audits[0]; len(l) > 1024 || strings.Contains(l, "\x1b") || !strings.Contains(l, "bytes)") {
		t.Fatalf("audit line of %d bytes, want the node quoted and cut with its length noted:\n%.2000s", len(l), l)
	}
	// The last requests' log calls may run after their answers: wait
	// until all are counted, then end the minute.
	waitFor(t, "every refusal counted", func() bool {
		counted := 0
		e.srv.refusals.keys.Do(refusalKey{principal: "prometheus"}, time.Now(), func(r *refusals) { counted = r.count })
		return counted == n-1
	})
	shift.Store(int64(refusalEvery + time.Second))
	e.srv.refusals.flush()
	if logs := e.logs.String(); !strings.Contains(logs, `msg="299 refusals from principal prometheus in the last 1m`) {
		t.Fatalf("no summary of the %d refusals not logged:\n%s", n-1, lastBytes(logs))
	}
}

func lastBytes(s string) string {
	if len(s) > 3000 {
		return "..." + s[len(s)-3000:]
	}
	return s
}

// TestRefusalLogBounded: refusals from 50,000 addresses keep at most
// maxRefusalKeys counts and write about refusalLines lines a minute,
// plus one line that sums the rest.
func TestRefusalLogBounded(t *testing.T) {
	clk := testsupport.NewFakeClock(time.Now())
	var buf testsupport.SyncBuffer
	l := newRefusalLog(slog.New(slog.NewTextHandler(&buf, nil)), clk.Now)
	for i := range 50_000 {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		l.note(refusalKey{client: a}, slog.LevelInfo, "nodes", http.StatusUnauthorized, "admin request refused")
		l.note(refusalKey{client: a}, slog.LevelInfo, "nodes", http.StatusUnauthorized, "admin request refused")
	}
	if n := l.keys.Len(); n > maxRefusalKeys {
		t.Fatalf("%d keys held, bound %d", n, maxRefusalKeys)
	}
	clk.Advance(refusalEvery)
	l.flush()
	lines := strings.Count(buf.String(), "\n")
	// A burst of refusalLines, then one a second over the minute, then
	// the line that sums the rest.
	if lines > 2*refusalLines+1 {
		t.Fatalf("%d lines in a minute for 100,000 refusals of 50,000 clients, want at most %d", lines, 2*refusalLines+1)
	}
	if !strings.Contains(buf.String(), "more refusals in the last minute") {
		t.Fatalf("no line sums the refusals not logged:\n%s", lastBytes(buf.String()))
	}
}

func TestLoggable(t *testing.T) {
	for in, want := range map[string]string{
		"w-1":                         "w-1",
		"cordon POST":                 "cordon POST",
		"w\n1":                        `"w\n1"`,
		`a"b`:                         `"a\"b"`,
		strings.Repeat("x", 300):      `"` + strings.Repeat("x", 256) + `"... (300 bytes)`,
		"é" + strings.Repeat("x", 10): `"é` + strings.Repeat("x", 10) + `"`,
	} {
		if got := loggable(in); got != want {
			t.Errorf("loggable(%.20q) = %.40q, want %.40q", in, got, want)
		}
	}
}
