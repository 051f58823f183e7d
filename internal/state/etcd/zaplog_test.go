package etcd

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/talonhq/talon/internal/testsupport"
)

// TestClientLoggerToSlog: the etcd client's warnings reach slog with their
// fields; its info chatter does not.
func TestClientLoggerToSlog(t *testing.T) {
	var buf testsupport.SyncBuffer
	clock := testsupport.NewFakeClock(time.Unix(1_800_000_000, 0))
	z := clientLogger(slog.New(slog.NewTextHandler(&buf, nil)), []string{"10.0.0.5:2379", "10.0.0.6:2379"}, clock.Now).
		With(zap.String("endpoint", "10.0.0.5:2379"), zap.String("target", "etcd-endpoints://0xc000123456/10.0.0.5:2379"))
	z.Info("chatter")
	z.Warn("retrying of unary invoker failed", zap.Int("attempt", 3))
	z.Error("lost leader")
	out := buf.String()
	if strings.Contains(out, "chatter") {
		t.Fatalf("info reached slog:\n%s", out)
	}
	for _, want := range []string{`level=WARN msg="retrying of unary invoker failed"`, "component=etcd-client", "endpoint=10.0.0.5:2379", "attempt=3", `level=ERROR msg="lost leader"`,
		"endpoints=10.0.0.5:2379,10.0.0.6:2379"} {
		if !strings.Contains(out, want) {
			t.Fatalf("missing %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "0xc000123456") {
		t.Fatalf("the opaque resolver target reached the log:\n%s", out)
	}
}

// TestClientLoggerRateLimitsRepeats: a warning the client repeats during
// an outage is logged once per repeatEvery, with the count of the repeats
// in between.
func TestClientLoggerRateLimitsRepeats(t *testing.T) {
	var buf testsupport.SyncBuffer
	clock := testsupport.NewFakeClock(time.Unix(1_800_000_000, 0))
	z := clientLogger(slog.New(slog.NewTextHandler(&buf, nil)), []string{"127.0.0.1:2379"}, clock.Now)
	for range 39 {
		z.Warn("retrying of unary invoker failed")
		clock.Advance(100 * time.Millisecond)
	}
	z.Warn("another warning")
	if n := strings.Count(buf.String(), "retrying of unary invoker failed"); n != 1 {
		t.Fatalf("%d lines for 39 repeats within %s, want 1:\n%s", n, repeatEvery, buf.String())
	}
	clock.Advance(repeatEvery)
	z.Warn("retrying of unary invoker failed")
	out := buf.String()
	if n := strings.Count(out, "retrying of unary invoker failed"); n != 2 || !strings.Contains(out, "repeats_not_logged=38") || !strings.Contains(out, "another warning") {
		t.Fatalf("after %s: want a second line counting 38 repeats, and other messages unaffected:\n%s", repeatEvery, out)
	}
}
