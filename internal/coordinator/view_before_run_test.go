package coordinator

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/state/memory"
)

// TestViewBeforeAndDuringRunStart: the admin listener may ask for a view
// before or while Run starts; it gets ErrNotReady or a view, never a panic
// or a race.
func TestViewBeforeAndDuringRunStart(t *testing.T) {
	store := memory.New(memory.Options{})
	defer store.Close()
	c, _, _ := newTestCoordinator(t, store, testTiming, 0, Limits{})
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
