package etcd

import (
	"log/slog"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/talonhq/talon/internal/testsupport"
)

// TestClientLoggerToSlog: the etcd client's warnings reach slog with their
// fields; its info chatter does not.
func TestClientLoggerToSlog(t *testing.T) {
	var buf testsupport.SyncBuffer
	z := clientLogger(slog.New(slog.NewTextHandler(&buf, nil))).With(zap.String("endpoint", "10.0.0.5:2379"))
	z.Info("chatter")
	z.Warn("retrying of unary invoker failed", zap.Int("attempt", 3))
	z.Error("lost leader")
	out := buf.String()
	if strings.Contains(out, "chatter") {
		t.Fatalf("info reached slog:\n%s", out)
	}
	for _, want := range []string{`level=WARN msg="retrying of unary invoker failed"`, "component=etcd-client", "endpoint=10.0.0.5:2379", "attempt=3", `level=ERROR msg="lost leader"`} {
		if !strings.Contains(out, want) {
			t.Fatalf("missing %q in:\n%s", want, out)
		}
	}
}
