package app

import (
	"errors"
	"log/slog"
	"math"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"

	"github.com/talonhq/talon/internal/testsupport"
)

// TestSetMemoryLimit: the soft memory limit is 90% of the container's
// (or AUTOMEMLIMIT's share of it), GOMEMLIMIT and AUTOMEMLIMIT=off leave
// it alone, no container limit or an unreadable one leaves it unset, and
// a malformed AUTOMEMLIMIT is a usage error naming the value and the
// range.
func TestSetMemoryLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	const gib = 1 << 30
	container := func(limit uint64, err error) memlimit.Provider {
		return func() (uint64, error) { return limit, err }
	}
	for _, tc := range []struct {
		name      string
		env       map[string]string
		container memlimit.Provider
		want      int64 // the limit after; 0: unchanged
		log, err  string
	}{
		{"from the container", nil, container(gib, nil), gib * 9 / 10, "container_limit_bytes=1073741824", ""},
		{"AUTOMEMLIMIT's share", map[string]string{"AUTOMEMLIMIT": "0.5"}, container(gib, nil), gib / 2, "ratio=0.5", ""},
		{"GOMEMLIMIT wins", map[string]string{"GOMEMLIMIT": "300MiB", "AUTOMEMLIMIT": "0.5"}, container(gib, nil), 0, "GOMEMLIMIT=300MiB", ""},
		{"off", map[string]string{"AUTOMEMLIMIT": "off"}, container(gib, nil), 0, "", ""},
		{"no container limit", nil, container(0, memlimit.ErrNoLimit), 0, "", ""},
		{"unreadable", nil, container(0, errors.New("no mountinfo")), 0, "could not be read", ""},
		{"malformed", map[string]string{"AUTOMEMLIMIT": "90%"}, container(gib, nil), 0, "", `AUTOMEMLIMIT "90%": want off, or the share`},
		{"out of range", map[string]string{"AUTOMEMLIMIT": "1.5"}, container(gib, nil), 0, "", `AUTOMEMLIMIT "1.5"`},
		{"zero", map[string]string{"AUTOMEMLIMIT": "0"}, container(gib, nil), 0, "", "above 0 and at most 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const unchanged = math.MaxInt64 - 1
			debug.SetMemoryLimit(unchanged)
			var logs testsupport.SyncBuffer
			err := setMemoryLimit(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
				func(k string) string { return tc.env[k] }, tc.container)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.err != "":
				var ue *usageError
				if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want a usage error containing %q", err, tc.err)
				}
			}
			want := tc.want
			if want == 0 {
				want = unchanged
			}
			if got := debug.SetMemoryLimit(-1); got != want {
				t.Fatalf("limit %d, want %d", got, want)
			}
			if !strings.Contains(logs.String(), tc.log) {
				t.Fatalf("log %q, want %q in it", logs.String(), tc.log)
			}
		})
	}
}
