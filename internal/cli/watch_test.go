package cli_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/cli"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/testsupport"
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
		{"nodes-list-watch", false, []string{"nodes", "list", "-w", "--interval", "20ms", "--role", "worker"}, 1, "NODE"},
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

// TestWatchPrintsChangedRows: piped, a watch prints the table once, then
// only the rows that changed (not the heartbeat time), like kubectl -w.
func TestWatchPrintsChangedRows(t *testing.T) {
	e := startEnv(t, envOptions{seed: true})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out := &testsupport.SyncBuffer{}
	done := make(chan result, 1)
	go func() {
		done <- talonctl(t, run{args: []string{"nodes", "list", "-w", "--interval", "50ms", "--role", "worker"}, env: []string{"TALONCTL_SERVER=" + e.url}, ctx: ctx, out: out})
	}()
	testsupport.WaitFor(t, 10*time.Second, "the first table", func() bool { return strings.Contains(out.String(), "w-5") })
	time.Sleep(200 * time.Millisecond) // several listings, nothing changed
	first := out.String()
	if strings.Count(first, "NODE") != 1 || strings.Count(first, "w-1 ") != 1 {
		t.Fatalf("unchanged listings were printed again:\n%s", first)
	}
	rec := cluster.Record{ClusterID: clusterID, Role: cluster.RoleWorker, NodeID: "w-4", IncarnationID: "inc-w-4", Address: "w-4.data.test:7500",
		Version: "1.4.0", Health: cluster.HealthHealthy, Ready: true, HeartbeatSeq: 3, StartTimeUnixMs: t0.Add(-30 * time.Second).UnixMilli(),
		Capacity: cluster.Capacity{CapacityBytes: gib(8)}, Labels: map[string]string{"zone": "b"}}
	e.put(t, &rec)
	testsupport.WaitFor(t, 10*time.Second, "the changed row", func() bool { return len(out.String()) > len(first) })
	time.Sleep(200 * time.Millisecond)
	cancel()
	r := <-done
	added := strings.TrimPrefix(r.stdout, first)
	if r.code != 0 || strings.Contains(added, "NODE") || !strings.HasPrefix(added, "w-4 ") || strings.Count(added, "\n") != 1 || !strings.Contains(added, "true") {
		t.Fatalf("after w-4 turned ready: exit %d, added %q", r.code, added)
	}
}

// TestWatchWakesOnEvents: with a long --interval, a node that joins is
// listed at once: the watch long-polls the coordinator's events between
// listings (a server-side watch).
func TestWatchWakesOnEvents(t *testing.T) {
	e := startEnv(t, envOptions{seed: true})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := &testsupport.SyncBuffer{}
	done := make(chan result, 1)
	go func() {
		done <- talonctl(t, run{args: []string{"nodes", "list", "-w", "--interval", "20s", "--role", "worker"}, env: []string{"TALONCTL_SERVER=" + e.url}, ctx: ctx, out: out})
	}()
	testsupport.WaitFor(t, 10*time.Second, "the first table", func() bool { return strings.Contains(out.String(), "w-5") })
	time.Sleep(300 * time.Millisecond) // the watch is waiting
	rec := cluster.Record{ClusterID: clusterID, Role: cluster.RoleWorker, NodeID: "w-8", IncarnationID: "inc-w-8", Address: "w-8.data.test:7500",
		Version: "1.4.0", Health: cluster.HealthHealthy, Ready: true}
	e.put(t, &rec)
	start := time.Now()
	testsupport.WaitFor(t, 5*time.Second, "w-8 listed before the 20s interval", func() bool { return strings.Contains(out.String(), "w-8 ") })
	t.Logf("w-8 listed %s after it joined (interval 20s)", time.Since(start).Round(time.Millisecond))
	cancel()
	if r := <-done; r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
}
