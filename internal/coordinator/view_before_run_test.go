package coordinator

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/talonhq/talon/internal/metrics"
	"github.com/talonhq/talon/internal/state/memory"
)

// TestViewBeforeAndDuringRunStart: the admin listener may ask for a view
// before or while Run starts; it gets ErrNotReady or a view, never a panic
// or a race.
func TestViewBeforeAndDuringRunStart(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	proc, err := metrics.NewProcess(reg, "coordinator")
	if err != nil {
		t.Fatal(err)
	}
	store := memory.New(memory.Options{})
	defer store.Close()
	c, err := New(Options{
		ClusterID: "test", NodeID: "coord-a", Timing: testTiming,
		RequestTimeout: 200 * time.Millisecond, ShutdownTimeout: time.Second,
		Store: store, Listener: ln, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Clock: time.Now, Registerer: reg, Process: proc,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.View(context.Background()); !errors.Is(err, ErrNotReady) {
		t.Fatalf("View before Run: %v, want ErrNotReady", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = c.Run(ctx) }()
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			if _, err := c.View(context.Background()); err == nil {
				return
			} else if !errors.Is(err, ErrNotReady) {
				t.Errorf("View during start: %v", err)
				return
			}
		}
	}()
	time.Sleep(50 * time.Millisecond)
	cancel()
	wg.Wait()
}
