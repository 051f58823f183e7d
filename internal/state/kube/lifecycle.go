package kube

import (
	"context"
	"sync"

	"github.com/talonhq/talon/internal/state"
)

// lifecycle is the store's lifetime and the goroutines Close waits for:
// open watches, the snapshot cache, shared probes and fence writes.
type lifecycle struct {
	// ctx is canceled by Close; it ends every watch.
	ctx    context.Context
	cancel context.CancelFunc

	// mu guards closed. goOwned holds it while it adds to wg, so shut
	// (which sets closed under mu, then waits) never races an Add.
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

func newLifecycle() lifecycle {
	ctx, cancel := context.WithCancel(context.Background())
	return lifecycle{ctx: ctx, cancel: cancel}
}

// goOwned runs fn on a goroutine of the store (Close waits for it), or
// returns state.ErrClosed after Close.
func (l *lifecycle) goOwned(fn func()) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return state.ErrClosed
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		fn()
	}()
	return nil
}

// checkOpen returns state.ErrClosed after Close.
func (l *lifecycle) checkOpen() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return state.ErrClosed
	}
	return nil
}

// shut marks the store closed, ends its lifetime and waits for its
// goroutines; it reports false when it was closed already.
func (l *lifecycle) shut() bool {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return false
	}
	l.closed = true
	l.mu.Unlock()
	l.cancel()
	l.wg.Wait()
	return true
}
