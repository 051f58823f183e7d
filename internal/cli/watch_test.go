package cli_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/cli"
	"github.com/talonhq/talon/internal/config"
)

// cancelAfter cancels a context once n writes containing marker were seen.
type cancelAfter struct {
	mu     sync.Mutex // guards seen
	seen   int
	n      int
	marker string
	cancel context.CancelFunc
}

func (w *cancelAfter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if strings.Contains(string(p), w.marker) {
		w.seen++
		if w.seen == w.n {
			w.cancel()
		}
	}
	return len(p), nil
}

// TestWatch re-lists on an interval: appended when piped, redrawn in
// place on a terminal; it ends cleanly (exit 0) when interrupted.
func TestWatch(t *testing.T) {
	e := startEnv(t, envOptions{seed: true})
	server := "TALONCTL_SERVER=" + e.url
	tests := []struct {
		name     string
		tty      bool
		args     []string
		listings int
		marker   string
	}{
		{"nodes-list-watch", false, []string{"nodes", "list", "-w", "--interval", "20ms", "--role", "worker"}, 2, "NODE"},
		{"nodes-list-watch-yaml", false, []string{"nodes", "list", "-w", "--interval", "20ms", "--role", "worker", "-l", "tier=ssd", "-o", "yaml"}, 2, "items"},
		{"nodes-list-watch-tty", true, []string{"nodes", "list", "--watch", "--interval", "20ms", "--role", "worker"}, 2, "NODE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			w := &cancelAfter{n: tt.listings, marker: tt.marker, cancel: cancel}
			start := time.Now()
			r := talonctl(t, run{args: tt.args, env: []string{server}, tty: tt.tty, ctx: ctx, out: w})
			if r.code != cli.ExitOK || r.stderr != "" {
				t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
			}
			if time.Since(start) > 9*time.Second {
				t.Fatal("the watch did not end when its context was cancelled")
			}
			if got := strings.Count(r.stdout, tt.marker); got != tt.listings {
				t.Errorf("%d listings, want %d:\n%s", got, tt.listings, r.stdout)
			}
			golden(t, tt.name, scrub(r.stdout, ""))
		})
	}
}

// TestWatchRetriesAndStops keeps watching while no server answers and
// stops at once on an authentication failure.
func TestWatchRetriesAndStops(t *testing.T) {
	integration(t)
	t.Run("unreachable is retried", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		r := talonctl(t, run{args: []string{"nodes", "list", "-w", "--interval", "20ms"}, env: []string{"TALONCTL_SERVER=" + closedURL(t)}, ctx: ctx})
		if r.code != cli.ExitOK || r.stdout != "" {
			t.Fatalf("exit %d stdout %q", r.code, r.stdout)
		}
		if n := strings.Count(r.stderr, "(retrying in 20ms)"); n < 2 {
			t.Errorf("%d retries reported, want at least 2:\n%s", n, r.stderr)
		}
	})
	t.Run("unauthorized ends the watch", func(t *testing.T) {
		e := startEnv(t, envOptions{tokens: []config.Secret{"right"}})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r := talonctl(t, run{args: []string{"nodes", "list", "-w", "--interval", "20ms", "--token", "wrong"}, env: []string{"TALONCTL_SERVER=" + e.url}, ctx: ctx})
		if r.code != cli.ExitAuthRejected || ctx.Err() != nil {
			t.Fatalf("exit %d (ctx %v), want 4 before the deadline; stderr:\n%s", r.code, ctx.Err(), r.stderr)
		}
	})
	t.Run("tty shows the error in the redraw", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		w := &cancelAfter{n: 1, marker: "error:", cancel: cancel}
		r := talonctl(t, run{args: []string{"nodes", "list", "-w", "--interval", "20ms"}, env: []string{"TALONCTL_SERVER=" + closedURL(t)}, tty: true, ctx: ctx, out: w})
		if r.code != cli.ExitOK || !strings.Contains(r.stdout, "error: admin api unavailable") {
			t.Fatalf("exit %d stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
	})
}
